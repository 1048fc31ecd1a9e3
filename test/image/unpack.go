package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Unpacked is an image's root filesystem on the host and what its config says to run.
type Unpacked struct {
	// Files maps each regular file's path in the image to its host copy.
	Files      map[string]string
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
}

// Unpack writes the image's flattened layers under dir (emptied first). Only regular files
// and directories are written: the operator's image has nothing else, and anything else is
// refused rather than silently left out.
func Unpack(img v1.Image, dir string) (Unpacked, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return Unpacked{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Unpacked{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Unpacked{}, err
	}
	out := Unpacked{
		Files:      map[string]string{},
		Entrypoint: cfg.Config.Entrypoint,
		Cmd:        cfg.Config.Cmd,
		Env:        cfg.Config.Env,
		User:       cfg.Config.User,
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return Unpacked{}, err
		}
		if err := unpackEntry(tr, hdr, dir, out.Files); err != nil {
			return Unpacked{}, err
		}
	}
}

func unpackEntry(r io.Reader, hdr *tar.Header, dir string, files map[string]string) error {
	clean := filepath.Clean("/" + hdr.Name)
	host := filepath.Join(dir, clean)
	if !strings.HasPrefix(host, filepath.Clean(dir)+string(os.PathSeparator)) {
		return fmt.Errorf("layer entry %q leaves the root", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return os.MkdirAll(host, 0o755)
	case tar.TypeReg:
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(host, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode).Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			_ = f.Close()
			return err
		}
		files[clean] = host
		return f.Close()
	default:
		return fmt.Errorf("layer entry %q has type %c, which unpacking does not handle", hdr.Name, hdr.Typeflag)
	}
}
