{{/* Labels of every object; selectors use the first two. */}}
{{- define "metalambda.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: metalambda
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end -}}

{{- define "metalambda.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "metalambda.image" -}}
{{ .image.repository }}:{{ .image.tag | default .root.Chart.AppVersion }}
{{- end -}}

{{/* Pod Security "restricted", for every pod of the chart. */}}
{{- define "metalambda.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "metalambda.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/*
The gateway with gateway.workerUsers "own" (Pod Security "baseline"): root with
SETUID, SETGID and KILL alone, so that its sandbox runs each worker as a user of
its own, whose process limit no other pod of the node uses up (docs/security.md).
"shared" keeps the "restricted" form of every pod: its workers share its user.
*/}}
{{- define "metalambda.gatewayPodSecurityContext" -}}
{{- if eq .Values.gateway.workerUsers "own" -}}
runAsNonRoot: false
runAsUser: 0
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- else if eq .Values.gateway.workerUsers "shared" -}}
{{ include "metalambda.podSecurityContext" . }}
{{- else -}}
{{- fail (printf "gateway.workerUsers is %q: want own (each worker a user of its own; Pod Security baseline) or shared (workers share the gateway's user; restricted)" .Values.gateway.workerUsers) -}}
{{- end -}}
{{- end -}}

{{- define "metalambda.gatewayContainerSecurityContext" -}}
{{- if eq .Values.gateway.workerUsers "own" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
  add: [SETUID, SETGID, KILL]
{{- else -}}
{{ include "metalambda.containerSecurityContext" . }}
{{- end -}}
{{- end -}}

{{- define "metalambda.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The Secret holding the gateway's hook token (key "token"). */}}
{{- define "metalambda.hookTokenSecret" -}}
{{ .Values.gateway.hookToken.existingSecret | default (printf "%s-hook-token" .Values.gateway.name) }}
{{- end -}}

{{/* Where the engine and the gateway mount the hook token. */}}
{{- define "metalambda.hookTokenDir" -}}
/var/run/metalambda/hook-token
{{- end -}}
