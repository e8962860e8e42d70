{{/* Name of the operator's objects (Deployment, ServiceAccount, ClusterRole, binding). */}}
{{- define "tensorcast.operator.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every operator object carries besides its selector labels (which hold the instance). */}}
{{- define "tensorcast.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tensorcast
{{- end -}}

{{/* Selector labels of the operator's pods. */}}
{{- define "tensorcast.operator.selectorLabels" -}}
app.kubernetes.io/name: tensorcast-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Operator image reference: repository:tag, tag defaulting to the chart's appVersion. */}}
{{- define "tensorcast.operator.image" -}}
{{- $i := .Values.operator.image -}}
{{- printf "%s:%s" $i.repository (default .Chart.AppVersion $i.tag) -}}
{{- end -}}

{{/* Data-plane image reference the operator gives the pods it creates. */}}
{{- define "tensorcast.dataplane.image" -}}
{{- $i := .Values.dataplane.image -}}
{{- printf "%s:%s" $i.repository (default .Chart.AppVersion $i.tag) -}}
{{- end -}}

{{/* Name of the Secret holding the operator's master key. */}}
{{- define "tensorcast.masterKeySecret" -}}
{{- if .Values.operator.masterKey.existingSecret -}}
{{- .Values.operator.masterKey.existingSecret -}}
{{- else -}}
{{- printf "%s-master-key" .Release.Name | trunc 63 | trimSuffix "-" -}}
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

