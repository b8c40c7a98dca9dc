"""The serving certificate the controller makes and keeps itself (``--api-cert-secret``): pure.

One ``kubernetes.io/tls`` Secret in the controller's namespace holds a long-lived CA
(``ca.crt``, ``ca.key``) and the serving certificate it signs (``tls.crt``, ``tls.key``)
for the names of the API's Service. The chart names the Secret but never renders it
(``helm template`` twice gives the same objects; Kueue's and OPA's cert-controllers keep
theirs the same way): whichever replica starts first creates it, and every replica serves
it. The leader renews the serving certificate at two thirds of its life and keeps the CA,
so the caBundle it writes into the APIService and the managedBy webhook configuration
stays the same; the CA itself is remade only at two thirds of its own life.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from jobrelay.relayapi.registration_rules import API_SERVICE_NAME, LOCAL_SERVICE, service_host

__all__ = [
    "CA_BUNDLE_FIELD_MANAGER",
    "RENEW_AT",
    "Renewal",
    "ServingMaterial",
    "api_service_available",
    "api_service_ca_bundle",
    "ca_bundle_of",
    "not_after",
    "renewal",
    "serving_hosts",
    "webhook_ca_bundle",
    "webhooks_lacking",
]

# Its own field manager: a GitOps tool's desired state (the chart renders no caBundle)
# and this controller's one field never fight over ownership.
CA_BUNDLE_FIELD_MANAGER = "jobrelay-ca-injector"
# The share of a certificate's life after which it is remade (cert-manager's default).
RENEW_AT = 2 / 3
_CA_CERT, _CA_KEY = "ca.crt", "ca.key"
_CERT, _KEY = "tls.crt", "tls.key"


@dataclass(frozen=True)
class ServingMaterial:
    """The PEMs the Secret holds: the CA and its key, the serving certificate and its key."""

    ca_pem: bytes
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def from_secret(cls, secret: Mapping[str, Any] | None) -> ServingMaterial | None:
        """The material of a stored Secret; None when a key is missing or not base64."""
        data = (secret or {}).get("data") or {}
        try:
            parts = [base64.b64decode(data[key], validate=True)
                     for key in (_CA_CERT, _CA_KEY, _CERT, _KEY)]  # fmt: skip
        except (KeyError, TypeError, binascii.Error):
            return None
        if not all(parts):
            return None
        return cls(*parts)

    def secret(self, namespace: str, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """The Secret that stores it (a kubelet or a client reads ca.crt, tls.crt, tls.key)."""
        data = {_CA_CERT: self.ca_pem, _CA_KEY: self.ca_key_pem, _CERT: self.cert_pem,
                _KEY: self.key_pem}  # fmt: skip
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        }

    @property
    def ca_bundle(self) -> str:
        """The CA as an APIService's or a webhook's caBundle (base64 of the PEM)."""
        return base64.b64encode(self.ca_pem).decode()


def serving_hosts(api_url: str, namespace: str) -> list[str]:
    """The names the shared serving certificate is made for: every form of the Service's
    name when ``--api-url`` names ``<service>.<namespace>.svc`` (the chart's), else its
    host; without a URL, ``--api-register``'s Service. The same for every replica: no pod
    name or address."""
    host = (urlsplit(api_url).hostname or "") if api_url else service_host(namespace)
    labels = host.split(".") if host else []
    if len(labels) >= 3 and labels[2] == "svc":
        service, where = labels[0], labels[1]
        return [service, f"{service}.{where}", f"{service}.{where}.svc",
                f"{service}.{where}.svc.cluster.local"]  # fmt: skip
    return [host] if host else [LOCAL_SERVICE]


class Renewal(enum.Enum):
    """What the leader does with the Secret it finds."""

    NONE = "none"
    SERVING = "serving"  # a new serving certificate signed by the kept CA
    AUTHORITY = "authority"  # a new CA and a serving certificate (the caBundle changes)


def _due(cert: x509.Certificate, now: datetime.datetime) -> bool:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now >= start + (end - start) * RENEW_AT


def renewal(
    material: ServingMaterial | None, hosts: Sequence[str], now: datetime.datetime
) -> Renewal:
    """Whether ``material`` is still good at ``now`` for ``hosts``: a CA past two thirds of
    its life (or unreadable) is remade with its certificate; a serving certificate past
    two thirds of its life, missing a host, or not signed by the CA is remade alone."""
    if material is None:
        return Renewal.AUTHORITY
    try:
        ca = x509.load_pem_x509_certificate(material.ca_pem)
        cert = x509.load_pem_x509_certificate(material.cert_pem)
    except ValueError:
        return Renewal.AUTHORITY
    if _due(ca, now):
        return Renewal.AUTHORITY
    try:
        cert.verify_directly_issued_by(ca)
        named = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return Renewal.SERVING
    if _due(cert, now) or not set(hosts) <= set(named.get_values_for_type(x509.DNSName)):
        return Renewal.SERVING
    return Renewal.NONE


def ca_bundle_of(obj: Mapping[str, Any] | None) -> str | None:
    """An APIService's caBundle (None when it has none)."""
    value = ((obj or {}).get("spec") or {}).get("caBundle")
    return value if isinstance(value, str) and value else None


def webhooks_lacking(configuration: Mapping[str, Any] | None, ca_bundle: str) -> list[str]:
    """The names of the configuration's webhooks whose caBundle is not ``ca_bundle``."""
    return [
        webhook["name"]
        for webhook in (configuration or {}).get("webhooks") or []
        if isinstance(webhook, Mapping) and isinstance(webhook.get("name"), str)
        and (webhook.get("clientConfig") or {}).get("caBundle") != ca_bundle
    ]  # fmt: skip


def api_service_ca_bundle(ca_bundle: str) -> dict[str, Any]:
    """The apply body that sets the APIService's caBundle and nothing else."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE_NAME},
        "spec": {"caBundle": ca_bundle},
    }


def webhook_ca_bundle(name: str, webhooks: Sequence[str], ca_bundle: str) -> dict[str, Any]:
    """The apply body that sets the caBundle of each named webhook of MutatingWebhook-
    Configuration ``name`` and nothing else (webhooks are a list keyed by name)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {"name": webhook, "clientConfig": {"caBundle": ca_bundle}} for webhook in webhooks
        ],
    }


def api_service_available(obj: Mapping[str, Any] | None) -> bool | None:
    """An APIService's Available condition: True, False, or None when it says nothing."""
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Available":
            return condition.get("status") == "True"
    return None


def not_after(cert_pem: bytes) -> float | None:
    """When a PEM certificate expires, in unix seconds; None when it does not parse."""
    try:
        return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()
    except ValueError:
        return None
