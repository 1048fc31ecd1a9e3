package node

import (
	"context"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Image is what an image reference stands for on this machine: the files of its root and its
// default command, as a container engine would take them from the image's config.
type Image struct {
	// Files maps paths inside the container to host files (bind-mounted read-only).
	Files map[string]string `json:"files"`
	// Entrypoint and Cmd play the roles of the image's ENTRYPOINT and CMD.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// Env is the image's environment, e.g. PATH.
	Env []string `json:"env,omitempty"`
	// User ("uid" or "uid:gid", numeric) and WorkingDir are the image's defaults, which the
	// Pod's securityContext and workingDir override.
	User       string `json:"user,omitempty"`
	WorkingDir string `json:"workingDir,omitempty"`
}

// Images maps image references ("repository:tag") to images.
type Images map[string]Image

// LoadImages reads an images file: a YAML map of reference -> Image.
func LoadImages(path string) (Images, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the image map: %w", err)
	}
	images := Images{}
	if err := yaml.Unmarshal(data, &images); err != nil {
		return nil, fmt.Errorf("parsing the image map %s: %w", path, err)
	}
	return images, nil
}

// image finds what a container's image reference stands for, and its ID for the status: the
// image map first (images built from this checkout), else a pull from a registry on this
// machine's loopback. Any failure is a pullError.
func (p *provider) image(ctx context.Context, ref string) (Image, string, error) {
	images, err := LoadImages(p.cfg.ImagesFile)
	if err != nil {
		return Image{}, "", &pullError{err}
	}
	if img, ok := images.Resolve(ref); ok {
		return img, ref, nil
	}
	notMapped := fmt.Errorf("image %q is not in the local cluster's image map %s", ref, p.cfg.ImagesFile)
	if p.cfg.PullDir == "" {
		return Image{}, "", &pullError{notMapped}
	}
	img, id, err := newPuller(p.cfg.PullDir).pull(ctx, ref)
	if err != nil {
		return Image{}, "", &pullError{fmt.Errorf("%w; %w", notMapped, err)}
	}
	return img, id, nil
}

// Resolve finds an image by reference. A reference without a tag means ":latest"; a registry
// prefix of docker.io/ is optional, as with a container engine.
func (m Images) Resolve(ref string) (Image, bool) {
	for _, candidate := range referenceForms(ref) {
		if img, ok := m[candidate]; ok {
			return img, true
		}
	}
	return Image{}, false
}

func referenceForms(ref string) []string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i] // digests are not tracked here; the tag (if any) decides
	}
	lastSlash := strings.LastIndex(ref, "/")
	if !strings.Contains(ref[lastSlash+1:], ":") {
		ref += ":latest"
	}
	forms := []string{ref}
	if trimmed, ok := strings.CutPrefix(ref, "docker.io/"); ok {
		forms = append(forms, trimmed)
	} else {
		forms = append(forms, "docker.io/"+ref)
	}
	return forms
}

// command is what the container runs: the Pod's command and args over the image's defaults,
// with Kubernetes' rules (command replaces ENTRYPOINT and drops CMD; args replace CMD).
func (img Image) command(command, args []string) []string {
	entry, cmd := img.Entrypoint, img.Cmd
	if len(command) > 0 {
		entry, cmd = command, nil
	}
	if len(args) > 0 {
		cmd = args
	}
	return append(append([]string{}, entry...), cmd...)
}
