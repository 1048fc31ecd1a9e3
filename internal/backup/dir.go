package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DirStore keeps snapshot files under a directory (a mounted PersistentVolumeClaim). A
// temporary file is written beside the final one and renamed into place, so a crash leaves
// only a ".partial" file; the checksum is recorded in "<file>.sha256".
type DirStore struct {
	Root string
}

// PartialName is where a snapshot file is written before it is verified and committed.
func PartialName(name string) string { return name + ".partial" }

// ErrNoSpace says the volume is full.
var ErrNoSpace = errors.New("no space left on the volume")

func (d DirStore) path(name string) (string, error) {
	clean := filepath.Clean("/" + name)
	if clean == "/" || strings.Contains(name, "..") {
		return "", fmt.Errorf("file name %q is not a path inside the volume", name)
	}
	return filepath.Join(d.Root, clean), nil
}

// Exists implements Store.
func (d DirStore) Exists(_ context.Context, name string) (bool, error) {
	p, err := d.path(name)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// WriteTemp implements Store: the file is synced before it is reported written.
func (d DirStore) WriteTemp(_ context.Context, name string, r io.Reader) (string, error) {
	p, err := d.path(name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return "", wrapFS(err)
	}
	tmp := PartialName(name)
	f, err := os.OpenFile(PartialName(p), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return "", wrapFS(err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(PartialName(p))
		return "", wrapFS(err)
	}
	return tmp, nil
}

// Open implements Store.
func (d DirStore) Open(_ context.Context, name string) (io.ReadCloser, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return f, err
}

// Commit implements Store: the checksum file is written first, the rename makes the snapshot
// visible in one step, and the directory is synced so the rename survives a crash.
func (d DirStore) Commit(ctx context.Context, tmp, name, checksum string) error {
	from, err := d.path(tmp)
	if err != nil {
		return err
	}
	to, err := d.path(name)
	if err != nil {
		return err
	}
	if err := writeFileSynced(to+".sha256", []byte(checksum+"\n")); err != nil {
		return wrapFS(err)
	}
	if err := os.Rename(from, to); err != nil {
		return wrapFS(err)
	}
	return syncDir(filepath.Dir(to))
}

// Remove implements Store.
func (d DirStore) Remove(_ context.Context, name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	for _, f := range []string{p, p + ".sha256"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// RecordedChecksum implements Store.
func (d DirStore) RecordedChecksum(_ context.Context, name string) (string, error) {
	p, err := d.path(name)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p + ".sha256")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(data)), err
}

func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close() // read-only
	return f.Sync()
}

func wrapFS(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
