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


async def test_the_trust_is_read_then_follows_changes(
    manager: tuple[FakeApiserver, ApiClient], tmp_path: Path
) -> None:
    fake, client = manager
    first, second = pki.ensure_ca(tmp_path / "first"), pki.ensure_ca(tmp_path / "second")
    fake.put(NAME, "kube-system", **_data(first, "front-proxy-client"))
    cert, key = self_signed(["127.0.0.1"])
    trust = FrontProxyTrust(client, cert, key)
    assert trust.current is None
    trust.start()
    try:
        await asyncio.wait_for(trust.wait_synced(), 5)
        assert trust.current is not None
        assert trust.current.allowed_names == ("front-proxy-client",)
        assert trust.current.client_ca == first.cert.read_text()
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
    finally:
        await trust.stop()


async def test_a_rotated_ca_is_trusted_from_the_next_connection_and_the_old_no_more(
    manager: tuple[FakeApiserver, ApiClient], tmp_path: Path
) -> None:
    """The server's one TLS context switches each handshake to the current front proxy's,
    with or without SNI (the aggregator sends the Service's name; a direct caller may not)."""
    from jobrelay.relayapi.httpserver import Answer, ApiServer, HttpRequest

    fake, client = manager
    first, second = pki.ensure_ca(tmp_path / "first"), pki.ensure_ca(tmp_path / "second")
    by_first = pki.issue(first, tmp_path, "by-first", common_name="front-proxy-client")
    by_second = pki.issue(second, tmp_path, "by-second", common_name="front-proxy-client")
    cert, key = self_signed(["127.0.0.1", "jobrelay-api.team.svc"])
    trust = FrontProxyTrust(client, cert, key)
    seen: list[str | None] = []

    async def handle(request: HttpRequest) -> Answer:
        seen.append(request.certificate_cn)
        return Answer(200, b"{}")

    server = ApiServer("127.0.0.1:0", trust.context(), handle)
    ((host, port),) = await server.start()

    async def call(identity: pki.CertPair | None, sni: str | None = None) -> int:
        context = ssl.create_default_context(cadata=cert.decode())
        if identity is not None:
            context.load_cert_chain(identity.cert, identity.key)
        extensions = {"sni_hostname": sni} if sni else {}
        async with httpx2.AsyncClient(verify=context, timeout=5) as http:
            try:
                response = await http.get(f"https://{host}:{port}/", extensions=extensions)
            except httpx2.HTTPError:
                return 0  # refused at the handshake
        return response.status_code

    try:
        # Nothing trusted yet: a certificate is refused, none reaches the handler unverified.
        assert await call(by_first) == 0
        assert await call(None) == 200 and seen == [None]
        fake.put(NAME, "kube-system", **_data(first))
        trust.start()
        await asyncio.wait_for(trust.wait_synced(), 5)
        assert await call(by_first) == 200
        assert await call(by_first, "jobrelay-api.team.svc") == 200
        assert await call(by_second) == 0
        await fake.next_watch()
        fake.put(NAME, "kube-system", **_data(second))
        second_ca = second.cert.read_text()
        await _eventually(
            lambda: trust.current is not None and trust.current.client_ca == second_ca
        )
        assert await call(by_second) == 200
        assert await call(by_second, "jobrelay-api.team.svc") == 200
        assert await call(by_first) == 0
        assert seen == [None, *["front-proxy-client"] * 4]
    finally:
        await server.close()
        await trust.stop()
