package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// projectedFile is one file of a Secret, ConfigMap, token or downward-API volume.
type projectedFile struct {
	Data []byte
	Mode os.FileMode
}

const dataLink = "..data"

// writeAtomically makes dir show exactly files, switching from the old set to the new one in
// a single rename, as the kubelet does: the files live in a timestamped directory, "..data"
// points at it, and each visible name is a symlink through "..data". A process that reads a
// certificate and its key therefore never sees one old and one new. Reports whether anything
// changed.
func writeAtomically(dir string, files map[string]projectedFile, gid int) (bool, error) {
	if unchanged(dir, files) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	generation := fmt.Sprintf("..%s", time.Now().UTC().Format("2006_01_02_15_04_05.000000000"))
	genDir := filepath.Join(dir, generation)
	if err := writeGeneration(genDir, files, gid); err != nil {
		_ = os.RemoveAll(genDir)
		return false, err
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(generation, tmpLink); err != nil {
		return false, err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataLink)); err != nil {
		return false, err
	}
	if err := linkTopLevelNames(dir, files); err != nil {
		return false, err
	}
	if old != "" && old != generation {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return true, nil
}

func writeGeneration(genDir string, files map[string]projectedFile, gid int) error {
	if err := os.MkdirAll(genDir, 0o755); err != nil {
		return err
	}
	for name, f := range files {
		path := filepath.Join(genDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.Data, f.Mode); err != nil {
			return err
		}
		// WriteFile's mode is filtered by the umask; set it exactly.
		if err := os.Chmod(path, f.Mode); err != nil {
			return err
		}
		if gid > 0 {
			if err := os.Chown(path, 0, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// linkTopLevelNames points each visible name at "..data/<name>" and drops names no longer
// projected.
func linkTopLevelNames(dir string, files map[string]projectedFile) error {
	want := map[string]bool{}
	for name := range files {
		want[strings.SplitN(name, "/", 2)[0]] = true
	}
	for top := range want {
		link := filepath.Join(dir, top)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataLink, top) {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(dataLink, top), link); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !want[e.Name()] {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

func unchanged(dir string, files map[string]projectedFile) bool {
	current := filepath.Join(dir, dataLink)
	if _, err := os.Stat(current); err != nil {
		return false
	}
	count := 0
	err := filepath.WalkDir(current+"/", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		count++
		rel, _ := filepath.Rel(current, path)
		want, ok := files[rel]
		if !ok {
			return fmt.Errorf("extra file %s", rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		have, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(have, want.Data) || info.Mode().Perm() != want.Mode {
			return fmt.Errorf("changed %s", rel)
		}
		return nil
	})
	return err == nil && count == len(files)
}
