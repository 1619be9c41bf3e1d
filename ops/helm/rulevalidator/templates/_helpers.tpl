{{/* The chart's name, at most 63 characters (a label value). */}}
{{- define "rulevalidator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: the release name when it holds the chart's name (release rulevalidator:
rulevalidator, as in ops/k8s), else release-chart. Room is kept for the "-ops" suffix.
*/}}
{{- define "rulevalidator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 59 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 59 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 59 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* What the selectors match: stable across upgrades. */}}
{{- define "rulevalidator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rulevalidator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rulevalidator.labels" -}}
{{ include "rulevalidator.selectorLabels" . }}
app.kubernetes.io/part-of: rulevalidator
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The image: by digest when one is given, else by tag (the appVersion by default). */}}
{{- define "rulevalidator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}
