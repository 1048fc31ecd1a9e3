package agent

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// fakeStream is content followed by its sha256, as etcd streams a snapshot.
func fakeStream(size int) []byte {
	body := bytes.Repeat([]byte("etcd"), size/4)
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

// readWhileSaved writes data into a scratch file in small pieces through a pipe while a
// reader of the file copies it; it returns what the reader got and its error.
func readWhileSaved(t *testing.T, data []byte) ([]byte, error, error) {
	t.Helper()
	s, err := createScratch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.remove()
	pr, pw := io.Pipe()
	go func() {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1000)
			_, _ = pw.Write(rest[:n])
			rest = rest[n:]
		}
		_ = pw.Close()
	}()
	saved := make(chan error, 1)
	go func() { saved <- s.save(pr) }()
	r, err := s.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, readErr := io.ReadAll(r)
	return got, readErr, <-saved
}

func TestScratchReaderFollowsTheStreamToItsVerifiedEnd(t *testing.T) {
	good := fakeStream(100_000)
	got, readErr, saveErr := readWhileSaved(t, good)
	if readErr != nil || saveErr != nil || !bytes.Equal(got, good) {
		t.Fatalf("read %d of %d bytes, read error %v, save error %v", len(got), len(good), readErr, saveErr)
	}
	// A damaged stream ends the reader with the stream's error, never with an end of data:
	// an upload reading it must fail rather than store what it read.
	bad := bytes.Clone(good)
	bad[500] ^= 1
	for name, data := range map[string][]byte{"flipped bit": bad, "truncated": good[:len(good)-10]} {
		_, readErr, saveErr := readWhileSaved(t, data)
		if !errors.Is(saveErr, snapshotstore.ErrCorrupt) || !errors.Is(readErr, snapshotstore.ErrCorrupt) {
			t.Errorf("%s: read error %v, save error %v; want both ErrCorrupt", name, readErr, saveErr)
		}
		if errors.Is(readErr, io.EOF) || readErr == io.ErrUnexpectedEOF { //nolint:errorlint // minio-go compares with ==
			t.Errorf("%s: the reader ended as if the data were complete: %v", name, readErr)
		}
	}
}
