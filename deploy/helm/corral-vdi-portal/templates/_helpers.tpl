{{/*
The objects' names are fixed (one portal per cluster, as in deploy/):
scripts, docs and the pool namespaces' policies name them.
*/}}

{{/* The labels on every object's metadata. */}}
{{- define "corral-vdi.labels" -}}
app.kubernetes.io/part-of: corral-vdi
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The portal's pods: selector and pod labels. */}}
{{- define "corral-vdi.selector" -}}
app.kubernetes.io/name: corral-vdi-portal
{{- end }}

{{/* The image reference: digest, else tag, else the chart's appVersion. */}}
{{- define "corral-vdi.encoderImage" -}}
{{- with .Values.encoder.image -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ .tag | default $.Chart.AppVersion }}
{{- end }}
{{- end }}
{{- end }}

{{- define "corral-vdi.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
GOMEMLIMIT: goMemLimit, else about 90% of limits.memory in Mi or Gi, so
the Go runtime collects harder before the OOM killer would end the pod.
*/}}
{{- define "corral-vdi.goMemLimit" -}}
{{- if .Values.goMemLimit -}}
{{ .Values.goMemLimit }}
{{- else -}}
{{- $mem := toString (.Values.resources.limits.memory | default "") -}}
{{- $mi := 0 -}}
{{- if regexMatch "^[0-9]+Mi$" $mem -}}
{{- $mi = trimSuffix "Mi" $mem | atoi -}}
{{- else if regexMatch "^[0-9]+Gi$" $mem -}}
{{- $mi = mul (trimSuffix "Gi" $mem | atoi) 1024 -}}
{{- else -}}
{{- fail (printf "resources.limits.memory: %q is not in Mi or Gi; set goMemLimit (about 90%% of it, e.g. 460MiB) too" $mem) -}}
{{- end -}}
{{ div (mul $mi 9) 10 }}MiB
{{- end }}
{{- end }}

{{/* A pool namespace's policies admit the portal's pods from here. */}}
{{- define "corral-vdi.portalPeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Release.Namespace }}
  podSelector:
    matchLabels:
      app.kubernetes.io/name: corral-vdi-portal
{{- end }}

{{/* The rules of document .doc (from 0) of files/.file, a link into
deploy/: the chart grants what the kustomize base grants. */}}
{{- define "corral-vdi.rules" -}}
{{- $doc := index (regexSplit "(?m)^---$" (.root.Files.Get (printf "files/%s" .file)) -1) .doc -}}
{{- toYaml (fromYaml $doc).rules }}
{{- end }}

{{/* The tailscale serve ConfigMap's name: a hash of its content, as
kustomize's configMapGenerator names it, so a change rolls the pods. */}}
{{- define "corral-vdi.tailscaleServe" -}}
corral-vdi-tailscale-serve-{{ .Files.Get "files/tailscale-serve.json" | sha256sum | trunc 10 }}
{{- end }}

{{/* A helm test pod: restricted, curl against the portal's Service. */}}
{{- define "corral-vdi.testPod" -}}
apiVersion: v1
kind: Pod
metadata:
  name: corral-vdi-portal-test-{{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "corral-vdi.labels" .root | nindent 4 }}
  annotations:
    helm.sh/hook: test
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: {{ .name }}
      image: {{ .root.Values.tests.image }}
      command: ["/bin/sh", "-ec", {{ .script | quote }}]
      env:
        - name: PORTAL
          value: http://corral-vdi-portal.{{ .root.Release.Namespace }}.svc
        # The Host the portal answers to: its public name, else loopback's.
        - name: HOST
          value: {{ (urlParse (splitList "," .root.Values.publicURL | first | default "http://localhost")).host | quote }}
        {{- range $k, $v := .env }}
        - name: {{ $k }}
          value: {{ $v | quote }}
        {{- end }}
      resources:
        requests:
          cpu: 10m
          memory: 16Mi
        limits:
          memory: 64Mi
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: ["ALL"]
{{- end }}

{{/* A monitor endpoint's bearer token: metrics-token of the shared Secret. */}}
{{- define "corral-vdi.metricsAuth" -}}
{{- if .Values.metrics.bearerToken -}}
authorization:
  credentials:
    name: {{ .Values.secrets.existingSecret }}
    key: metrics-token
{{- end }}
{{- end }}
