package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// forward opens a local port that reaches a member Pod's client port through the API server,
// so members are reachable from outside the cluster network. stop closes it.
func forward(cfg *rest.Config, namespace, pod string) (local uint16, stop func(), err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return 0, nil, err
	}
	url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", specs.ClientPort)}, stopCh, readyCh, io.Discard, &errOut)
	if err != nil {
		return 0, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-done:
		return 0, nil, ExplainForbidden(fmt.Errorf("port-forward to Pod %s: %w %s", pod, err, errOut.String()), "create pods/portforward")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		close(stopCh)
		return 0, nil, fmt.Errorf("port-forward to Pod %s: no local port: %w", pod, err)
	}
	return ports[0].Local, func() { close(stopCh) }, nil
}
