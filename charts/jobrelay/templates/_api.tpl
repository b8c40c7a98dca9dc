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

{{/* source secret: api.certificate.caBundle as a caBundle (base64 of the PEM), given as
the PEM or already in base64 (as a Secret's ca.crt is stored); a render without it fails. */}}
{{- define "jobrelay.apiCaBundle" -}}
{{- $given := .Values.api.certificate.caBundle | trim -}}
{{- if not $given -}}
{{- fail "api.certificate.source=secret needs api.certificate.caBundle: the CA that signed the Secret's certificate, as PEM or base64 (e.g. --set-file api.certificate.caBundle=ca.crt), or the Secret's ca.crt as stored (base64)" -}}
{{- end -}}
{{- if hasPrefix "-----BEGIN" $given -}}
{{- printf "%s\n" $given | b64enc -}}
{{- else -}}
{{- $given | replace "\n" "" | replace " " "" -}}
{{- end -}}
{{- end -}}
