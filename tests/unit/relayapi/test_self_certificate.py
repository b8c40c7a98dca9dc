"""--api-cert-secret: every replica serves one Secret, made by the first to start; the
leader renews it with the CA kept; a renewed Secret is served from the next handshake on."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography import x509
from tests.unit.controller.fakes import FakeCluster

from jobrelay.relayapi.self_certificate import SelfCertificate
from jobrelay.relayapi.self_certificate_rules import ServingMaterial, serving_hosts
from jobrelay.relayapi.serving import start_api
from jobrelay.relayapi.settings import ApiSettings

NAMESPACE = "team-a"
URL = "https://jr-api.team-a.svc:443"
HOSTS = serving_hosts(URL, NAMESPACE)


def _keeper(manager: Any) -> SelfCertificate:
    return SelfCertificate(manager, NAMESPACE, "jr-api-tls", HOSTS)


async def test_the_first_replica_makes_the_secret_and_the_others_read_it() -> None:
    cluster = FakeCluster("manager")
    async with cluster.client() as manager:
        first = await _keeper(manager).load()
        second = await _keeper(manager).load()
    assert first == second
    stored = cluster.objects[("secrets", NAMESPACE, "jr-api-tls")]
    assert ServingMaterial.from_secret(stored) == first
    x509.load_pem_x509_certificate(first.cert_pem).verify_directly_issued_by(
        x509.load_pem_x509_certificate(first.ca_pem)
    )


async def test_a_409_on_create_means_another_replica_was_first_and_its_secret_is_served() -> None:
    cluster = FakeCluster("manager")
    async with cluster.client() as manager:
        theirs = await _keeper(manager).load()
        # This replica read before the other wrote: its GET said 404, its create 409.
        cluster.fail("GET", "/secrets/jr-api-tls", 404, "NotFound")
        ours = await _keeper(manager).load()
    assert ours == theirs


async def test_the_leader_renews_a_due_certificate_and_keeps_the_ca() -> None:
    cluster = FakeCluster("manager")
    async with cluster.client() as manager:
        keeper = _keeper(manager)
        made = await keeper.load()
        issued = x509.load_pem_x509_certificate(made.cert_pem).not_valid_before_utc
        assert await keeper.renew(issued + datetime.timedelta(days=100)) == made
        renewed = await keeper.renew(issued + datetime.timedelta(days=300))
    assert renewed.ca_pem == made.ca_pem and renewed.ca_bundle == made.ca_bundle
    assert renewed.cert_pem != made.cert_pem
    assert (
        ServingMaterial.from_secret(cluster.objects[("secrets", NAMESPACE, "jr-api-tls")])
        == renewed
    )


async def _served_certificate(port: int, ca_pem: bytes) -> x509.Certificate:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="jr-api.team-a.svc"
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der)


async def _handle(*_args: Any) -> None:
    return None


async def test_a_replica_serves_the_secret_and_a_renewed_certificate_from_the_next_handshake() -> (
    None
):
    cluster = FakeCluster("manager")
    settings = ApiSettings(address="127.0.0.1:0", url=URL, cert_secret="jr-api-tls")
    async with cluster.client() as manager:
        api = await start_api(
            manager, settings, lambda _trust: SimpleNamespace(handle=_handle), namespace=NAMESPACE
        )  # fmt: skip
        try:
            made = ServingMaterial.from_secret(
                cluster.objects[("secrets", NAMESPACE, "jr-api-tls")]
            )
            assert made is not None and api.ca_pem == made.ca_pem.decode()
            served = await _served_certificate(api.bound[1], made.ca_pem)
            assert served == x509.load_pem_x509_certificate(made.cert_pem)
            # The leader renews (its informer hands each replica the Secret's new material).
            assert api.self_certificate is not None
            issued = served.not_valid_before_utc
            renewed = await api.self_certificate.renew(issued + datetime.timedelta(days=300))
            api.trust.serve(renewed.cert_pem, renewed.key_pem)
            again = await _served_certificate(api.bound[1], made.ca_pem)
            assert again == x509.load_pem_x509_certificate(renewed.cert_pem) != served
        finally:
            await api.close()


async def test_the_secret_and_given_files_do_not_go_together() -> None:
    settings = ApiSettings(address="127.0.0.1:0", cert_secret="s", cert_file="c", key_file="k")
    async with FakeCluster("manager").client() as manager:
        with pytest.raises(ValueError, match="--api-cert-secret"):
            await start_api(manager, settings, lambda _t: SimpleNamespace(handle=_handle),
                            namespace=NAMESPACE)  # fmt: skip
