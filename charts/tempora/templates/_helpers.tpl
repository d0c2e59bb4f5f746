{{- /*
The TemporaGateway's name and the prefix of every object. 40 characters at most: the longest names derived from
it (<name>-postgresql-0's controller-revision-hash label, the CronJob <name>-daily) must stay within 63.
*/ -}}
{{- define "tempora.fullname" -}}
{{- $name := .Values.fullnameOverride | default .Release.Name -}}
{{- if gt (len $name) 40 -}}
{{- fail (printf "the TemporaGateway's name %q (the release name, or fullnameOverride) has more than 40 characters; set a shorter fullnameOverride" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- /* Labels of every object; "component" says what it is. */ -}}
{{- define "tempora.labels" -}}
app.kubernetes.io/name: {{ .name | default "tempora" }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: tempora
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- /* The pod selector of the chart's own workloads (PostgreSQL, Redis). */ -}}
{{- define "tempora.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- /* Labels that stay the same across chart versions (pod templates, volume claim templates). */ -}}
{{- define "tempora.podLabels" -}}
{{ include "tempora.selector" . }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: tempora
{{- end -}}

{{- /* The image block every custom resource takes. */ -}}
{{- define "tempora.image" -}}
registry: {{ .Values.image.registry | quote }}
version: {{ .Values.image.version | default .Chart.AppVersion | quote }}
pullPolicy: {{ .Values.image.pullPolicy }}
{{- with .Values.image.digests }}
digests: {{ toJson . }}
{{- end }}
{{- end -}}

{{- /*
spec.pods of every custom resource that makes pods (the TemporaGateway, the GraphWorkers, the AgentPool): the
values' pods without their empty fields.
*/ -}}
{{- define "tempora.podSettings" -}}
{{- $pods := dict -}}
{{- range $field, $x := .Values.pods }}{{ if $x }}{{ $_ := set $pods $field $x }}{{ end }}{{ end -}}
{{- with $pods }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{- /*
The Secret key holding the database URL, as a YAML map {secretName, key}, or nothing (embedded state).
*/ -}}
{{- define "tempora.database" -}}
{{- if .Values.postgresql.enabled -}}
secretName: {{ include "tempora.fullname" . }}-postgresql
key: url
{{- else if .Values.externalDatabase.existingSecret -}}
secretName: {{ .Values.externalDatabase.existingSecret }}
key: {{ .Values.externalDatabase.key }}
{{- end -}}
{{- end -}}

{{- define "tempora.redis" -}}
{{- if .Values.redis.enabled -}}
secretName: {{ include "tempora.fullname" . }}-redis
key: url
{{- else if .Values.externalRedis.existingSecret -}}
secretName: {{ .Values.externalRedis.existingSecret }}
key: {{ .Values.externalRedis.key }}
{{- end -}}
{{- end -}}

{{- define "tempora.keysSecret" -}}
{{- .Values.secrets.keys.existingSecret | default (printf "%s-keys" (include "tempora.fullname" .)) -}}
{{- end -}}

{{- define "tempora.callbackSecret" -}}
{{- .Values.secrets.callback.existingSecret | default (printf "%s-callback" (include "tempora.fullname" .)) -}}
{{- end -}}

{{- /*
The name of a Secret nothing can generate (secrets.providers, secrets.billing; "secret" names which): the
existing one named, else <fullname>-<secret> made from its values, else nothing.
*/ -}}
{{- define "tempora.givenSecret" -}}
{{- $s := index .root.Values.secrets .secret -}}
{{- if $s.existingSecret -}}
{{- $s.existingSecret -}}
{{- else if $s.values -}}
{{- include "tempora.fullname" .root }}-{{ .secret }}
{{- end -}}
{{- end -}}

{{- /*
A Secret value known at render time: the one given in values, else, under `helm install/upgrade`, the one
the live Secret holds (Helm's lookup) when a manifest put it there (a value given before, or one an earlier
chart version drew at render time), else nothing. A key the operator generated is left out, as `helm
template` (Argo CD), which cannot look up, leaves it out: no revision's manifest then holds it, so neither
an upgrade nor a `helm rollback` (which replays an older manifest, three-way merged against the newer
one) can remove it. The API server's managedFields tell who wrote a key: the operator writes as
"tempora-operator" (FIELD_MANAGER, operator/src/kube/client.ts). Arguments: root, secret (name), key, given.
*/ -}}
{{- define "tempora.keptValue" -}}
{{- if .given -}}
{{- .given -}}
{{- else -}}
{{- $live := lookup "v1" "Secret" .root.Release.Namespace .secret -}}
{{- $value := "" -}}
{{- if $live -}}
{{- $value = index ($live.data | default dict) .key | default "" | b64dec -}}
{{- end -}}
{{- range ($live.metadata | default dict).managedFields | default list -}}
{{- if and (eq .manager "tempora-operator") (hasKey (dig "f:data" dict (.fieldsV1 | default dict)) (printf "f:%s" $.key)) -}}
{{- $value = "" -}}
{{- end -}}
{{- end -}}
{{- $value -}}
{{- end -}}
{{- end -}}

{{- /*
A Secret whose values nothing gives are generated once by the operator, never drawn at render time (which
would change them at every `helm template`). Each entry of `keys` is {key, given, generate}: a value known
at render time (tempora.keptValue) goes into data; any other key is left out of data and listed, with its
`generate` template, in the annotation tempora.dev/generate, which the operator reads from Secrets labelled
tempora.dev/generated-secret (docs/operator.md, "Generated Secrets"). Data the manifest leaves out survives
every later apply of it (helm upgrade, kubectl apply, Argo CD and Flux syncs, client- or server-side).
Arguments: root, name, labels (for tempora.labels), annotations (extra, may be empty), keys.
*/ -}}
{{- define "tempora.generatedSecret" -}}
{{- $data := dict -}}
{{- $generate := dict -}}
{{- range .keys -}}
{{- $value := include "tempora.keptValue" (dict "root" $.root "secret" $.name "key" .key "given" .given) -}}
{{- if $value -}}
{{- $_ := set $data .key $value -}}
{{- else -}}
{{- $_ := set $generate .key .generate -}}
{{- end -}}
{{- end -}}
{{- $annotations := .annotations | default dict -}}
{{- if $generate -}}
{{- $annotations = merge (dict "tempora.dev/generate" (toJson $generate)) $annotations -}}
{{- end -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "tempora.labels" .labels | nindent 4 }}
    {{- if $generate }}
    tempora.dev/generated-secret: "true"
    {{- end }}
  {{- with $annotations }}
  annotations: {{- toYaml . | nindent 4 }}
  {{- end }}
type: Opaque
{{- with $data }}
data:
  {{- range $k, $v := . }}
  {{ $k }}: {{ $v | b64enc }}
  {{- end }}
{{- end }}
{{- end -}}

{{- /*
The cross-field rules values.schema.json cannot say with a clear message; every template includes this so
that a refusal stops the whole release.
*/ -}}
{{- define "tempora.checks" -}}
{{- $db := include "tempora.database" . -}}
{{- $redis := include "tempora.redis" . -}}
{{- if and .Values.postgresql.enabled .Values.externalDatabase.existingSecret -}}
{{- fail "postgresql.enabled and externalDatabase.existingSecret both name a database: set postgresql.enabled=false to use yours" -}}
{{- end -}}
{{- if and .Values.redis.enabled .Values.externalRedis.existingSecret -}}
{{- fail "redis.enabled and externalRedis.existingSecret both name a Redis: set redis.enabled=false to use yours" -}}
{{- end -}}
{{- if not (and $db $redis) -}}
{{- range $svc, $s := .Values.services -}}
{{- if gt (int $s.replicas) 1 -}}
{{- fail (printf "services.%s.replicas=%d needs a database and a Redis (postgresql.enabled or externalDatabase.existingSecret, redis.enabled or externalRedis.existingSecret): without them each replica would keep state of its own" $svc (int $s.replicas)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $db -}}
{{- range $role, $w := .Values.graphWorkers -}}
{{- if $w.enabled -}}
{{- fail (printf "graphWorkers.%s needs a database (postgresql.enabled or externalDatabase.existingSecret); without one set graphWorkers.%s.enabled=false (the graph service then renders in-process)" $role $role) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.agentPool.enabled (not $redis) -}}
{{- fail "agentPool needs a Redis (redis.enabled or externalRedis.existingSecret); without one set agentPool.enabled=false (the generation service then runs its agents in-process)" -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) -}}
{{- fail "ingress.enabled needs ingress.host" -}}
{{- end -}}
{{- $p := .Values.agentPool -}}
{{- if and $p.enabled (lt (int $p.maxReplicas) (int $p.minReplicas)) -}}
{{- fail (printf "agentPool.maxReplicas (%d) must be at least agentPool.minReplicas (%d)" (int $p.maxReplicas) (int $p.minReplicas)) -}}
{{- end -}}
{{- with .Values.generation.models.presets -}}
{{- $default := $.Values.generation.models.policy.default -}}
{{- $names := list -}}
{{- range . }}{{ $names = append $names .name }}{{ end -}}
{{- if not (has $default $names) -}}
{{- fail (printf "generation.models.policy.default %q must name one of generation.models.presets (%s)" $default (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- $budgets := dict -}}
{{- range .Values.simulationBudgets -}}
{{- if hasKey $budgets .name -}}
{{- fail (printf "simulationBudgets: the name %q appears twice" .name) -}}
{{- end -}}
{{- $_ := set $budgets .name true -}}
{{- if and (hasKey . "perRunMaxUsd") (gt (float64 .perRunMaxUsd) (float64 .limitUsd)) -}}
{{- fail (printf "simulationBudgets %q: perRunMaxUsd (%v) cannot exceed limitUsd (%v)" .name .perRunMaxUsd .limitUsd) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
The models the AgentPool's CRD requires. The pool's workers run the model each task names (the generation
pods choose it), so these are for the record: generation.models when it names presets, else the service's
own default, the balanced preset's text model on Gemini (services/generation/src/models.ts).
*/ -}}
{{- define "tempora.poolModels" -}}
{{- if .Values.generation.models.presets -}}
{{- toYaml .Values.generation.models -}}
{{- else -}}
presets:
  - {name: balanced, provider: gemini, model: gemini-2.5-flash}
policy:
  default: balanced
{{- end -}}
{{- end -}}
