{{/* Names and labels shared by every template. */}}

{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* sluice.admin.fullname and sluice.gateway.fullname: the components' object names. */}}
{{- define "sluice.admin.fullname" -}}
{{- printf "%s-admin" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "sluice.gateway.fullname" -}}
{{- printf "%s-gateway" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}

{{/* sluice.labels: the common labels; pass (dict "ctx" $ "component" "admin"). */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ default .ctx.Chart.AppVersion .ctx.Values.image.tag | quote }}
app.kubernetes.io/part-of: sluice
{{ include "sluice.selectorLabels" . }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* sluice.selectorLabels: the labels a component's selectors match. The
name is sluice-admin or sluice-gateway, as in deploy/kubernetes: the jobs of
deploy/prometheus/prometheus.yml keep pods by it. */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-%s" (include "sluice.name" .ctx) .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* sluice.etcdArgs: the etcd flags both binaries share; pass (dict "ctx" $ "endpointsFlag" "--etcd"). */}}
{{- define "sluice.etcdArgs" -}}
{{- $etcd := .ctx.Values.etcd -}}
- {{ printf "%s=%s" .endpointsFlag (required "etcd.endpoints is required" $etcd.endpoints) | quote }}
{{- with $etcd.prefix }}
- {{ printf "--etcd-prefix=%s" . | quote }}
{{- end }}
{{- if $etcd.tls.existingSecret }}
- "--etcd-ca=/etc/sluice/etcd-tls/{{ $etcd.tls.caKey }}"
{{- if and $etcd.tls.certKey $etcd.tls.keyKey }}
- "--etcd-cert=/etc/sluice/etcd-tls/{{ $etcd.tls.certKey }}"
- "--etcd-key=/etc/sluice/etcd-tls/{{ $etcd.tls.keyKey }}"
{{- end }}
{{- end }}
{{- if $etcd.auth.username }}
- {{ printf "--etcd-username=%s" $etcd.auth.username | quote }}
- "--etcd-password-file=/etc/sluice/etcd-auth/{{ $etcd.auth.passwordKey }}"
{{- end }}
{{- end -}}

{{/* sluice.etcdVolumeMounts and sluice.etcdVolumes: the etcd TLS and password files. */}}
{{- define "sluice.etcdVolumeMounts" -}}
{{- if .Values.etcd.tls.existingSecret }}
- {name: etcd-tls, mountPath: /etc/sluice/etcd-tls, readOnly: true}
{{- end }}
{{- if .Values.etcd.auth.username }}
- {name: etcd-auth, mountPath: /etc/sluice/etcd-auth, readOnly: true}
{{- end }}
{{- end -}}
{{- define "sluice.etcdVolumes" -}}
{{- if .Values.etcd.tls.existingSecret }}
- name: etcd-tls
  secret: {secretName: {{ .Values.etcd.tls.existingSecret | quote }}, defaultMode: 0440}
{{- end }}
{{- if .Values.etcd.auth.username }}
- name: etcd-auth
  secret:
    secretName: {{ required "etcd.auth.existingSecret is required with etcd.auth.username" .Values.etcd.auth.existingSecret | quote }}
    defaultMode: 0440
    items: [{key: {{ .Values.etcd.auth.passwordKey | quote }}, path: {{ .Values.etcd.auth.passwordKey | quote }}}]
{{- end }}
{{- end -}}

{{/* sluice.probe: an httpGet probe; pass (dict "path" "/readyz" "port" "admin" "settings" .Values.x.readinessProbe). */}}
{{- define "sluice.probe" -}}
httpGet: {path: {{ .path }}, port: {{ .port }}}
{{ toYaml .settings }}
{{- end -}}

{{/* sluice.spread: topologySpreadConstraints with the component's selector added. */}}
{{- define "sluice.spread" -}}
{{- $ctx := .ctx -}}
{{- $component := .component -}}
{{- range .constraints }}
- {{ toYaml (merge (dict "labelSelector" (dict "matchLabels" (include "sluice.selectorLabels" (dict "ctx" $ctx "component" $component) | fromYaml))) .) | nindent 2 | trim }}
{{- end }}
{{- end -}}
