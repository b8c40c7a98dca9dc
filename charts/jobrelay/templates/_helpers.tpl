{{/* The chart's name. */}}
{{- define "jobrelay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object of the release (63 characters at most). */}}
{{- define "jobrelay.fullname" -}}
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

{{/* The controller's namespace. */}}
{{- define "jobrelay.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* The controller's ServiceAccount. */}}
{{- define "jobrelay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "jobrelay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The controller's identity, as the apiserver names it (admission policies match it). */}}
{{- define "jobrelay.username" -}}
{{- printf "system:serviceaccount:%s:%s" (include "jobrelay.namespace" .) (include "jobrelay.serviceAccountName" .) -}}
{{- end -}}

{{- define "jobrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "jobrelay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "jobrelay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "jobrelay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: jobrelay
{{- end -}}

{{/* The image reference: repository@digest, else repository:tag (appVersion by default). */}}
{{- define "jobrelay.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The plural resource of a kinds entry ({name: Kind.version.group, resource: ...}). */}}
{{- define "jobrelay.kindResource" -}}
{{- $parts := splitList "." .name -}}
{{- default (include "jobrelay.defaultPlural" (first $parts)) .resource -}}
{{- end -}}

{{/* The plural `jobrelay run` assumes for a kind (kinds/catalog.py default_plural). */}}
{{- define "jobrelay.defaultPlural" -}}
{{- $lower := lower . -}}
{{- $previous := "" -}}
{{- if gt (len $lower) 1 -}}
{{- $previous = substr (sub (len $lower) 2 | int) (sub (len $lower) 1 | int) $lower -}}
{{- end -}}
{{- if or (hasSuffix "s" $lower) (hasSuffix "x" $lower) (hasSuffix "ch" $lower) (hasSuffix "sh" $lower) -}}
{{- printf "%ses" $lower -}}
{{- else if and (hasSuffix "y" $lower) $previous (not (contains $previous "aeiou")) -}}
{{- printf "%sies" (trimSuffix "y" $lower) -}}
{{- else -}}
{{- printf "%ss" $lower -}}
{{- end -}}
{{- end -}}

{{/* The API group of a kinds entry ("" for the core group is not a workload kind). */}}
{{- define "jobrelay.kindGroup" -}}
{{- $parts := splitList "." .name -}}
{{- join "." (rest (rest $parts)) -}}
{{- end -}}

{{/* Where a kinds entry's workloads keep managedBy: its managedByField, else the known
place of an adapter's kind (kinds/kubeflow.py: Kubeflow's v1 jobs and MPIJob keep it in
spec.runPolicy), else spec.managedBy. */}}
{{- define "jobrelay.kindField" -}}
{{- if .managedByField -}}
{{- .managedByField -}}
{{- else if has .name (list "PyTorchJob.v1.kubeflow.org" "MPIJob.v2beta1.kubeflow.org") -}}
spec.runPolicy.managedBy
{{- else -}}
spec.managedBy
{{- end -}}
{{- end -}}

{{/* The CEL of "delegated to jobrelay" (manifests/admission_policy.py _delegated), from
.formats (files/admission-policies.yaml `delegated`) for .root's kinds: the uniform
comparison when every kind claims controllerName at spec.managedBy, else a clause per kind. */}}
{{- define "jobrelay.delegatedExpression" -}}
{{- $root := .root -}}
{{- $formats := .formats -}}
{{- $uniform := true -}}
{{- $clauses := list -}}
{{- range $root.Values.kinds -}}
{{- $field := include "jobrelay.kindField" . -}}
{{- $value := default $root.Values.controllerName .managedBy -}}
{{- if or (ne $field "spec.managedBy") (ne $value $root.Values.controllerName) -}}
{{- $uniform = false -}}
{{- end -}}
{{- $clause := dict
  "groupLiteral" (include "jobrelay.celString" (include "jobrelay.kindGroup" .))
  "pluralLiteral" (include "jobrelay.celString" (include "jobrelay.kindResource" .))
  "field" (replace "." ".?" $field)
  "valueLiteral" (include "jobrelay.celString" $value) -}}
{{- $clauses = append $clauses (include "jobrelay.fillText" (dict "text" $formats.perKind "values" $clause)) -}}
{{- end -}}
{{- if $uniform -}}
{{- include "jobrelay.fillText" (dict "text" $formats.uniform "values" (dict "controllerNameLiteral" (include "jobrelay.celString" $root.Values.controllerName))) -}}
{{- else -}}
{{- join $formats.joiner $clauses -}}
{{- end -}}
{{- end -}}

{{/* .text with every "$(key)" replaced by .values.key, verbatim (manifests/chart_sources.py
fill; the values the chart passes hold no "$("). */}}
{{- define "jobrelay.fillText" -}}
{{- $text := .text -}}
{{- range $key, $value := .values -}}
{{- $text = replace (printf "$(%s)" $key) $value $text -}}
{{- end -}}
{{- $text -}}
{{- end -}}

{{/* .data (an object of a files/ data file) with every "$(key)" in its strings replaced by
.values.key, as JSON: the value goes in JSON-escaped, so any text is safe. */}}
{{- define "jobrelay.fill" -}}
{{- $json := toJson .data -}}
{{- range $key, $value := .values -}}
{{- $json = replace (printf "$(%s)" $key) (toJson $value | trimPrefix "\"" | trimSuffix "\"") $json -}}
{{- end -}}
{{- $json -}}
{{- end -}}
