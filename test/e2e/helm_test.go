package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/test/operatormetrics"
)

const (
	helmRelease   = "eo-helm" // not "etcd-operator": config/default's cluster-wide names stay apart
	helmNamespace = "etcd-operator-helm"
	kustomizeNS   = "etcd-operator-system"
)

func helm(t *testing.T, args ...string) {
	t.Helper()
	bin := os.Getenv("E2E_HELM")
	if bin == "" {
		t.Fatal("E2E_HELM is not set: run through hack/e2e.sh, which builds helm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// scaleKustomizeOperator sets the replicas of the operator that hack/e2e.sh deployed from
// config/default: two operators must not manage the same clusters.
func scaleKustomizeOperator(t *testing.T, replicas int) {
	t.Helper()
	kubectl(t, kustomizeNS, "scale", "deployment/etcd-operator", fmt.Sprintf("--replicas=%d", replicas))
	eventually(t, 2*time.Minute, fmt.Sprintf("config/default's operator at %d Pods", replicas), func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(kustomizeNS), client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
			return err
		}
		if len(pods.Items) != replicas {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		return nil
	})
	if replicas > 0 {
		kubectl(t, kustomizeNS, "rollout", "status", "deployment/etcd-operator", "--timeout=3m")
	}
}

// helmValues are the non-default values the chart is installed with: each one's effect is
// checked on the running release (checkHelmValues), and none keeps the operator from running.
var helmValues = []string{
	"image.repository=etcd-operator", "image.tag=dev",
	"fullnameOverride=" + helmFullname,
	"replicas=2", // and with it the PodDisruptionBudget
	"serviceAccount.name=" + helmFullname + "-sa",
	`serviceAccount.annotations.e2e\.example/identity=helm`,
	"podLabels.e2e=helm",
	"extraEnv[0].name=E2E_MARKER", "extraEnv[0].value=helm",
	"extraArgs={--zap-stacktrace-level=panic}",
	"leaderElection.id=" + helmRelease,
	"maxConcurrentReconciles=6", "maxConcurrentRolls=3",
	"logTimeEncoding=rfc3339",
	// cert-manager is one of the local cluster's add-ons in make test-e2e.
	"metrics.certificate.certManager.enabled=true",
}

// helmFullname names the release's objects: another name than the release's, as
// fullnameOverride does.
const helmFullname = "eo-helm-operator"

// The chart installed with helm (instead of config/default) and non-default values runs an
// operator that manages three clusters (3, 1 and 3 members); helm upgrade with changed values
// rolls the operator and restarts no etcd member of any of them.
func TestHelmInstallAndUpgrade(t *testing.T) {
	scaleKustomizeOperator(t, 0)
	t.Cleanup(func() { scaleKustomizeOperator(t, 1) })
	install := []string{"install", helmRelease, "../../charts/etcd-operator", "--namespace", helmNamespace, "--create-namespace", "--wait", "--timeout", "3m"}
	for _, v := range helmValues {
		install = append(install, "--set", v)
	}
	helm(t, install...)
	t.Cleanup(func() {
		helm(t, "uninstall", helmRelease, "--namespace", helmNamespace, "--wait")
		kubectl(t, kustomizeNS, "delete", "namespace", helmNamespace, "--wait=false")
	})
	checkHelmValues(t)
	checkVerifiedMetrics(t)

	ns := namespace(t)
	sizes := map[string]int32{"helm": 3, "helm-one": 1, "helm-three": 3}
	membersBefore := map[string]string{}
	for name, n := range sizes {
		createCluster(t, ns, name, n)
	}
	for name, n := range sizes {
		waitSettled(t, ns, name, n, 5*time.Minute)
		maps.Copy(membersBefore, memberPods(t, ns, name))
	}
	checkLeaderGatedMetrics(t, ns)
	operatorBefore := deploymentGeneration(t)

	helm(t, "upgrade", helmRelease, "../../charts/etcd-operator", "--namespace", helmNamespace, "--reset-then-reuse-values",
		"--set", "logLevel=debug", "--set", "maxConcurrentRolls=5", "--wait", "--timeout", "3m")
	kubectl(t, helmNamespace, "rollout", "status", "deployment/"+helmFullname, "--timeout=3m")
	if after := deploymentGeneration(t); after == operatorBefore {
		t.Fatal("helm upgrade with a changed logLevel did not roll the operator's Deployment")
	}
	args := strings.Join(helmDeployment(t).Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--zap-log-level=debug", "--max-concurrent-rolls=5", "--max-concurrent-reconciles=6", "--zap-stacktrace-level=panic"} {
		if !strings.Contains(args, want) {
			t.Errorf("the upgraded operator's args lack %s (the changed values, and the install's kept by --reset-then-reuse-values): %s", want, args)
		}
	}
	// The new operator looks at the cluster (scale it to prove it manages it), and no
	// member's Pod was replaced or restarted on the way.
	setReplicas(t, ns, "helm", 4)
	waitSettled(t, ns, "helm", 4, 5*time.Minute)
	after := map[string]string{}
	for name := range sizes {
		maps.Copy(after, memberPods(t, ns, name))
	}
	if len(membersBefore) != 7 {
		t.Fatalf("member Pods before the upgrade: %v, want 7", membersBefore)
	}
	for name, before := range membersBefore {
		if after[name] != before {
			t.Errorf("member Pod %s changed across the operator's upgrade: %s -> %s", name, before, after[name])
		}
	}
}

// checkHelmValues: what helmValues asked for is on the running release.
func checkHelmValues(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	deploy := helmDeployment(t)
	pod := deploy.Spec.Template
	if deploy.Status.ReadyReplicas != 2 {
		t.Errorf("%d ready operator replicas, want 2", deploy.Status.ReadyReplicas)
	}
	sa := &corev1.ServiceAccount{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmFullname + "-sa"}, sa); err != nil {
		t.Error(err)
	} else if sa.Annotations["e2e.example/identity"] != "helm" || pod.Spec.ServiceAccountName != sa.Name {
		t.Errorf("ServiceAccount %s annotations %v, the Pods' %q", sa.Name, sa.Annotations, pod.Spec.ServiceAccountName)
	}
	// The disruption controller counts the Pods the budget selects: the operator's two, one
	// of which a drain may evict.
	eventually(t, time.Minute, "the PodDisruptionBudget over the operator's 2 Pods", func() error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmFullname}, pdb); err != nil {
			return err
		}
		if pdb.Status.ExpectedPods != 2 || pdb.Status.DisruptionsAllowed != 1 {
			return fmt.Errorf("expected Pods %d, disruptions allowed %d", pdb.Status.ExpectedPods, pdb.Status.DisruptionsAllowed)
		}
		return nil
	})
	ctr := pod.Spec.Containers[0]
	if pod.Labels["e2e"] != "helm" || len(ctr.Env) != 1 || ctr.Env[0].Value != "helm" {
		t.Errorf("Pod labels %v, env %v: want podLabels and extraEnv", pod.Labels, ctr.Env)
	}
	args := strings.Join(ctr.Args, " ")
	for _, want := range []string{"--leader-election-id=eo-helm", "--max-concurrent-reconciles=6", "--max-concurrent-rolls=3",
		"--zap-time-encoding=rfc3339", "--zap-stacktrace-level=panic", "--metrics-cert-path="} {
		if !strings.Contains(args, want) {
			t.Errorf("the operator's args lack %s: %s", want, args)
		}
	}
}

