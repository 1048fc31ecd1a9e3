// Command image assembles the operator's OCI image from static binaries (make image), and
// unpacks it for the local cluster's node agents (hack/images.sh). It lives in the test module
// (the product's go.mod lists no image library); both callers build it from there:
//
//	go -C test build -o "$PWD/bin/image" ./cmd/image
//	bin/image build -out dist -ref etcd-operator:v1 -version v1 linux/amd64=bin/linux-amd64/etcd-operator ...
//	bin/image unpack -layout dist/oci -platform linux/amd64 -dir bin/image-root -key etcd-operator:dev
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/quorumkeeper/etcd-operator/test/image"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: image build|unpack [flags]"))
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "unpack":
		err = unpack(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: build or unpack", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	out := fs.String("out", "dist", "directory for the OCI layout (OUT/oci) and the docker archives")
	ref := fs.String("ref", "", "image reference the layout and archives are tagged with")
	ver := fs.String("version", "dev", "version for the labels")
	revision := fs.String("revision", "", "source commit for the labels")
	_ = fs.Parse(args)
	spec := image.Spec{Binaries: map[string]string{}, Version: *ver, Revision: *revision, Created: image.Created()}
	for _, arg := range fs.Args() {
		platform, path, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("argument %q: want PLATFORM=BINARY, e.g. linux/amd64=bin/linux-amd64/etcd-operator", arg)
		}
		spec.Binaries[platform] = path
	}
	idx, err := image.Build(spec)
	if err != nil {
		return err
	}
	written, err := image.Write(*out, *ref, idx)
	if err != nil {
		return err
	}
	for platform, file := range written.Tarballs {
		fmt.Printf("docker archive (%s): %s\n", platform, file)
	}
	fmt.Println(written.Layout) // last line: the layout, as make image promises
	return nil
}

// localImage is one entry of the local cluster's image map (test/localcluster/node.Image).
type localImage struct {
	Files      map[string]string `json:"files"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        []string          `json:"env,omitempty"`
}

func unpack(args []string) error {
	fs := flag.NewFlagSet("unpack", flag.ExitOnError)
	layoutDir := fs.String("layout", "dist/oci", "OCI layout written by build")
	platform := fs.String("platform", "linux/amd64", "platform to unpack")
	dir := fs.String("dir", "", "directory that becomes the image's root on the host")
	key := fs.String("key", "", "image reference under which the local cluster finds it")
	_ = fs.Parse(args)
	img, err := image.FromLayout(*layoutDir, *platform)
	if err != nil {
		return err
	}
	u, err := image.Unpack(img, *dir)
	if err != nil {
		return err
	}
	entry, err := yaml.Marshal(map[string]localImage{*key: {Files: u.Files, Entrypoint: u.Entrypoint, Cmd: u.Cmd, Env: u.Env}})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(entry)
	return err
}
