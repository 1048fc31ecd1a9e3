package node

import (
	"os"
	"testing"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/runtime"
)

func TestMain(m *testing.M) {
	// runtime.Start re-executes this test binary as container-init.
	if len(os.Args) > 1 && os.Args[1] == runtime.InitCommand {
		runtime.InitMain(os.Args[2:])
	}
	os.Exit(m.Run())
}
