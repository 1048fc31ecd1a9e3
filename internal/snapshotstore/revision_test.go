package snapshotstore

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// revBytes is a revision as etcd writes it: main, '_', sub.
func revBytes(main, sub int64) []byte {
	b := make([]byte, 17)
	binary.BigEndian.PutUint64(b, uint64(main))
	b[8] = '_'
	binary.BigEndian.PutUint64(b[9:], uint64(sub))
	return b
}

func TestFileRevision(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keys      []int64 // main revisions in the key bucket
		compacted int64   // finishedCompactRev; 0: none recorded
		want      int64
	}{
		{name: "a store that never had a key is at revision 1", want: 1},
		{name: "the newest key", keys: []int64{2, 7, 5}, want: 7},
		{name: "every key compacted away", compacted: 40, want: 40},
		{name: "keys newer than the compaction", keys: []int64{41, 45}, compacted: 40, want: 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "snap.db")
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				keys, err := tx.CreateBucket([]byte("key"))
				if err != nil {
					return err
				}
				for _, r := range tc.keys {
					if err := keys.Put(revBytes(r, 0), []byte("kv")); err != nil {
						return err
					}
				}
				meta, err := tx.CreateBucket([]byte("meta"))
				if err != nil || tc.compacted == 0 {
					return err
				}
				return meta.Put([]byte("finishedCompactRev"), revBytes(tc.compacted, 0))
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := FileRevision(path)
			if err != nil || got != tc.want {
				t.Fatalf("revision %d (%v), want %d", got, err, tc.want)
			}
		})
	}
}
