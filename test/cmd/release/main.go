// Command release writes a release of the operator into a directory (make release) and pushes
// its image and chart to a registry (make push); package test/release does the work. It lives
// in the test module, beside the image builder, so the product's go.mod lists no registry or
// kustomize library. Paths are absolute: go -C test runs it in test/.
//
//	go -C test run ./cmd/release build -root "$PWD" -out "$PWD/dist" -version v0.3.0 -image ghcr.io/org/etcd-operator
//	go -C test run ./cmd/release push -dist "$PWD/dist" -version v0.3.0 -image ghcr.io/org/etcd-operator
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/quorumkeeper/etcd-operator/test/image"
	"github.com/quorumkeeper/etcd-operator/test/release"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: release build|push [flags]"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "build":
		err = build(ctx, os.Args[2:])
	case "push":
		err = push(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: build or push", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

// versionAndImage parses the two values every command takes, refusing either before any work.
func versionAndImage(version, imageRepo string, insecure bool) (release.Version, name.Repository, error) {
	v, err := release.ParseVersion(version)
	if err != nil {
		return release.Version{}, name.Repository{}, err
	}
	repo, err := release.ParseRepository(imageRepo, insecure)
	return v, repo, err
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	root := fs.String("root", "", "the repository's checkout (absolute)")
	out := fs.String("out", "", "DIST: where the release is written (absolute)")
	version := fs.String("version", "", "VERSION: vMAJOR.MINOR.PATCH[-PRERELEASE]")
	imageRepo := fs.String("image", "", "IMAGE: the image repository; the tag is VERSION")
	revision := fs.String("revision", "", "the source's commit, for the image's labels")
	imagePlatforms := fs.String("image-platforms", strings.Join(release.DefaultImagePlatforms, " "), "the image's platforms, space-separated")
	pluginPlatforms := fs.String("plugin-platforms", strings.Join(release.DefaultPluginPlatforms, " "), "the plugin's platforms, space-separated")
	downloadURL := fs.String("download-url", release.DefaultDownloadURL, "where the krew manifest downloads the plugin's archives from (+ /VERSION/ARCHIVE)")
	_ = fs.Parse(args)
	v, repo, err := versionAndImage(*version, *imageRepo, false)
	if err != nil {
		return err
	}
	a, err := release.Run(ctx, release.Options{
		Root: *root, Out: *out, Version: v, Repository: repo, Revision: *revision, Created: image.Created(),
		ImagePlatforms: strings.Fields(*imagePlatforms), PluginPlatforms: strings.Fields(*pluginPlatforms),
		DownloadURL: *downloadURL,
	})
	if err != nil {
		return err
	}
	for _, p := range a.Plugins {
		fmt.Printf("plugin (%s): %s\n", p.Platform, p.Path)
	}
	fmt.Printf("image layout: %s\nchart: %s\nkrew manifest: %s\ninstall.yaml: %s\n", a.Layout, a.Chart, a.Krew, a.Install)
	return nil
}

func push(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dist := fs.String("dist", "", "DIST: what make release wrote (absolute)")
	version := fs.String("version", "", "VERSION the release was made with")
	imageRepo := fs.String("image", "", "IMAGE the release was made with")
	charts := fs.String("chart-repo", "", "the repository the chart goes under (as helm push oci://REPO); default: a charts repository beside IMAGE")
	plainHTTP := fs.Bool("plain-http", false, "talk HTTP, not HTTPS, to the registry (automatic for localhost, 127.0.0.0/8 and private addresses)")
	_ = fs.Parse(args)
	v, repo, err := versionAndImage(*version, *imageRepo, *plainHTTP)
	if err != nil {
		return err
	}
	chartRepo, err := chartRepository(*charts, repo, *plainHTTP)
	if err != nil {
		return err
	}
	p, err := release.Push(ctx, release.PushOptions{
		Dist: *dist, Version: v, Repository: repo, Charts: chartRepo,
		Remote: []remote.Option{credentials()},
	})
	if err != nil {
		return err
	}
	fmt.Printf("image: %s@%s\nchart: oci://%s (helm install --version %s), %s\n",
		p.Image, p.ImageDigest, p.Chart.Context(), p.Chart.TagStr(), p.ChartDigest)
	return nil
}

func chartRepository(flagValue string, image name.Repository, insecure bool) (name.Repository, error) {
	if flagValue == "" {
		return release.ChartRepository(image), nil
	}
	return release.ParseRepository(flagValue, insecure)
}

// credentials are REGISTRY_USERNAME and REGISTRY_PASSWORD when set (a CI job's token), else
// what docker login stored ($DOCKER_CONFIG/config.json, ~/.docker/config.json by default).
func credentials() remote.Option {
	user, password := os.Getenv("REGISTRY_USERNAME"), os.Getenv("REGISTRY_PASSWORD")
	if user != "" && password != "" {
		return remote.WithAuth(&authn.Basic{Username: user, Password: password})
	}
	return remote.WithAuthFromKeychain(authn.DefaultKeychain)
}
