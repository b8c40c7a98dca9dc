"""Inline kubeconfig certificates (``*-data``) work without any temporary directory.

A pod with a read-only root and no /tmp has none; lightkube wrote every ``*-data``
field to a named temporary file, so every worker's kubeconfig failed to load there.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NODES
from jobrelay.localfleet.pki import CertPair, ensure_ca, issue

_NOT_FOUND = (
    b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}'
)


@pytest.fixture
def no_temporary_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every tempfile call fails as in the pod: FileNotFoundError, no usable directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _kubeconfig(server: str, ca: CertPair, client: CertPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "w",
        "clusters": [
            {
                "name": "w",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca.cert)},
            }
        ],
        "users": [
            {
                "name": "w",
                "user": {
                    "client-certificate-data": _b64(client.cert),
                    "client-key-data": _b64(client.key),
                },
            }
        ],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
    }


@pytest.fixture
async def mtls_server(tmp_path: Path) -> AsyncIterator[tuple[str, CertPair, CertPair, list[str]]]:
    """An HTTPS server that requires a client certificate of the CA and answers 404."""
    ca = ensure_ca(tmp_path / "pki")
    serving = issue(ca, tmp_path / "pki", "server", common_name="s", server_hosts=("127.0.0.1",))
    client = issue(ca, tmp_path / "pki", "client", common_name="worker-user")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca.cert)
    tls.verify_mode = ssl.CERT_REQUIRED
    tls.load_cert_chain(serving.cert, serving.key)
    peers: list[str] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert") or {}
        peers.extend(value for rdn in peer.get("subject", ()) for key, value in rdn)
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_NOT_FOUND), _NOT_FOUND)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"https://127.0.0.1:{port}", ca, client, peers
    finally:
        server.close()
        await server.wait_closed()


async def test_inline_ca_and_client_certificate_need_no_temporary_file(
    mtls_server: tuple[str, CertPair, CertPair, list[str]], no_temporary_directory: None
) -> None:
    url, ca, client_pair, peers = mtls_server
    async with ApiClient.from_kubeconfig_dict(_kubeconfig(url, ca, client_pair)) as client:
        # The server is verified against the inline CA, and our certificate was shown.
        with pytest.raises(ApiError) as answered:
            await client.get(NODES, "n")
        assert answered.value.is_not_found, answered.value
    assert "worker-user" in peers


async def test_a_server_of_another_ca_is_refused(
    mtls_server: tuple[str, CertPair, CertPair, list[str]], tmp_path: Path
) -> None:
    url, _ca, client_pair, _peers = mtls_server
    other = ensure_ca(tmp_path / "other")
    async with ApiClient.from_kubeconfig_dict(_kubeconfig(url, other, client_pair)) as client:
        with pytest.raises(ApiError) as refused:
            await client.get(NODES, "n")
        assert not refused.value.is_not_found
