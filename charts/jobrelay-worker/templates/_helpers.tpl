{{/* The origin of the manager this identity is for (required). */}}
{{- define "jobrelay-worker.origin" -}}
{{- required "origin is required: the manager's `jobrelay run --origin`, else its kube-system namespace UID" .Values.origin -}}
{{- end -}}

{{/* The namespace of the ServiceAccount and its token. */}}
{{- define "jobrelay-worker.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* The ServiceAccount, ClusterRole, bindings and policy: serviceaccount.account_name(origin),
     jobrelay-worker-<origin>, or when the origin cannot be part of a name (or is long), a
     cleaned prefix of it and 10 hex digits of its sha256. */}}
{{- define "jobrelay-worker.accountName" -}}
{{- $origin := include "jobrelay-worker.origin" . -}}
{{- if .Values.serviceAccount.name -}}
{{- .Values.serviceAccount.name -}}
{{- else if and (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $origin) (le (len $origin) 40) -}}
{{- printf "jobrelay-worker-%s" $origin -}}
{{- else -}}
{{- $digest := sha256sum $origin | trunc 10 -}}
{{- $cleaned := regexReplaceAll "[^a-z0-9-]+" (lower $origin) "-" | trunc 28 | trimAll "-" -}}
{{- if $cleaned -}}
{{- printf "jobrelay-worker-%s-%s" $cleaned $digest -}}
{{- else -}}
{{- printf "jobrelay-worker-%s" $digest -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The account's user name, as the worker's apiserver names it (the policy matches it). */}}
{{- define "jobrelay-worker.username" -}}
{{- printf "system:serviceaccount:%s:%s" (include "jobrelay-worker.namespace" .) (include "jobrelay-worker.accountName" .) -}}
{{- end -}}

{{/* What every object carries: the labels `clusters add --create-service-account` writes,
     and the release's. */}}
{{- define "jobrelay-worker.labels" -}}
app.kubernetes.io/managed-by: jobrelay
app.kubernetes.io/component: worker
app.kubernetes.io/part-of: jobrelay
app.kubernetes.io/instance: {{ .Release.Name | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{- range $key, $value := .Values.commonLabels }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* The plural `jobrelay run` assumes for a kind (kinds/catalog.py default_plural). */}}
{{- define "jobrelay-worker.defaultPlural" -}}
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

{{/* The kinds as a JSON list of {group, plural}, each (group, plural) once, in order. */}}
{{- define "jobrelay-worker.resources" -}}
{{- $seen := dict -}}
{{- $resources := list -}}
{{- range .Values.kinds -}}
{{- $parts := regexSplit "\\." (required "every kinds entry needs a name (Kind.version.group)" .name) 3 -}}
{{- if or (lt (len $parts) 2) (not (regexMatch "^[A-Z]" (index $parts 0))) (not (index $parts 1)) -}}
{{- fail (printf "kinds: %q is not Kind.version.group (e.g. Job.v1.batch)" .name) -}}
{{- end -}}
{{- $group := "" -}}
{{- if eq (len $parts) 3 -}}
{{- $group = index $parts 2 -}}
{{- end -}}
{{- $plural := .resource | default (include "jobrelay-worker.defaultPlural" (index $parts 0)) -}}
{{- $key := printf "%s/%s" $group $plural -}}
{{- if not (hasKey $seen $key) -}}
{{- $_ := set $seen $key true -}}
{{- $resources = append $resources (dict "group" $group "plural" $plural) -}}
{{- end -}}
{{- end -}}
{{- if not $resources -}}
{{- fail "kinds: at least one kind is needed" -}}
{{- end -}}
{{- toJson $resources -}}
{{- end -}}

{{/* A YAML single-quoted scalar (readable, unlike toJson's \u0026 for &&). */}}
{{- define "jobrelay-worker.quoted" -}}
{{- printf "'%s'" (replace "'" "''" .) -}}
{{- end -}}

{{/* .data (a value of files/worker-access.yaml) with every "$(key)" in its strings replaced
     by .values.key (manifests/chart_sources.py fill), as JSON: the value goes in
     JSON-escaped, so any text is safe. */}}
{{- define "jobrelay-worker.fill" -}}
{{- $json := toJson .data -}}
{{- range $key, $value := .values -}}
{{- $json = replace (printf "$(%s)" $key) (toJson $value | trimPrefix "\"" | trimSuffix "\"") $json -}}
{{- end -}}
{{- $json -}}
{{- end -}}

