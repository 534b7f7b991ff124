{{/* The chart's name, and the release's full name (63 characters: a DNS label). */}}
{{- define "blackbox.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "blackbox.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "blackbox.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "blackbox.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: pass (dict "root" $ "component" "ingest"). */}}
{{- define "blackbox.selectorLabels" -}}
app.kubernetes.io/name: {{ include "blackbox.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "blackbox.componentLabels" -}}
{{ include "blackbox.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "blackbox.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "blackbox.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "blackbox.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "blackbox.secretEnvName" -}}
{{- default (printf "%s-env" (include "blackbox.fullname" .)) .Values.secretEnv.existingSecret }}
{{- end }}

{{/*
What every blackbox pod shares: identity, security context, settings (a ConfigMap), secrets (a Secret,
never a ConfigMap), the evidence keys and the configuration files, and writable /tmp and data
directory on a read-only root filesystem. Pass (dict "root" $ "component" NAME "values" .Values.NAME
"args" LIST "port" PORT ["signingSecret" NAME]); a PORT serves /healthz (liveness) and /readyz
(readiness); a signingSecret (a Secret with signing.key) is the key the pod seals captures with.
*/}}
{{- define "blackbox.podSpec" -}}
{{- $root := .root }}
{{- $v := .values }}
serviceAccountName: {{ include "blackbox.serviceAccountName" $root }}
automountServiceAccountToken: false
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with (default $root.Values.nodeSelector $v.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $root.Values.tolerations $v.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: {{ .component }}
    image: {{ include "blackbox.image" $root }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    args:
      {{- toYaml .args | nindent 6 }}
    {{- if .port }}
    ports:
      - name: http
        containerPort: {{ .port }}
        protocol: TCP
    {{- end }}
    envFrom:
      - configMapRef:
          name: {{ include "blackbox.fullname" $root }}-settings
      - secretRef:
          name: {{ include "blackbox.secretEnvName" $root }}
    env:
      - name: BLACKBOX_DATA_DIR
        value: /var/lib/blackbox
      - name: BLACKBOX_KEK_FILE
        value: /etc/blackbox/keys/kek.key
      - name: BLACKBOX_INDEX_ID_KEY_FILE
        value: /etc/blackbox/keys/index_id.key
      - name: BLACKBOX_TLOG_KEY
        value: /etc/blackbox/keys/tlog.key
      {{- if .signingSecret }}
      - name: BLACKBOX_SIGNING_KEY
        value: /etc/blackbox/signing/signing.key
      {{- end }}
      {{- if $root.Values.config.trustStore }}
      - name: BLACKBOX_TRUST_STORE
        value: /etc/blackbox/config/trust.toml
      {{- end }}
      {{- if $root.Values.config.retentionPolicy }}
      - name: BLACKBOX_RETENTION_POLICY
        value: /etc/blackbox/config/retention.toml
      {{- end }}
      {{- if $root.Values.config.pacts }}
      - name: BLACKBOX_PACTS
        value: /etc/blackbox/config/pacts.toml
      {{- end }}
    {{- if .port }}
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
      {{- toYaml $root.Values.probes.liveness | nindent 6 }}
    readinessProbe:
      httpGet:
        path: /readyz
        port: http
      {{- toYaml $root.Values.probes.readiness | nindent 6 }}
    {{- end }}
    resources:
      {{- toYaml $v.resources | nindent 6 }}
    securityContext:
      {{- toYaml $root.Values.containerSecurityContext | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
      - name: data
        mountPath: /var/lib/blackbox
      - name: keys
        mountPath: /etc/blackbox/keys
        readOnly: true
      - name: config
        mountPath: /etc/blackbox/config
        readOnly: true
      {{- if .signingSecret }}
      - name: signing
        mountPath: /etc/blackbox/signing
        readOnly: true
      {{- end }}
      {{- if $root.Values.tokens.existingSecret }}
      - name: tokens
        mountPath: /var/lib/blackbox/access/tokens.json
        subPath: tokens.json
        readOnly: true
      {{- end }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: {{ $root.Values.tmpSizeLimit }}
  - name: data
    {{- if (($v.persistence).enabled) }}
    persistentVolumeClaim:
      claimName: {{ include "blackbox.fullname" $root }}-{{ .component }}-data
    {{- else }}
    emptyDir:
      sizeLimit: {{ $root.Values.dataSizeLimit }}
    {{- end }}
  - name: keys
    secret:
      secretName: {{ required "keys.existingSecret: the Secret holding kek.key, index_id.key and tlog.key" $root.Values.keys.existingSecret }}
      defaultMode: 0440
  - name: config
    configMap:
      name: {{ include "blackbox.fullname" $root }}-files
  {{- if .signingSecret }}
  - name: signing
    secret:
      secretName: {{ .signingSecret }}
      defaultMode: 0440
  {{- end }}
  {{- if $root.Values.tokens.existingSecret }}
  - name: tokens
    secret:
      secretName: {{ $root.Values.tokens.existingSecret }}
      defaultMode: 0440
  {{- end }}
{{- end }}

{{/* Pod annotations: scrape hints, and checksums so a settings or secret change rolls the pods. */}}
{{- define "blackbox.podAnnotations" -}}
{{- $root := .root }}
checksum/settings: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
checksum/secret-env: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
{{- if and $root.Values.metrics.scrapeAnnotations .port }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with .values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
