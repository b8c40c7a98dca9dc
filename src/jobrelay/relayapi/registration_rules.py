"""The aggregated API's registration with the manager's apiserver (pure).

The chart registers ``APIService v1alpha1.api.jobrelay.dev`` for the
controller's Service itself. A controller run outside the manager (the local
fleet, ``make demo``: ``jobrelay run --api-register``) registers both the
APIService and a Service that reaches it: an ``ExternalName`` Service naming
the host it listens on, because the Endpoints and EndpointSlices of a Service
without a selector may not name a loopback address (the apiserver's validation
refuses 127.0.0.0/8), while the aggregator resolves an ExternalName Service to
``https://<externalName>:<port>`` and verifies the serving certificate as
``<service>.<namespace>.svc``.
"""

from __future__ import annotations

import base64
from typing import Any

from jobrelay.relayapi.rules import API_GROUP, API_VERSION

__all__ = ["API_SERVICE_NAME", "LOCAL_SERVICE", "api_service", "external_service", "service_host"]

API_SERVICE_NAME = f"{API_VERSION}.{API_GROUP}"
# The Service `jobrelay run --api-register` makes in the controller's namespace.
LOCAL_SERVICE = "jobrelay-api"
_LABELS = {"app.kubernetes.io/name": "jobrelay", "app.kubernetes.io/component": "api"}


def service_host(namespace: str, service: str = LOCAL_SERVICE) -> str:
    """The name the aggregator checks the serving certificate against."""
    return f"{service}.{namespace}.svc"


def api_service(namespace: str, service: str, port: int, ca_pem: str) -> dict[str, Any]:
    """``APIService v1alpha1.api.jobrelay.dev`` served by ``namespace/service:port``, whose
    serving certificate ``ca_pem`` signs (priorities as metrics-server's)."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE_NAME, "labels": dict(_LABELS)},
        "spec": {
            "group": API_GROUP,
            "version": API_VERSION,
            "service": {"namespace": namespace, "name": service, "port": port},
            "caBundle": base64.b64encode(ca_pem.encode()).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


def external_service(namespace: str, host: str, port: int) -> dict[str, Any]:
    """The Service ``namespace/jobrelay-api`` that sends the aggregator to ``host:port``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": LOCAL_SERVICE, "namespace": namespace, "labels": dict(_LABELS)},
        "spec": {
            "type": "ExternalName",
            "externalName": host,
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
    }