// verifiedScraper scrapes the helm release's replicas as the chart's ServiceMonitor has
// Prometheus do: the certificate cert-manager issued for the metrics Service, verified against
// the Secret's ca.crt under the Service's name, and a metrics reader's token.
type verifiedScraper struct {
	client *http.Client
	token  string
}

func newVerifiedScraper(t *testing.T) verifiedScraper {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(getSecret(t, helmNamespace, helmFullname+"-metrics-cert").Data["ca.crt"]) {
		t.Fatal("no CA certificate in the metrics certificate's ca.crt")
	}
	serverName := helmFullname + "-metrics." + helmNamespace + ".svc"
	token, err := operatormetrics.Token(context.Background(), kubeClientset(t))
	if err != nil {
		t.Fatal(err)
	}
	return verifiedScraper{token: token, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}}
}

// scrape returns what the replica at ip serves; a certificate that does not verify fails.
func (s verifiedScraper) scrape(ip string) (string, error) {
	url := "https://" + net.JoinHostPort(ip, operatormetrics.Port) + "/metrics"
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return string(body), nil
}

// checkVerifiedMetrics: the leader answers a verified scrape.
func checkVerifiedMetrics(t *testing.T) {
	t.Helper()
	scraper := newVerifiedScraper(t)
	ip := operatorPodIPIn(t, helmNamespace, helmRelease)
	eventually(t, time.Minute, "a verified scrape of the helm release's operator", func() error {
		_, err := scraper.scrape(ip)
		return err
	})
}

// checkLeaderGatedMetrics: of the release's two replicas, only the leader serves the series
// of the clusters in ns (two would double every sum over them); both serve build info, which
// says a replica is up whether it leads or not.
func checkLeaderGatedMetrics(t *testing.T, ns string) {
	t.Helper()
	scraper := newVerifiedScraper(t)
	clusterSeries := metrics.ClusterInfoName + `{`
	eventually(t, time.Minute, "cluster series from the leader only", func() error {
		leader, err := leaderIP(helmNamespace, helmRelease)
		if err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(helmNamespace),
			client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
			return err
		}
		var served []string
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || !p.DeletionTimestamp.IsZero() {
				continue
			}
			body, err := scraper.scrape(p.Status.PodIP)
			if err != nil {
				return fmt.Errorf("replica %s: %w", p.Name, err)
			}
			if !strings.Contains(body, metrics.BuildInfoName+"{") {
				return fmt.Errorf("replica %s serves no %s", p.Name, metrics.BuildInfoName)
			}
			ours := strings.Contains(body, clusterSeries) && strings.Contains(body, `namespace="`+ns+`"`)
			switch {
			case p.Status.PodIP == leader && !ours:
				return fmt.Errorf("the leader %s serves no %s of namespace %s", p.Name, metrics.ClusterInfoName, ns)
			case p.Status.PodIP != leader && strings.Contains(body, clusterSeries):
				return fmt.Errorf("the standby %s serves cluster series too", p.Name)
			}
			served = append(served, p.Name)
		}
		if len(served) != 2 {
			return fmt.Errorf("scraped replicas %v, want 2", served)
		}
		return nil
	})
}

func helmDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	deploy := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: helmNamespace, Name: helmFullname}, deploy); err != nil {
		t.Fatal(err)
	}
	return deploy
}

// memberPods maps each member Pod's name to its UID and container restarts.
func memberPods(t *testing.T, ns, cluster string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		out[p.Name] = fmt.Sprintf("uid %s restarts %d", p.UID, restarts)
	}
	return out
}

func deploymentGeneration(t *testing.T) int64 {
	t.Helper()
	return helmDeployment(t).Generation
}
