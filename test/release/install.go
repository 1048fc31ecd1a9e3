package release

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// SourceImage is the manager's image as config/manager names it: the project's own
// repository. The release (and config/local, the local cluster's overlay) replace it.
const SourceImage = "ghcr.io/quorumkeeper/etcd-operator"

// managerContainer is the operator's container in config/manager's Deployment.
const managerContainer = "manager"

// overlay is the kustomization that turns config/default into the release's install.yaml:
// kustomize's own images transformer, as an overlay of yours would do it.
const overlay = `resources:
  - ../config/default
images:
  - name: %s
    newName: %s
    newTag: %s
`

// RenderInstall is config/default (under configDir) with the manager image image, rendered by
// kustomize's library in memory: no kubectl needed, nothing written to the checkout.
func RenderInstall(configDir string, image name.Tag) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	if err := copyTree(fs, configDir, "/config"); err != nil {
		return nil, err
	}
	kustomization := fmt.Sprintf(overlay, SourceImage, image.Context().Name(), image.TagStr())
	if err := fs.WriteFile("/release/kustomization.yaml", []byte(kustomization)); err != nil {
		return nil, err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/release")
	if err != nil {
		return nil, fmt.Errorf("kustomize %s/default: %w", configDir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, err
	}
	// The transformer matches by name: had config/manager renamed its image, it would have
	// left it alone, and install.yaml would name an image the release never pushes.
	got, err := ManagerImage(out)
	if err != nil {
		return nil, err
	}
	if got != image.Name() {
		return nil, fmt.Errorf("install.yaml's manager image is %s, want %s: does config/manager still name %s?", got, image.Name(), SourceImage)
	}
	return out, nil
}

// copyTree copies the directory src on disk to dst in fs.
func copyTree(fs filesys.FileSystem, src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return fs.MkdirAll(target)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fs.WriteFile(target, data)
	})
}

// ManagerImage is the image of the operator's container in a rendered install manifest.
func ManagerImage(install []byte) (string, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(install), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("no Deployment with a %q container", managerContainer)
		}
		if err != nil {
			return "", err
		}
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if c, ok := c.(map[string]any); ok && c["name"] == managerContainer {
				image, _ := c["image"].(string)
				return image, nil
			}
		}
	}
}
