package snapshotstore

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
// only a ".partial" file; the checksum is recorded in "<file>.sha256", the owner in
// "<file>.owner".
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

// Commit implements Store. The owner is claimed first, in "<file>.owner" created only if
// absent (O_EXCL): of two writers of one name, one gets the claim and the other
// ErrAlreadyExists before it touches anything. Then the checksum file, then a hard link makes
// the snapshot visible in one step and fails, unlike a rename, when a file of that name
// exists (one stored before owners were recorded); the directory is synced so the link
// survives a crash. A crash after the claim leaves a claim without a file, which its
// snapshot's deletion removes.
func (d DirStore) Commit(_ context.Context, tmp, name, checksum, owner string) error {
	from, err := d.path(tmp)
	if err != nil {
		return err
	}
	to, err := d.path(name)
	if err != nil {
		return err
	}
	created, err := claim(to+ownerSuffix, owner)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		if created {
			// A file without an owner: ours is no claim on it.
			_ = os.Remove(to + ownerSuffix)
		}
		return fmt.Errorf("%w: %s", ErrAlreadyExists, name)
	}
	if err := writeFileSynced(to+".sha256", []byte(checksum+"\n")); err != nil {
		return wrapFS(err)
	}
	if err := os.Link(from, to); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrAlreadyExists, name)
		}
		return wrapFS(err)
	}
	if err := os.Remove(from); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// ownerSuffix names the file beside a snapshot file that records its owner.
const ownerSuffix = ".owner"

// claim creates path holding owner, unless it exists: then it must hold owner already (an
// earlier attempt of the same writer), else ErrAlreadyExists. True when it created it.
func claim(path, owner string) (bool, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if errors.Is(err, fs.ErrExist) {
		have, rerr := os.ReadFile(path)
		if rerr != nil {
			return false, rerr
		}
		if strings.TrimSpace(string(have)) != owner {
			return false, fmt.Errorf("%w: claimed by %s", ErrAlreadyExists, strings.TrimSpace(string(have)))
		}
		return false, nil
	}
	if err != nil {
		return false, wrapFS(err)
	}
	_, err = f.WriteString(owner + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return true, wrapFS(err)
}

// Remove implements Store: the owner's claim goes last, so the name stays claimed until the
// file is gone.
func (d DirStore) Remove(_ context.Context, name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	for _, f := range []string{p, p + ".sha256", p + ownerSuffix} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// RecordedOwner implements Store. A claim without a file (a writer that died before the
// link) is reported as that owner's, so that its snapshot's deletion removes the claim.
func (d DirStore) RecordedOwner(_ context.Context, name string) (string, error) {
	p, err := d.path(name)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p + ownerSuffix)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if _, err := os.Lstat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return "", err
	}
	return "", nil
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

// List returns the names of the files under the directory prefix (relative to the volume's
// root, as the other methods take them), without the files recorded beside them; a missing
// directory holds none.
func (d DirStore) List(_ context.Context, prefix string) ([]string, error) {
	p, err := d.path(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || e.IsDir() || strings.HasSuffix(path, ".sha256") || strings.HasSuffix(path, ownerSuffix) {
			return err
		}
		rel, err := filepath.Rel(d.Root, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	return out, wrapFS(err)
}
