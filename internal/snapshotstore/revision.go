package snapshotstore

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileRevision reads the store's revision from an etcd snapshot file, as etcd works it out when
// it opens its database: the newest revision in the "key" bucket (its keys are revisions: 8
// bytes of main revision, '_', 8 bytes of sub revision), raised to the revision last compacted
// ("finishedCompactRev" in "meta": a compaction can remove every key) and to 1, the revision
// of a store that never had a key. Without the last two, a snapshot of a new, empty cluster
// read as revision 0 and was refused.
func FileRevision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("%w: opening %s: %w", ErrCorrupt, path, err)
	}
	defer db.Close() //nolint:errcheck // read-only
	rev := int64(1)
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("%w: %s has no key bucket", ErrCorrupt, path)
		}
		if k, _ := b.Cursor().Last(); len(k) >= 8 {
			rev = max(rev, int64(binary.BigEndian.Uint64(k[:8])))
		}
		if meta := tx.Bucket([]byte("meta")); meta != nil {
			if v := meta.Get([]byte("finishedCompactRev")); len(v) >= 8 {
				rev = max(rev, int64(binary.BigEndian.Uint64(v[:8])))
			}
		}
		return nil
	})
	return rev, err
}