{{/* The objects of files/worker-access.yaml (the one source: `jobrelay clusters add
     --create-service-account` applies the same file, filled in for its flags) filled in for
     these values, with the release's labels: a JSON map of serviceAccount, tokenSecret,
     clusterRole, clusterRoleBinding, namespaceRole, admissionPolicy and
     admissionPolicyBinding. */}}
{{- define "jobrelay-worker.objects" -}}
{{- $data := .Files.Get "files/worker-access.yaml" | fromYaml -}}
{{- $namespace := include "jobrelay-worker.namespace" . -}}
{{- $origin := include "jobrelay-worker.origin" . -}}
{{- $values := dict
  "name" (include "jobrelay-worker.accountName" .)
  "namespace" $namespace
  "origin" $origin
  "originLiteral" (toJson $origin)
  "namespaceLiteral" (toJson $namespace)
  "usernameLiteral" (toJson (include "jobrelay-worker.username" .))
  "nameLiteral" (toJson (include "jobrelay-worker.accountName" .))
  "namespaceRoleLiteral" (toJson (printf "%s-namespaced" (include "jobrelay-worker.accountName" .))) -}}
{{- $rules := list -}}
{{- $policyRules := list -}}
{{- range include "jobrelay-worker.resources" . | fromJsonArray -}}
{{- $rules = concat $rules (include "jobrelay-worker.fill" (dict "data" $data.mirrorRules "values" .) | fromJsonArray) -}}
{{- $policyRules = append $policyRules (include "jobrelay-worker.fill" (dict "data" $data.mirrorPolicyRule "values" .) | fromJson) -}}
{{- end -}}
{{- range include "jobrelay-worker.hops" (dict "data" $data "kinds" .Values.kinds) | fromJsonArray -}}
{{- $rules = append $rules (include "jobrelay-worker.fill" (dict "data" $data.hopRule "values" .) | fromJson) -}}
{{- end -}}
{{- range $data.clusterRole.rules -}}
{{- if and $.Values.createNamespaces (eq (toJson .resources) (toJson (list "namespaces"))) -}}
{{- $_ := set . "verbs" (concat .verbs $data.namespaceCreateVerbs) -}}
{{- end -}}
{{- $rules = append $rules . -}}
{{- end -}}
{{- $labels := include "jobrelay-worker.labels" . | fromYaml -}}
{{- $objects := dict -}}
{{- range $key := list "serviceAccount" "tokenSecret" "clusterRole" "clusterRoleBinding" "namespaceRole" "admissionPolicy" "admissionPolicyBinding" -}}
{{- $object := include "jobrelay-worker.fill" (dict "data" (get $data $key) "values" $values) | fromJson -}}
{{- $_ := set $object.metadata "labels" (merge (dict) $labels $object.metadata.labels) -}}
{{- $_ := set $objects $key $object -}}
{{- end -}}
{{- if .Values.admissionPolicy.enabled -}}
{{- $rules = concat $rules (include "jobrelay-worker.fill" (dict "data" $data.bindRules "values" $values) | fromJsonArray) -}}
{{- end -}}
{{- $_ := set $objects.clusterRole "rules" $rules -}}
{{- $constraints := $objects.admissionPolicy.spec.matchConstraints -}}
{{- $_ := set $constraints "resourceRules" (concat $policyRules $constraints.resourceRules) -}}
{{- with .Values.serviceAccount.annotations -}}
{{- $_ := set $objects.serviceAccount.metadata "annotations" . -}}
{{- end -}}
{{- toJson $objects -}}
{{- end -}}

{{/* The owner hops of .kinds (files/worker-access.yaml ownerHops, by Kind.group) as a JSON
     list of {group, plural}, each once, in order (manifests/worker_access.py access_rules). */}}
{{- define "jobrelay-worker.hops" -}}
{{- $seen := dict -}}
{{- $hops := list -}}
{{- range .kinds -}}
{{- $parts := regexSplit "\\." .name 3 -}}
{{- $group := "" -}}
{{- if eq (len $parts) 3 -}}
{{- $group = index $parts 2 -}}
{{- end -}}
{{- range (get $.data.ownerHops (printf "%s.%s" (index $parts 0) $group)) | default list -}}
{{- $key := printf "%s/%s" .group .plural -}}
{{- if not (hasKey $seen $key) -}}
{{- $_ := set $seen $key true -}}
{{- $hops = append $hops (dict "group" .group "plural" .plural) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $hops -}}
{{- end -}}

{{/* The RoleBinding of the namespaced ClusterRole in namespace .opened (files/worker-access.yaml
     namespaceBinding), with the release's labels, as JSON. */}}
{{- define "jobrelay-worker.namespaceBinding" -}}
{{- $data := .root.Files.Get "files/worker-access.yaml" | fromYaml -}}
{{- $values := dict
  "name" (include "jobrelay-worker.accountName" .root)
  "namespace" (include "jobrelay-worker.namespace" .root)
  "origin" (include "jobrelay-worker.origin" .root)
  "opened" .opened -}}
{{- $object := include "jobrelay-worker.fill" (dict "data" $data.namespaceBinding "values" $values) | fromJson -}}
{{- $labels := include "jobrelay-worker.labels" .root | fromYaml -}}
{{- $_ := set $object.metadata "labels" (merge (dict) $labels $object.metadata.labels) -}}
{{- toJson $object -}}
{{- end -}}
