{{- /* The name part of the object names: the chart's name unless nameOverride. */ -}}
{{- define "etcd-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- /*
The objects' names, as Helm charts make them: fullnameOverride, else <release>-<name>, or the
release's name alone when it holds the name already (a release called etcd-operator or
etcd-operator-a keeps its name). 50, not 63, characters: suffixes such as
"-manager-cluster-scoped" are appended to it.
*/ -}}
{{- define "etcd-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "etcd-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "etcd-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "etcd-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "etcd-operator.labels" -}}
{{ include "etcd-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.extraLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /*
app.kubernetes.io/name stays etcd-operator whatever nameOverride says: the NetworkPolicies the
operator keeps for its clusters admit its Pods by it, and a Deployment's selector cannot change.
*/ -}}
{{- define "etcd-operator.selectorLabels" -}}
app.kubernetes.io/name: etcd-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The Pods' labels: podLabels, under the chart's own (which win). */ -}}
{{- define "etcd-operator.podLabels" -}}
{{- merge (include "etcd-operator.labels" . | fromYaml) .Values.podLabels | toYaml -}}
{{- end -}}

{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- /* The leader election Lease's namespace, where its Role is. */ -}}
{{- define "etcd-operator.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end -}}

{{- /* The metrics endpoint's DNS name in its certificate, and the name Prometheus checks. */ -}}
{{- define "etcd-operator.metricsHost" -}}
{{- printf "%s-metrics.%s.svc" (include "etcd-operator.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- /* The Secret of the metrics endpoint's certificate; empty when the operator self-signs. */ -}}
{{- define "etcd-operator.metricsCertSecret" -}}
{{- if .Values.metrics.certificate.certManager.enabled -}}
{{- include "etcd-operator.fullname" . }}-metrics-cert
{{- else -}}
{{- .Values.metrics.certificate.secretName -}}
{{- end -}}
{{- end -}}

{{- /* Whether the chart makes the PodDisruptionBudget: enabled true, or auto with replicas > 1. */ -}}
{{- define "etcd-operator.pdbEnabled" -}}
{{- $enabled := toString .Values.podDisruptionBudget.enabled -}}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") (gt (int .Values.replicas) 1)) -}}
true
{{- end -}}
{{- end -}}

{{/* rules of a generated RBAC file under files/rbac (copied from config/rbac by make chart-sync) */}}
{{- define "etcd-operator.rules" -}}
{{- (.root.Files.Get (printf "files/rbac/%s" .file) | fromYaml).rules | toYaml -}}
{{- end -}}
