package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// scratchFile is the snapshot file between etcd and the store. The store reads it from its
// start while etcd's stream is still being written into it, so storing overlaps streaming;
// yet etcd's stream never waits for the store (etcd holds a read transaction open while it
// streams, and a slow store would hold it longer). The file is also where the revision is
// read from once it is whole.
type scratchFile struct {
	path string
	f    *os.File
	sr   *snapshotstore.SnapshotReader

	mu      sync.Mutex
	grown   *sync.Cond
	written int64
	done    bool
	err     error // why writing stopped; nil once the whole stream passed etcd's hash check

	// handed counts what the store read of the file: the upload's progress (parts are read
	// as they are sent), more than the file when a part is sent again.
	handed atomic.Int64
}

func createScratch(dir string) (*scratchFile, error) {
	f, err := os.CreateTemp(dir, "snapshot-*.db")
	if err != nil {
		return nil, err
	}
	s := &scratchFile{path: f.Name(), f: f}
	s.grown = sync.NewCond(&s.mu)
	return s, nil
}

// save writes r into the file, checking etcd's hash at its end. Readers see the end of the
// file only after it passed.
func (s *scratchFile) save(r io.Reader) error {
	s.sr = snapshotstore.NewSnapshotReader(r)
	// Not synced: nothing trusts the file's durability. The stored copy is read back and
	// checked against the stream's own checksum, and after a crash the Job starts over.
	_, err := snapshotstore.Copy(s, s.sr)
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !s.sr.Verified() {
		err = fmt.Errorf("%w: the stream ended before etcd's hash", snapshotstore.ErrCorrupt)
	}
	s.mu.Lock()
	s.done, s.err = true, err
	s.mu.Unlock()
	s.grown.Broadcast()
	return err
}

// Write appends to the file and wakes the readers waiting for more.
func (s *scratchFile) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	s.mu.Lock()
	s.written += int64(n)
	s.mu.Unlock()
	s.grown.Broadcast()
	return n, err
}

// await blocks until the file is longer than off or writing stopped, and returns its length
// so far; the error is io.EOF once the whole stream was written, verified, and off is at or
// past its end, and the stream's failure once it failed.
func (s *scratchFile) await(off int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.written <= off && !s.done {
		s.grown.Wait()
	}
	switch {
	case s.written > off:
		return s.written, nil
	case s.err != nil:
		// Wrapped, so that no reader mistakes it for an end of data (io.ErrUnexpectedEOF).
		return s.written, fmt.Errorf("the snapshot stream failed: %w", s.err)
	}
	return s.written, io.EOF
}

// stored is how much of the file the store has taken: what it read, at most what is written.
func (s *scratchFile) stored() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(s.handed.Load(), s.written)
}

// reader reads the file from its start, as far as it is written, and ends where the verified
// stream ended.
func (s *scratchFile) reader() (io.ReadCloser, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	return &scratchReader{s: s, f: f}, nil
}

type scratchReader struct {
	s   *scratchFile
	f   *os.File
	off int64
}

func (r *scratchReader) Read(p []byte) (int, error) {
	size, err := r.s.await(r.off)
	if err != nil {
		return 0, err
	}
	n, err := r.f.ReadAt(p[:min(int64(len(p)), size-r.off)], r.off)
	r.off += int64(n)
	r.s.handed.Add(int64(n))
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil // only what is written was asked for
	}
	return n, err
}

// ReadAt and Await make the reader a snapshotstore.GrowingFile: the S3 store uploads parts of it
// from where they lie in the file.
func (r *scratchReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.f.ReadAt(p, off)
	r.s.handed.Add(int64(n))
	return n, err
}

func (r *scratchReader) Await(off int64) (int64, error) { return r.s.await(off) }

func (r *scratchReader) Close() error { return r.f.Close() }

func (s *scratchFile) remove() { _ = os.Remove(s.path) }
