package backup

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileRevision reads the newest revision stored in an etcd snapshot file: the keys of etcd's
// "key" bucket are revisions (8 bytes of main revision, '_', 8 bytes of sub revision), in order.
func FileRevision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("%w: opening %s: %w", ErrCorrupt, path, err)
	}
	defer db.Close() //nolint:errcheck // read-only
	var rev int64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("%w: %s has no key bucket", ErrCorrupt, path)
		}
		k, _ := b.Cursor().Last()
		if len(k) >= 8 {
			rev = int64(binary.BigEndian.Uint64(k[:8]))
		}
		return nil
	})
	return rev, err
}
