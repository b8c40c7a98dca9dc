{{/* The Secret of the logs API's certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "jobrelay.apiSecretName" -}}
{{- default (printf "%s-api-tls" (include "jobrelay.fullname" .)) .Values.api.certificate.secretName -}}
{{- end -}}

{{/* The names the API's certificate is valid for: its Service's, a YAML list. */}}
{{- define "jobrelay.apiHosts" -}}
{{- $service := printf "%s-api" (include "jobrelay.fullname" .) -}}
{{- $namespace := include "jobrelay.namespace" . -}}
- {{ $service }}
- {{ $service }}.{{ $namespace }}
- {{ $service }}.{{ $namespace }}.svc
- {{ $service }}.{{ $namespace }}.svc.cluster.local
{{- end -}}

{{/* Where the pod mounts the API's Secret. */}}
{{- define "jobrelay.apiTlsDir" -}}/etc/jobrelay/api-tls{{- end -}}
