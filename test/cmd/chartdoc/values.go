package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Values are the chart's values as Go types: the schema is derived from them, values.yaml must
// decode into them strictly, and every field must appear (and be described) in values.yaml.
// Fields of Kubernetes types are checked, at every level, against those types.
type Values struct {
	NameOverride            string                        `json:"nameOverride"`
	FullnameOverride        string                        `json:"fullnameOverride"`
	Image                   Image                         `json:"image"`
	ImagePullSecrets        []corev1.LocalObjectReference `json:"imagePullSecrets"`
	Replicas                int32                         `json:"replicas"`
	LeaderElection          LeaderElection                `json:"leaderElection"`
	WatchNamespaces         []string                      `json:"watchNamespaces"`
	ClusterSelector         string                        `json:"clusterSelector"`
	ClusterDomain           string                        `json:"clusterDomain"`
	MaxConcurrentReconciles int                           `json:"maxConcurrentReconciles"`
	MaxConcurrentRolls      int                           `json:"maxConcurrentRolls"`
	EtcdImageRepository     string                        `json:"etcdImageRepository"`
	LogLevel                any                           `json:"logLevel"`
	LogDevelopment          bool                          `json:"logDevelopment"`
	LogTimeEncoding         string                        `json:"logTimeEncoding"`
	ExtraArgs               []string                      `json:"extraArgs"`
	ExtraEnv                []corev1.EnvVar               `json:"extraEnv"`
	ServiceAccount          ServiceAccount                `json:"serviceAccount"`
	PodSecurityContext      corev1.PodSecurityContext     `json:"podSecurityContext"`
	SecurityContext         corev1.SecurityContext        `json:"securityContext"`
	Resources               corev1.ResourceRequirements   `json:"resources"`
	NodeSelector            map[string]string             `json:"nodeSelector"`
	Tolerations             []corev1.Toleration           `json:"tolerations"`
	Affinity                corev1.Affinity               `json:"affinity"`
	PriorityClassName       string                        `json:"priorityClassName"`
	PodDisruptionBudget     PodDisruptionBudget           `json:"podDisruptionBudget"`
	ExtraLabels             map[string]string             `json:"extraLabels"`
	PodLabels               map[string]string             `json:"podLabels"`
	PodAnnotations          map[string]string             `json:"podAnnotations"`
	Metrics                 Metrics                       `json:"metrics"`
	Monitoring              Monitoring                    `json:"monitoring"`
}

type Image struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	PullPolicy string `json:"pullPolicy"`
}

type LeaderElection struct {
	Enabled       bool   `json:"enabled"`
	ID            string `json:"id"`
	Namespace     string `json:"namespace"`
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

type ServiceAccount struct {
	Create      bool              `json:"create"`
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations"`
}

type PodDisruptionBudget struct {
	Enabled        any                `json:"enabled"`
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
}

type Metrics struct {
	Secure         bool           `json:"secure"`
	Port           int            `json:"port"`
	Service        MetricsService `json:"service"`
	Certificate    Certificate    `json:"certificate"`
	ServiceMonitor ServiceMonitor `json:"serviceMonitor"`
	PodMonitor     Monitor        `json:"podMonitor"`
}

type MetricsService struct {
	Enabled bool   `json:"enabled"`
	Type    string `json:"type"`
}

type Certificate struct {
	CertManager CertManager `json:"certManager"`
	SecretName  string      `json:"secretName"`
}

type CertManager struct {
	Enabled   bool      `json:"enabled"`
	IssuerRef IssuerRef `json:"issuerRef"`
}

type IssuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Group string `json:"group"`
}

type ServiceMonitor struct {
	Enabled     bool              `json:"enabled"`
	Interval    string            `json:"interval"`
	Labels      map[string]string `json:"labels"`
	TokenSecret SecretKey         `json:"tokenSecret"`
	TLS         ScrapeTLS         `json:"tls"`
}

type SecretKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

type ScrapeTLS struct {
	ServerName         string   `json:"serverName"`
	CA                 CASecret `json:"ca"`
	InsecureSkipVerify bool     `json:"insecureSkipVerify"`
}

type CASecret struct {
	SecretName string `json:"secretName"`
	Key        string `json:"key"`
}

type Monitor struct {
	Enabled  bool              `json:"enabled"`
	Interval string            `json:"interval"`
	Labels   map[string]string `json:"labels"`
}

type Monitoring struct {
	GrafanaDashboard Labelled `json:"grafanaDashboard"`
	PrometheusRule   Labelled `json:"prometheusRule"`
}

type Labelled struct {
	Enabled bool              `json:"enabled"`
	Labels  map[string]string `json:"labels"`
}

// Constraints the Go types cannot say, by values path; a Kubernetes type's field by
// "<definition>.<field>". Each must be used (a renamed value would leave one behind).
var constraints = map[string]map[string]any{
	"image.pullPolicy":             enum("Always", "IfNotPresent", "Never"),
	"replicas":                     {"minimum": 0},
	"leaderElection.id":            dnsSubdomain,
	"leaderElection.leaseDuration": goDuration,
	"leaderElection.renewDeadline": goDuration,
	"leaderElection.retryPeriod":   goDuration,
	"watchNamespaces":              {"items": dnsLabel},
	"clusterDomain":                dnsSubdomain,
	"maxConcurrentReconciles":      {"minimum": 1},
	"maxConcurrentRolls":           {"minimum": 0},
	// zap's levels, or a number: higher is more verbose.
	"logLevel": {"anyOf": []any{
		map[string]any{"type": "string", "pattern": "^(debug|info|error|panic|[1-9][0-9]*)$"},
		map[string]any{"type": "integer", "minimum": 1},
	}},
	"logTimeEncoding":                                 enum("", "epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"),
	"podDisruptionBudget.enabled":                     enum("auto", true, false),
	"metrics.port":                                    {"minimum": 1, "maximum": 65535},
	"metrics.service.type":                            enum("ClusterIP", "NodePort", "LoadBalancer"),
	"metrics.certificate.certManager.issuerRef.kind":  enum("Issuer", "ClusterIssuer"),
	"metrics.serviceMonitor.interval":                 promDuration,
	"metrics.podMonitor.interval":                     promDuration,
	"metrics.serviceMonitor.tokenSecret.key":          {"minLength": 1},
	"metrics.serviceMonitor.tls.ca.key":               {"minLength": 1},
	"core.v1.PodSecurityContext.runAsUser":            intOrEmpty,
	"core.v1.PodSecurityContext.runAsGroup":           intOrEmpty,
	"metrics.certificate.certManager.issuerRef.group": {"minLength": 1},
}

var (
	// time.ParseDuration's syntax, as the operator's duration flags read it.
	goDuration = map[string]any{"pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
	// Prometheus' duration, as prometheus-operator's CRDs check it.
	promDuration = map[string]any{"pattern": `^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`}
	dnsSubdomain = map[string]any{"pattern": `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`, "maxLength": 253}
	dnsLabel     = map[string]any{"type": "string", "pattern": `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, "maxLength": 63}
	// A user or group id, or left out: "" as null is, for platforms that assign their own.
	intOrEmpty = map[string]any{"type": nil, "anyOf": []any{
		map[string]any{"type": "integer", "minimum": 0},
		map[string]any{"enum": []any{""}},
	}}
)

func enum(values ...any) map[string]any {
	return map[string]any{"enum": values}
}
