{{/* The labels every object carries, besides app.kubernetes.io/name. */}}
{{- define "nexo.baseLabels" -}}
app.kubernetes.io/part-of: nexo-edge
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The chart's name (nameOverride, else nexo-edge): the app.kubernetes.io/name of the objects
     that belong to the whole release. */}}
{{- define "nexo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name (or prefix) of the objects that belong to the whole release: fullnameOverride, else
     nexo.name. The components' objects keep the product's names, which the operator, the Manager,
     nexoctl, the Control Plane and the admission policies find them by (the chart README). */}}
{{- define "nexo.fullname" -}}
{{- default (include "nexo.name" .) .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of an object that belongs to the whole release. */}}
{{- define "nexo.labels" -}}
app.kubernetes.io/name: {{ include "nexo.name" . }}
{{ include "nexo.baseLabels" . }}
{{- end -}}

{{/* Labels of an object of one component: (list $ "nexo-operator"). The name label is also the
     Deployments' selector, so it never changes. */}}
{{- define "nexo.componentLabels" -}}
app.kubernetes.io/name: {{ index . 1 }}
app.kubernetes.io/component: {{ trimPrefix "nexo-" (index . 1) }}
{{ include "nexo.baseLabels" (index . 0) }}
{{- end -}}

{{/* Scheduling and pod extras of a component's pod spec (nodeSelector, tolerations, affinity,
     topologySpreadConstraints, priorityClassName). */}}
{{- define "nexo.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .affinity }}
affinity:
  {{- toYaml .affinity | nindent 2 }}
{{- else if and .replicas (gt (int .replicas) 1) .antiAffinityLabels }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml .antiAffinityLabels | nindent 12 }}
{{- end }}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* Image reference: a digest wins over the tag. */}}
{{- define "nexo.image" -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ .tag }}
{{- end -}}
{{- end -}}

{{/* The restricted container security context (Pod Security Standard "restricted",
     OpenShift restricted-v2: no fixed runAsUser), with the component's securityContext merged
     over it. Called with the component's values. */}}
{{- define "nexo.containerSecurityContext" -}}
{{- $restricted := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $restricted (deepCopy (.securityContext | default dict))) -}}
{{- end -}}

{{/* The restricted pod security context, with the component's podSecurityContext merged over it. */}}
{{- define "nexo.podSecurityContext" -}}
{{- $restricted := dict "runAsNonRoot" true "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $restricted (deepCopy (.podSecurityContext | default dict))) -}}
{{- end -}}

{{/* imagePullSecrets as Kubernetes has them ([{name: x}]; plain names are accepted too), from
     imagePullSecrets and global.imagePullSecrets, each name once. */}}
{{- define "nexo.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat (.Values.imagePullSecrets | default list) (dig "imagePullSecrets" list (.Values.global | default dict)) }}
{{- $names = append $names (ternary . (get (kindIs "map" . | ternary . dict) "name") (kindIs "string" .)) }}
{{- end }}
{{- with uniq $names }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* "true" when this release may render the cluster-scoped object (list $ KIND NAME) that every
     installation shares: it does not exist yet, or this release owns it. Another release's copy
     is left to that release (Helm would refuse to adopt it). */}}
{{- define "nexo.mayOwn" -}}
{{- $root := index . 0 }}
{{- $existing := lookup "admissionregistration.k8s.io/v1" (index . 1) "" (index . 2) }}
{{- $owner := dig "metadata" "annotations" "meta.helm.sh/release-name" "" ($existing | default dict) }}
{{- $ownerNS := dig "metadata" "annotations" "meta.helm.sh/release-namespace" "" ($existing | default dict) }}
{{- if or (not $existing) (and (eq $owner $root.Release.Name) (eq $ownerNS $root.Release.Namespace)) }}true{{ end }}
{{- end -}}

{{/* The namespaces this installation serves, for its admission parameters: the watched ones,
     or "*" for all. */}}
{{- define "nexo.admissionScope" -}}
{{- if .Values.operator.watchNamespaces }}{{ join "," .Values.operator.watchNamespaces }}{{ else }}*{{ end }}
{{- end -}}
