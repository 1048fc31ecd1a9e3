// Command kubectl-etcd is the `kubectl etcd` plugin: status and day-two operations of the
// etcd clusters this operator runs, reached through the API server (docs/plugin.md).
package main

import (
	"fmt"
	"os"

	"github.com/quorumkeeper/etcd-operator/internal/plugin"
)

func main() {
	if err := plugin.NewRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
