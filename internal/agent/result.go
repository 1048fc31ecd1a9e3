// Package agent holds the programs the operator runs inside Pods from its own image: the
// snapshot agent (a Job that streams a snapshot of a cluster to S3 or a PVC) and the restore
// agent (an init container that puts a snapshot into a new member's data directory). Each
// reports its outcome as JSON in the container's termination message, which the operator
// reads from the Pod's status: no log scraping, no service-account token.
package agent

import (
	"encoding/json"
	"os"
)

// Result is what an agent reports in its termination message.
type Result struct {
	// Reason is empty on success, else the failure's reason (see package backup's reasons
	// and the Reason* constants here).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`

	URI         string `json:"uri,omitempty"`
	SizeBytes   int64  `json:"sizeBytes,omitempty"`
	Checksum    string `json:"checksum,omitempty"`
	Revision    int64  `json:"revision,omitempty"`
	ClusterID   string `json:"clusterID,omitempty"`
	Member      string `json:"member,omitempty"`
	EtcdVersion string `json:"etcdVersion,omitempty"`
}

// maxMessage keeps the termination message under the kubelet's 4096-byte limit.
const maxMessage = 3000

// ParseResult reads a termination message; ok is false when it is no agent result.
func ParseResult(message string) (Result, bool) {
	var r Result
	if err := json.Unmarshal([]byte(message), &r); err != nil {
		return Result{}, false
	}
	return r, r.Reason != "" || r.URI != "" || r.Message != ""
}

// writeResult writes r to path (the container's terminationMessagePath).
func writeResult(path string, r Result) error {
	if len(r.Message) > maxMessage {
		r.Message = r.Message[:maxMessage] + "..."
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
