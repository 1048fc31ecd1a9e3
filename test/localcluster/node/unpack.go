package node

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// maxSymlinkHops bounds symlink resolution, as the kernel's ELOOP does.
const maxSymlinkHops = 40

// unpacking is an image's flattened filesystem being written under root. Symbolic and hard
// links are made only once every regular file and directory is written, so that no write of
// an entry can go through a link an earlier entry made (a symlink "etc" -> "/etc" followed by a
// file "etc/passwd" would otherwise write the host's /etc/passwd).
type unpacking struct {
	root      string
	files     []string          // container paths of regular files
	hardlinks map[string]string // container path -> container path of the file it links to
	symlinks  map[string]string // container path -> target, as written in the layer
}

// unpackImage writes img's flattened layers (whiteouts applied by mutate.Extract) under root
// and returns its config with Files relative to root. A regular file or hard link is one
// entry of Files; a symbolic link is an entry for what it resolves to inside the image (the
// runtime bind-mounts files one by one, and a bind of a host symlink would follow it on the
// host); the links are also made on disk, for the directories a symlink entry bind-mounts.
func unpackImage(img v1.Image, root string) (Image, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return Image{}, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Image{}, err
	}
	u := &unpacking{root: root, hardlinks: map[string]string{}, symlinks: map[string]string{}}
	if err := u.extract(mutate.Extract(img)); err != nil {
		return Image{}, err
	}
	if err := u.link(); err != nil {
		return Image{}, err
	}
	files, err := u.fileMap()
	if err != nil {
		return Image{}, err
	}
	c := cfg.Config
	return Image{Files: files, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, User: c.User, WorkingDir: c.WorkingDir}, nil
}

func (u *unpacking) extract(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// mutate.Extract ends the archive before it reports its own error (an unsafe
			// entry, a layer that failed to download): only the rest of the stream has it.
			_, err = io.Copy(io.Discard, rc)
			return err
		}
		if err != nil {
			return err
		}
		if err := u.entry(tr, hdr); err != nil {
			return err
		}
	}
}

func (u *unpacking) entry(r io.Reader, hdr *tar.Header) error {
	p, err := containerPath(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.writeDir(p, hdr)
	case tar.TypeReg:
		u.files = append(u.files, p)
		return u.writeFile(p, hdr, r)
	case tar.TypeSymlink:
		u.symlinks[p] = hdr.Linkname
		return nil
	case tar.TypeLink:
		target, err := containerPath(hdr.Linkname)
		u.hardlinks[p] = target
		return err
	default:
		return fmt.Errorf("layer entry %q has type %c, which the local cluster does not unpack", hdr.Name, hdr.Typeflag)
	}
}

// containerPath is a layer entry's name as an absolute path in the image. A name with a ".."
// element is refused outright, whatever it would clean to: no image needs one.
func containerPath(entry string) (string, error) {
	for _, element := range strings.Split(entry, "/") {
		if element == ".." {
			return "", fmt.Errorf("layer entry %q has a \"..\" element: refused", entry)
		}
	}
	return path.Clean("/" + entry), nil
}

// host is where a container path is written, after checking that no directory on the way
// is a symlink (which a write would follow out of the root).
func (u *unpacking) host(p string) (string, error) {
	cur := u.root
	for _, element := range strings.Split(strings.TrimPrefix(path.Dir(p), "/"), "/") {
		if element == "" {
			continue
		}
		cur = filepath.Join(cur, element)
		info, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("layer entry %s lies under the symlink %s: refused", p, cur)
		}
	}
	return filepath.Join(u.root, p), nil
}

func (u *unpacking) writeDir(p string, hdr *tar.Header) error {
	host, err := u.host(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(host, 0o755); err != nil {
		return err
	}
	return setOwnerAndMode(host, hdr)
}

func (u *unpacking) writeFile(p string, hdr *tar.Header, r io.Reader) error {
	host, err := u.host(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(host, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return setOwnerAndMode(host, hdr)
}

// setOwnerAndMode gives a file the layer's owner (when the agent may: it runs as root) and
// permissions, so that an image's user reads what it would read in a real runtime. Set-id
// bits are dropped: nothing here needs them.
func setOwnerAndMode(host string, hdr *tar.Header) error {
	if os.Geteuid() == 0 {
		if err := os.Lchown(host, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	return os.Chmod(host, hdr.FileInfo().Mode().Perm())
}

// link makes the hard links, then the symbolic links (none of them written through).
func (u *unpacking) link() error {
	for p, target := range u.hardlinks {
		host, err := u.host(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return err
		}
		if err := os.Link(filepath.Join(u.root, target), host); err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		u.files = append(u.files, p)
	}
	// In path order, so that a link under another link always finds that one made.
	for _, p := range slices.Sorted(maps.Keys(u.symlinks)) {
		target := u.symlinks[p]
		host, err := u.host(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, host); err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
	}
	return nil
}

// fileMap is Files relative to the root: each regular file, and each symlink that resolves
// inside the image to a file or directory (a dangling one is left out, as it shows nothing).
func (u *unpacking) fileMap() (map[string]string, error) {
	files := map[string]string{}
	for _, p := range u.files {
		files[p] = strings.TrimPrefix(p, "/")
	}
	for p := range u.symlinks {
		resolved, err := resolveInRoot(u.symlinks, p)
		if err != nil {
			return nil, err
		}
		info, err := os.Lstat(filepath.Join(u.root, resolved))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if info.Mode().IsRegular() || info.IsDir() {
			files[p] = strings.TrimPrefix(resolved, "/")
		}
	}
	return files, nil
}

// resolveInRoot follows the symlinks of p element by element as the container would see
// them: an absolute target starts again at the image's root, and ".." never goes above it.
// The result names no symlink on the way, so the host path under the root is safe to stat.
func resolveInRoot(symlinks map[string]string, p string) (string, error) {
	pending := strings.Split(p, "/")
	cur := "/"
	for hops := 0; len(pending) > 0; {
		element := pending[0]
		pending = pending[1:]
		if element == "" || element == "." {
			continue
		}
		next := path.Join(cur, element)
		target, ok := symlinks[next]
		if !ok {
			cur = next
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return "", fmt.Errorf("symlink %s: too many levels of symbolic links", p)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	return cur, nil
}
