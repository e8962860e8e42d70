{{/* The chart's name in labels: nameOverride, else "tensorcast". */}}
{{- define "tensorcast.name" -}}
{{- default "tensorcast" .Values.nameOverride | trunc 30 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every object name: fullnameOverride, else the release name. */}}
{{- define "tensorcast.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the operator's objects (Deployment, ServiceAccount, ClusterRole, binding). */}}
{{- define "tensorcast.operator.fullname" -}}
{{- printf "%s-operator" (include "tensorcast.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the RDMA device plugin's objects. */}}
{{- define "tensorcast.rdma.fullname" -}}
{{- printf "%s-rdma-device-plugin" (include "tensorcast.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the CSI node driver's objects (DaemonSet, ServiceAccount, ClusterRole, binding). */}}
{{- define "tensorcast.csi.fullname" -}}
{{- printf "%s-csi-driver" (include "tensorcast.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries besides its selector labels (which hold the instance). */}}
{{- define "tensorcast.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tensorcast
{{- end -}}

{{/* Selector labels of the operator's pods. */}}
{{- define "tensorcast.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tensorcast.name" . }}-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of the RDMA device plugin's pods. */}}
{{- define "tensorcast.rdma.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tensorcast.name" . }}-rdma-device-plugin
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of the CSI node driver's pods. */}}
{{- define "tensorcast.csi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tensorcast.name" . }}-csi-driver
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
An image reference: global.imageRegistry (if set) / repository : tag (the chart's appVersion when
empty). Call with (dict "root" $ "repository" R "tag" T).
*/}}
{{- define "tensorcast.image" -}}
{{- $registry := .root.Values.global.imageRegistry | default "" | trimSuffix "/" -}}
{{- $ref := printf "%s:%s" .repository (default .root.Chart.AppVersion .tag) -}}
{{- if $registry -}}{{ printf "%s/%s" $registry $ref }}{{- else -}}{{ $ref }}{{- end -}}
{{- end -}}

{{/* Operator image reference. */}}
{{- define "tensorcast.operator.image" -}}
{{- include "tensorcast.image" (dict "root" . "repository" .Values.operator.image.repository "tag" .Values.operator.image.tag) -}}
{{- end -}}

{{/* Data-plane image reference the operator gives the pods it creates. */}}
{{- define "tensorcast.dataplane.image" -}}
{{- include "tensorcast.image" (dict "root" . "repository" .Values.dataplane.image.repository "tag" .Values.dataplane.image.tag) -}}
{{- end -}}

{{/* RDMA device plugin image: rdmaDevicePlugin.image (a full reference) or the default one. */}}
{{- define "tensorcast.rdma.image" -}}
{{- $image := .Values.rdmaDevicePlugin.image | default (printf "tensorcast/rdma-device-plugin:%s" .Chart.AppVersion) -}}
{{- $registry := .Values.global.imageRegistry | default "" | trimSuffix "/" -}}
{{- if $registry -}}{{ printf "%s/%s" $registry $image }}{{- else -}}{{ $image }}{{- end -}}
{{- end -}}

{{/* CSI node driver image: csiDriver.image (a full reference) or the default one. */}}
{{- define "tensorcast.csi.image" -}}
{{- $image := .Values.csiDriver.image | default (printf "tensorcast/csi-driver:%s" .Chart.AppVersion) -}}
{{- $registry := .Values.global.imageRegistry | default "" | trimSuffix "/" -}}
{{- if $registry -}}{{ printf "%s/%s" $registry $image }}{{- else -}}{{ $image }}{{- end -}}
{{- end -}}

{{/*
node-driver-registrar image: csiDriver.registrarImage, a full reference such as
registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.10.1. With global.imageRegistry set, that
registry takes the place of the reference's own (its first path element when that names a host:
it holds a "." or ":" or is "localhost"), so a mirror serves sig-storage/... under its own name.
*/}}
{{- define "tensorcast.csi.registrarImage" -}}
{{- $image := .Values.csiDriver.registrarImage -}}
{{- $registry := .Values.global.imageRegistry | default "" | trimSuffix "/" -}}
{{- if $registry -}}
{{- $parts := splitList "/" $image -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $image = join "/" (rest $parts) -}}
{{- end -}}
{{- printf "%s/%s" $registry $image -}}
{{- else -}}
{{- $image -}}
{{- end -}}
{{- end -}}

{{/*
imagePullSecrets of a pod: global.imagePullSecrets followed by the component's own list.
Call with (dict "root" $ "own" LIST); renders nothing when both are empty.
*/}}
{{- define "tensorcast.imagePullSecrets" -}}
{{- $all := concat (.root.Values.global.imagePullSecrets | default list) (.own | default list) -}}
{{- with $all }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Comma-separated names of the data-plane pods' pull Secrets (global + dataplane). */}}
{{- define "tensorcast.dataplane.imagePullSecretNames" -}}
{{- $names := list -}}
{{- range concat (.Values.global.imagePullSecrets | default list) (.Values.dataplane.imagePullSecrets | default list) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* policy/v1 from Kubernetes 1.21 on, policy/v1beta1 before. */}}
{{- define "tensorcast.pdb.apiVersion" -}}
{{- if semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version -}}policy/v1{{- else -}}policy/v1beta1{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the operator's master key. */}}
{{- define "tensorcast.masterKeySecret" -}}
{{- if .Values.operator.masterKey.existingSecret -}}
{{- .Values.operator.masterKey.existingSecret -}}
{{- else -}}
{{- printf "%s-master-key" (include "tensorcast.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The data plane's format limits as name=value pairs separated by commas, sorted by name. */}}
{{- define "tensorcast.formatLimits" -}}
{{- $pairs := list -}}
{{- range $name, $value := . -}}
{{- $pairs = append $pairs (printf "%s=%v" $name $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

