package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// versionVariable is stamped with the release's version, as the Makefile's GO_BUILD does for
// make build and make image: `etcd-operator --version` names the release it came in.
const versionVariable = "github.com/quorumkeeper/etcd-operator/internal/version.Version"

// goBuild builds the product's package pkg (./cmd/...) of the checkout root for one platform
// ("linux/arm64"): static, without local paths (-trimpath), version stamped.
func goBuild(ctx context.Context, root, pkg, platform string, v Version, out string) error {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok {
		return fmt.Errorf("platform %q: want OS/ARCH, e.g. linux/amd64", platform)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+versionVariable+"="+v.String(), "-o", out, pkg)
	cmd.Dir = root
	// GOWORK=off: the product module alone, as make build builds it.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, platform, err, output)
	}
	return nil
}
