"""The controller's own serving certificate (--api-cert-secret): the rules."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from jobrelay.relayapi.self_certificate_rules import (
    RENEW_AT,
    Renewal,
    ServingMaterial,
    api_service_available,
    api_service_ca_bundle,
    ca_bundle_of,
    renewal,
    serving_hosts,
    webhook_ca_bundle,
    webhooks_lacking,
)
from jobrelay.web.tls import certificate_authority, signed_serving_certificate

HOSTS = serving_hosts("https://jr-api.ops.svc:443", "ops")
DAY = datetime.timedelta(days=1)


def _material(
    ca_days: int = 3650, cert_days: int = 365, hosts: list[str] = HOSTS
) -> ServingMaterial:
    ca, ca_key = certificate_authority("test-ca", ca_days * DAY)
    cert, key = signed_serving_certificate(ca, ca_key, hosts, cert_days * DAY)
    return ServingMaterial(ca, ca_key, cert, key)


MATERIAL = _material()
CERT = x509.load_pem_x509_certificate(MATERIAL.cert_pem)
ISSUED = CERT.not_valid_before_utc


@pytest.mark.parametrize(
    ("url", "namespace", "hosts"),
    [
        ("https://jr-api.ops.svc:443", "ops",
         ["jr-api", "jr-api.ops", "jr-api.ops.svc", "jr-api.ops.svc.cluster.local"]),
        ("https://jr-api.ops.svc.cluster.local", "ops",
         ["jr-api", "jr-api.ops", "jr-api.ops.svc", "jr-api.ops.svc.cluster.local"]),
        ("https://relay.example.com:8443", "ops", ["relay.example.com"]),
        ("", "team", ["jobrelay-api", "jobrelay-api.team", "jobrelay-api.team.svc",
                      "jobrelay-api.team.svc.cluster.local"]),
    ],
)  # fmt: skip
def test_the_certificate_names_every_form_of_the_services_name(
    url: str, namespace: str, hosts: list[str]
) -> None:
    assert serving_hosts(url, namespace) == hosts


def test_the_secret_holds_the_material_and_reads_back() -> None:
    secret = MATERIAL.secret("ops", "jr-api-tls", {"app": "x"})
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert ServingMaterial.from_secret(secret) == MATERIAL
    assert MATERIAL.ca_bundle == secret["data"]["ca.crt"]


@pytest.mark.parametrize(
    "data",
    [None, {}, {"ca.crt": "eA==", "tls.crt": "eA==", "tls.key": "eA=="},  # no ca.key: the old chart's
     {"ca.crt": "not base64!", "ca.key": "eA==", "tls.crt": "eA==", "tls.key": "eA=="},
     {"ca.crt": "", "ca.key": "eA==", "tls.crt": "eA==", "tls.key": "eA=="}],
)  # fmt: skip
def test_an_incomplete_secret_is_no_material(data: dict[str, str] | None) -> None:
    assert ServingMaterial.from_secret({"data": data} if data is not None else None) is None


@pytest.mark.parametrize(
    ("days", "expected"),
    [(0, Renewal.NONE), (200, Renewal.NONE), (244, Renewal.SERVING), (400, Renewal.SERVING),
     (2434, Renewal.AUTHORITY), (4000, Renewal.AUTHORITY)],
)  # fmt: skip
def test_the_serving_certificate_renews_at_two_thirds_and_the_ca_at_two_thirds_of_its_own(
    days: int, expected: Renewal
) -> None:
    assert renewal(MATERIAL, HOSTS, ISSUED + days * DAY) is expected


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=0.0, max_value=0.99))
def test_renewal_is_due_exactly_past_two_thirds_of_the_life(share: float) -> None:
    life = CERT.not_valid_after_utc - ISSUED
    due = renewal(MATERIAL, HOSTS, ISSUED + life * share) is Renewal.SERVING
    assert due == (share >= RENEW_AT)


def test_a_certificate_missing_a_name_or_of_another_ca_is_remade_with_the_ca_kept() -> None:
    assert renewal(_material(hosts=["other"]), HOSTS, ISSUED) is Renewal.SERVING
    foreign = ServingMaterial(MATERIAL.ca_pem, MATERIAL.ca_key_pem, *_cert_of_another_ca())
    assert renewal(foreign, HOSTS, ISSUED) is Renewal.SERVING
    assert renewal(None, HOSTS, ISSUED) is Renewal.AUTHORITY
    garbled = ServingMaterial(b"x", b"x", b"x", b"x")
    assert renewal(garbled, HOSTS, ISSUED) is Renewal.AUTHORITY


def _cert_of_another_ca() -> tuple[bytes, bytes]:
    other = _material()
    return other.cert_pem, other.key_pem


def test_the_serving_certificate_never_outlives_its_ca() -> None:
    short = _material(ca_days=30, cert_days=365)
    cert = x509.load_pem_x509_certificate(short.cert_pem)
    ca = x509.load_pem_x509_certificate(short.ca_pem)
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc
    cert.verify_directly_issued_by(ca)


def test_the_ca_bundle_bodies_name_that_field_alone() -> None:
    bundle = MATERIAL.ca_bundle
    assert api_service_ca_bundle(bundle) == {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": API_SERVICE_NAME}, "spec": {"caBundle": bundle},
    }  # fmt: skip
    body = webhook_ca_bundle("jr-managedby", ["a.x", "b.x"], bundle)
    assert body["webhooks"] == [{"name": "a.x", "clientConfig": {"caBundle": bundle}},
                                {"name": "b.x", "clientConfig": {"caBundle": bundle}}]  # fmt: skip
    assert base64.b64decode(bundle) == MATERIAL.ca_pem


@pytest.mark.parametrize(
    ("webhooks", "lacking"),
    [([], []),
     ([{"name": "a", "clientConfig": {"caBundle": "B"}}], []),
     ([{"name": "a", "clientConfig": {}}, {"name": "b", "clientConfig": {"caBundle": "old"}}],
      ["a", "b"]),
     ([{"name": "a", "clientConfig": {"caBundle": "B"}}, {"name": "b"}], ["b"])],
)  # fmt: skip
def test_webhooks_lacking_the_ca_are_named(
    webhooks: list[dict[str, object]], lacking: list[str]
) -> None:
    assert webhooks_lacking({"webhooks": webhooks}, "B") == lacking


@pytest.mark.parametrize(
    ("obj", "available", "bundle"),
    [(None, None, None),
     ({"spec": {}}, None, None),
     ({"spec": {"caBundle": "B"}, "status": {"conditions": [{"type": "Available", "status": "True"}]}},
      True, "B"),
     ({"status": {"conditions": [{"type": "Available", "status": "False"}]}}, False, None)],
)  # fmt: skip
def test_the_api_services_condition_and_bundle_are_read(
    obj: dict[str, object] | None, available: bool | None, bundle: str | None
) -> None:
    assert api_service_available(obj) is available
    assert ca_bundle_of(obj) == bundle
