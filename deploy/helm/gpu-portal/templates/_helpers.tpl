{{/* Names, labels, and the pieces every pod of the chart shares. */}}

{{- define "gpu-portal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-portal.fullname" -}}
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

{{- define "gpu-portal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpu-portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "root" $ "component" "web"). */}}
{{- define "gpu-portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-portal.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpu-portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpu-portal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpu-portal.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret the pods read their secret variables from. */}}
{{- define "gpu-portal.secretName" -}}
{{- if .Values.keyVault.enabled -}}
{{- printf "%s-secrets" (include "gpu-portal.fullname" .) -}}
{{- else -}}
{{- required "existingSecret is required when keyVault.enabled is false" .Values.existingSecret -}}
{{- end -}}
{{- end -}}

{{/*
The body of a SecretProviderClass (secrets.csi.x-k8s.io/v1) for Azure Key Vault with workload
identity: call with (dict "root" $ "secretName" "..."). Shapes from the Azure Key Vault provider's
docs (azure.github.io/secrets-store-csi-driver-provider-azure, "Workload identity" and "Sync as
Kubernetes Secret").
*/}}
{{- define "gpu-portal.secretProviderClassSpec" -}}
{{- $kv := .root.Values.keyVault -}}
provider: azure
parameters:
  usePodIdentity: "false"
  clientID: {{ required "workloadIdentity.clientId is required" .root.Values.workloadIdentity.clientId | quote }}
  keyvaultName: {{ required "keyVault.name is required" $kv.name | quote }}
  tenantId: {{ required "keyVault.tenantId is required" $kv.tenantId | quote }}
  objects: |
    array:
    {{- range $kv.secrets }}
      - |
        objectName: {{ .objectName }}
        objectType: secret
    {{- end }}
secretObjects:
  - secretName: {{ .secretName }}
    type: Opaque
    data:
    {{- range $kv.secrets }}
      - objectName: {{ .objectName }}
        key: {{ .env }}
    {{- end }}
{{- end -}}

{{/* Pod-level labels: workload identity must be a pod label for the webhook to inject. */}}
{{- define "gpu-portal.podLabels" -}}
{{ include "gpu-portal.selectorLabels" . }}
azure.workload.identity/use: "true"
{{- end -}}

{{/*
The container's environment, shared by every process: the pod IP (so ALLOWED_HOSTS admits the
kubelet's probes and Prometheus's scrapes, which send Host: <pod IP>), the values' config (inline,
not a ConfigMap: the pre-install migration hook runs before any ConfigMap of the release exists,
and a changed value changes the pod template, so it rolls the pods), the secrets, and the
component's extraEnv. Call with (dict "root" $ "extraEnv" .Values.web.extraEnv).
*/}}
{{- define "gpu-portal.env" -}}
envFrom:
  - secretRef:
      name: {{ .secretName | default (include "gpu-portal.secretName" .root) }}
env:
  - name: POD_IP
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
  - name: ALLOWED_HOSTS
    value: {{ printf "%s,$(POD_IP)" (required "host is required" .root.Values.host) | quote }}
  - name: CSRF_TRUSTED_ORIGINS
    value: {{ printf "https://%s" .root.Values.host | quote }}
  - name: PORTAL_URL
    value: {{ printf "https://%s" .root.Values.host | quote }}
  - name: AZURE_CREDENTIAL
    value: default
{{- range $name, $value := .root.Values.config }}
{{- /* An empty value is left out, so the portal's default applies (e.g. AZURE_SUBNET_ID). */}}
{{- if ne (toString $value) "" }}
  - name: {{ $name }}
    value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- range $name, $value := .extraEnv }}
  - name: {{ $name }}
    value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* Volumes every pod mounts: the writable var/ and /tmp, and the Key Vault CSI volume. */}}
{{- define "gpu-portal.volumes" -}}
volumes:
  - name: var
    emptyDir: {}
  - name: tmp
    emptyDir: {}
{{- if .root.Values.keyVault.enabled }}
  - name: keyvault
    csi:
      driver: secrets-store.csi.k8s.io
      readOnly: true
      volumeAttributes:
        secretProviderClass: {{ .spcName | default (include "gpu-portal.fullname" .root) }}
{{- end }}
{{- end -}}

{{- define "gpu-portal.volumeMounts" -}}
volumeMounts:
  - name: var
    mountPath: /app/var
  - name: tmp
    mountPath: /tmp
{{- if .Values.keyVault.enabled }}
  - name: keyvault
    mountPath: /mnt/secrets-store
    readOnly: true
{{- end }}
{{- end -}}

{{- define "gpu-portal.podSpecCommon" -}}
serviceAccountName: {{ .saName | default (include "gpu-portal.serviceAccountName" .root) }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
