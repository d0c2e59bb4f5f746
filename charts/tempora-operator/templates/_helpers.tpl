{{- define "tempora-operator.name" -}}tempora-operator{{- end -}}

{{- define "tempora-operator.labels" -}}
app.kubernetes.io/name: tempora-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tempora
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "tempora-operator.selector" -}}
app.kubernetes.io/name: tempora-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
