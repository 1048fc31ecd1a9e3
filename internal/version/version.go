// Package version holds the operator's version, stamped at build time:
//
//	go build -ldflags "-X github.com/quorumkeeper/etcd-operator/internal/version.Version=v0.3.0"
//
// The Makefile's LDFLAGS does it for `make build` and `make image`.
package version

import "runtime/debug"

// Version is the operator's release ("dev" for a build without the Makefile's flags).
var Version = "dev"

// StampedRevision is the commit a build stamps with -X (make plugin does: Go records none in
// a git worktree, nor with -buildvcs=false); "" otherwise.
var StampedRevision = ""

// Revision is the source's commit the binary was built from: the stamped one, else as the go
// command records it in every binary built in a git checkout (make build and make image are); "" when unknown (a
// build outside one, or with -buildvcs=false), "-dirty" after it when the checkout had changes.
func Revision() string {
	if StampedRevision != "" {
		return StampedRevision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return vcsRevision(info.Settings)
}

func vcsRevision(settings []debug.BuildSetting) string {
	var rev, dirty string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
