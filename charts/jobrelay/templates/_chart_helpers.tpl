{{/* The Lease of leader election, as `jobrelay run` names it from controllerName
(controller/options.py lease_name_for): jobrelay.dev/relay -> jobrelay-relay. */}}
{{- define "jobrelay.leaseName" -}}
{{- $parts := splitn "/" 2 (lower .Values.controllerName) -}}
{{- $first := first (splitList "." $parts._0) -}}
{{- $joined := ternary (printf "%s-%s" $first $parts._1) $first (ne (default "" $parts._1) "") -}}
{{- $name := regexReplaceAll "[^a-z0-9-]+" $joined "-" | trimAll "-" | trunc 63 | trimAll "-" -}}
{{- default "jobrelay" $name -}}
{{- end -}}

{{/* A CEL string literal (single quotes), as manifests/admission_policy.py writes one. */}}
{{- define "jobrelay.celString" -}}
{{- printf "'%s'" (. | replace "\\" "\\\\" | replace "'" "\\'") -}}
{{- end -}}
