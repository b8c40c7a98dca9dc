"""The front proxy's trust follows kube-system/extension-apiserver-authentication as it changes."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from tests.unit.kube.conftest import FakeApiserver

from jobrelay.kube.client import ApiClient
from jobrelay.localfleet import pki
from jobrelay.relayapi.trust import FrontProxyTrust
from jobrelay.web.tls import self_signed

NAME = "extension-apiserver-authentication"


@pytest.fixture
async def manager() -> AsyncIterator[tuple[FakeApiserver, ApiClient]]:
    fake = FakeApiserver()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(fake), base_url="https://manager")
    async with ApiClient(http, cluster="manager") as client:
        yield fake, client


def _data(ca: pki.CertPair, *allowed: str) -> dict[str, str]:
    return {
        "requestheader-client-ca-file": ca.cert.read_text(),
        "requestheader-allowed-names": json.dumps(list(allowed)),
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    }


async def _eventually(condition: object, within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def _verifies_client_certificates(context: ssl.SSLContext) -> bool:
    return context.verify_mode == ssl.CERT_OPTIONAL


async def test_the_trust_is_read_then_follows_changes(
    manager: tuple[FakeApiserver, ApiClient], tmp_path: Path
) -> None:
    fake, client = manager
    first, second = pki.ensure_ca(tmp_path / "first"), pki.ensure_ca(tmp_path / "second")
    fake.put(NAME, "kube-system", **_data(first, "front-proxy-client"))
    cert, key = self_signed(["127.0.0.1"])
    trust = FrontProxyTrust(client, cert, key)
    assert trust.current is None and not _verifies_client_certificates(trust.context())
    trust.start()
    try:
        await asyncio.wait_for(trust.wait_synced(), 5)
        assert trust.current is not None
        assert trust.current.allowed_names == ("front-proxy-client",)
        assert trust.current.client_ca == first.cert.read_text()
        assert _verifies_client_certificates(trust.context())
        # Only this ConfigMap, by name (what the reader Role grants).
        listed = fake.lists()[0]
        assert listed.url.path == "/api/v1/namespaces/kube-system/configmaps"
        assert listed.url.params["fieldSelector"] == f"metadata.name={NAME}"
        # The apiserver's CA rotates: the next connections take the new one.
        await fake.next_watch()
        fake.put(NAME, "kube-system", **_data(second))
        await _eventually(lambda: trust.current is not None and not trust.current.allowed_names)
        assert trust.current is not None and trust.current.client_ca == second.cert.read_text()
        # The apiserver loses its front-proxy settings: nothing is trusted any more.
        fake.put(NAME, "kube-system", **{"client-ca-file": first.cert.read_text()})
        await _eventually(lambda: trust.current is None)
        assert not _verifies_client_certificates(trust.context())
    finally:
        await trust.stop()
