"""The aggregated API's registration with the manager's apiserver (pure).

The chart registers ``APIService v1alpha1.api.jobrelay.dev`` for the
controller's Service itself. A controller run outside the manager (the local
fleet, ``make demo``: ``jobrelay run --api-register``) registers the APIService
and a Service that reaches it on the host. Which Service, found on a real
v1.35 apiserver with ``--enable-aggregator-routing=true``:

- Endpoints and IPv4/IPv6 EndpointSlices may not name a loopback address
  (validation: "may not be in the loopback range");
- an ``ExternalName`` Service is refused by the aggregator's endpoint routing
  ("unsupported service type");
- a Service without a selector whose EndpointSlice has ``addressType: FQDN`` and
  the address ``127.0.0.1`` is accepted (a valid DNS-1123 name) and the
  aggregator dials it as the IP it is. FQDN slices are deprecated but served;
  this is only for a controller outside a cluster.

The aggregator checks the serving certificate as ``<service>.<namespace>.svc``.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

from jobrelay.relayapi.route_rules import API_GROUP, API_VERSION

__all__ = [
    "API_SERVICE_NAME",
    "LOCAL_SERVICE",
    "SERVICE_PORT",
    "api_service",
    "local_endpoints",
    "local_service",
    "reachable_address",
    "service_host",
]

API_SERVICE_NAME = f"{API_VERSION}.{API_GROUP}"
# The Service `jobrelay run --api-register` makes in the controller's namespace.
LOCAL_SERVICE = "jobrelay-api"
SERVICE_PORT = 443
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


def reachable_address(bound_host: str) -> str:
    """The IPv4 address the aggregator dials for a listener on ``bound_host``; ValueError
    for an address an FQDN EndpointSlice cannot carry (IPv6, a name)."""
    if bound_host in ("", "0.0.0.0", "::", "localhost"):
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(bound_host)
    except ValueError:
        raise ValueError(
            f"--api-register needs an IPv4 --api-address, not {bound_host!r}"
        ) from None
    if address.version != 4:
        if address.is_loopback:
            return "127.0.0.1"
        raise ValueError(f"--api-register needs an IPv4 --api-address, not {bound_host!r}")
    return str(address)


def local_service(namespace: str, port: int) -> dict[str, Any]:
    """``namespace/jobrelay-api``: no selector (its EndpointSlice is ours), port 443 to
    ``port``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": LOCAL_SERVICE, "namespace": namespace, "labels": dict(_LABELS)},
        "spec": {
            "type": "ClusterIP",
            "ports": [
                {"name": "https", "port": SERVICE_PORT, "targetPort": port, "protocol": "TCP"}
            ],
        },
    }


def local_endpoints(namespace: str, address: str, port: int) -> dict[str, Any]:
    """The Service's one EndpointSlice: ``address:port`` (an FQDN slice; see above)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": LOCAL_SERVICE,
            "namespace": namespace,
            "labels": {
                **_LABELS,
                "kubernetes.io/service-name": LOCAL_SERVICE,
                # Not the EndpointSlice controllers': they leave it alone.
                "endpointslice.kubernetes.io/managed-by": "jobrelay.dev",
            },
        },
        "addressType": "FQDN",
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }
