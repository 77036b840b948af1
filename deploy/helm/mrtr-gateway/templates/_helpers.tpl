{{/* The chart name, or nameOverride. */}}
{{- define "mrtr-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The resource name prefix: fullnameOverride, or release name + chart name. */}}
{{- define "mrtr-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "mrtr-gateway.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "mrtr-gateway.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "mrtr-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mrtr-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mrtr-gateway.labels" -}}
{{ include "mrtr-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.pattern }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The key ring Secret's name, or "" for none (an ephemeral key per pod). */}}
{{- define "mrtr-gateway.keySecret" -}}
{{- if .Values.stateKeys.create }}
{{- printf "%s-state-keys" (include "mrtr-gateway.fullname" .) }}
{{- else }}
{{- .Values.stateKeys.existingSecret }}
{{- end }}
{{- end }}

{{/* Where the key ring is mounted. */}}
{{- define "mrtr-gateway.keyDir" -}}/etc/mrtr-gateway/keys{{- end }}

{{/* The upstream section for the chosen pattern. */}}
{{- define "mrtr-gateway.upstream" -}}
{{- $u := dict }}
{{- if eq .Values.pattern "sidecar" }}
{{- $_ := set $u "url" (printf "http://127.0.0.1:%v%s" .Values.legacy.port .Values.legacy.path) }}
{{- else if eq .Values.pattern "stdio" }}
{{- if not .Values.upstream.command }}{{ fail "pattern stdio needs upstream.command" }}{{ end }}
{{- $_ := set $u "command" .Values.upstream.command }}
{{- $_ := set $u "env_passthrough" .Values.upstream.envPassthrough }}
{{- with .Values.upstream.env }}{{ $_ := set $u "env" . }}{{ end }}
{{- else if eq .Values.pattern "standalone" }}
{{- if and .Values.upstream.url .Values.upstream.sseUrl }}{{ fail "set at most one of upstream.url and upstream.sseUrl" }}{{ end }}
{{- if .Values.upstream.sseUrl }}
{{- $_ := set $u "sse_url" .Values.upstream.sseUrl }}
{{- else }}
{{- $_ := set $u "url" (required "pattern standalone needs upstream.url (or upstream.sseUrl)" .Values.upstream.url) }}
{{- end }}
{{- else }}
{{- fail (printf "pattern must be sidecar, stdio or standalone, not %q" .Values.pattern) }}
{{- end }}
{{- with .Values.upstream.roots }}{{ $_ := set $u "roots" . }}{{ end }}
{{- toYaml $u }}
{{- end }}

{{/* The whole configuration file, as TOML. */}}
{{- define "mrtr-gateway.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $front := merge (dict "listen" (printf "0.0.0.0:%v" .Values.ports.mcp)) (get $cfg "front" | default dict) }}
{{- $_ := set $front "listen" (printf "0.0.0.0:%v" .Values.ports.mcp) }}
{{- $_ := set $cfg "front" $front }}
{{- $_ := set $cfg "admin" (dict "listen" (printf "0.0.0.0:%v" .Values.ports.admin)) }}
{{- $_ := set $cfg "upstream" (merge (include "mrtr-gateway.upstream" . | fromYaml) (get $cfg "upstream" | default dict)) }}
{{- if include "mrtr-gateway.keySecret" . }}
{{- $state := get $cfg "state" | default dict }}
{{- $_ := set $state "key_file" (printf "%s/%s" (include "mrtr-gateway.keyDir" .) .Values.stateKeys.secretKey) }}
{{- $_ := set $cfg "state" $state }}
{{- end }}
{{- include "mrtr-gateway.tomlTable" (dict "prefix" "" "table" $cfg) }}
{{- end }}

{{/*
TOML for one value. Values files reach templates with every number as a float, and Helm's own
toToml prints 30 as 30.0, which an integer setting refuses: whole numbers are printed as integers.
*/}}
{{- define "mrtr-gateway.tomlValue" -}}
{{- if kindIs "slice" . }}
{{- $items := list }}
{{- range . }}{{ $items = append $items (include "mrtr-gateway.tomlValue" .) }}{{ end }}
{{- printf "[%s]" (join ", " $items) }}
{{- else if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) }}
{{- if eq (float64 .) (floor .) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if kindIs "bool" . }}
{{- . }}
{{- else }}
{{- toJson (toString .) }}
{{- end }}
{{- end }}

{{/* A TOML table: its plain keys, then each sub-table under [prefix.key]. */}}
{{- define "mrtr-gateway.tomlTable" -}}
{{- $prefix := .prefix }}
{{- range $k, $v := .table }}
{{- if not (kindIs "map" $v) }}
{{ $k }} = {{ include "mrtr-gateway.tomlValue" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := .table }}
{{- if kindIs "map" $v }}
{{- $name := ternary $k (printf "%s.%s" $prefix (toJson $k)) (eq $prefix "") }}
{{ printf "[%s]" $name }}
{{- include "mrtr-gateway.tomlTable" (dict "prefix" $name "table" $v) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mrtr-gateway.drainSecs" -}}
{{- $front := get .Values.config "front" | default dict }}
{{- get $front "drain_secs" | default 30 }}
{{- end }}

{{- define "mrtr-gateway.gracePeriod" -}}
{{- if .Values.terminationGracePeriodSeconds }}
{{- .Values.terminationGracePeriodSeconds }}
{{- else }}
{{- add .Values.preStopSleepSeconds (include "mrtr-gateway.drainSecs" . | int) 15 }}
{{- end }}
{{- end }}
