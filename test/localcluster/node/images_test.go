package node

import (
	"reflect"
	"testing"
)

func TestImageResolveAcceptsTheUsualReferenceForms(t *testing.T) {
	images := Images{
		"quay.io/coreos/etcd:v3.6.16": {Cmd: []string{"/usr/local/bin/etcd"}},
		"busybox:latest":              {Cmd: []string{"sh"}},
	}
	for ref, want := range map[string]bool{
		"quay.io/coreos/etcd:v3.6.16":               true,
		"quay.io/coreos/etcd:v3.6.16@sha256:abcdef": true,
		"quay.io/coreos/etcd:v3.5.21":               false,
		"busybox":                                   true,
		"docker.io/busybox":                         true,
		"docker.io/library/busybox:1.36":            false,
	} {
		if _, ok := images.Resolve(ref); ok != want {
			t.Errorf("Resolve(%q) found=%v, want %v", ref, ok, want)
		}
	}
}

func TestCommandFollowsKubernetesRules(t *testing.T) {
	img := Image{Entrypoint: []string{"/entry"}, Cmd: []string{"--default"}}
	cases := []struct {
		command, args, want []string
	}{
		{nil, nil, []string{"/entry", "--default"}},
		{nil, []string{"--x"}, []string{"/entry", "--x"}},
		{[]string{"/bin/other"}, nil, []string{"/bin/other"}},
		{[]string{"/bin/other"}, []string{"--y"}, []string{"/bin/other", "--y"}},
	}
	for _, c := range cases {
		if got := img.command(c.command, c.args); !reflect.DeepEqual(got, c.want) {
			t.Errorf("command(%v, %v) = %v, want %v", c.command, c.args, got, c.want)
		}
	}
}
