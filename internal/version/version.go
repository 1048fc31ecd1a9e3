// Package version holds the operator's version, stamped at build time:
//
//	go build -ldflags "-X github.com/quorumkeeper/etcd-operator/internal/version.Version=v0.3.0"
//
// The Makefile's LDFLAGS does it for `make build` and `make image`.
package version

// Version is the operator's release ("dev" for a build without the Makefile's flags).
var Version = "dev"

// Revision is the commit the binary was built from, where the build stamps it (`make plugin`
// does); "" otherwise, when `kubectl etcd version` falls back to what Go recorded.
var Revision = ""
