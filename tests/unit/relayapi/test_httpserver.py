"""The HTTPS API server over a real TLS socket on 127.0.0.1 (the port the kernel picks)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from jobrelay.localfleet import pki
from jobrelay.relayapi.httpserver import Answer, ApiServer, HttpRequest, Stream
from jobrelay.relayapi.trust_rules import FrontProxy, identify
from jobrelay.web.tls import self_signed, server_context


class Handler:
    def __init__(self) -> None:
        self.requests: list[HttpRequest] = []
        self.stream_ended = asyncio.Event()
        self.feed: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def __call__(self, request: HttpRequest) -> Answer | Stream:
        self.requests.append(request)
        if request.path == "/stream":
            return Stream(self._chunks(), done=self.stream_ended.set)
        if request.path == "/boom":
            raise RuntimeError("handler bug")
        return Answer(200, b'{"ok": true}')

    async def _chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self.feed.get()) is not None:
            yield chunk


@pytest.fixture
def ca(tmp_path: Path) -> pki.CertPair:
    return pki.ensure_ca(tmp_path / "ca")


@pytest.fixture
async def served(
    ca: pki.CertPair, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[tuple[str, str, Handler]]:
    cert, key = self_signed(["127.0.0.1"])
    handler = Handler()
    server = ApiServer("127.0.0.1:0", server_context(cert, key, ca.cert.read_text()), handler)
    ((host, port),) = await server.start()
    try:
        yield f"https://{host}:{port}", cert.decode(), handler
    finally:
        await server.close()
    # Closing with connections open logs nothing alarming (a controller's log must stay clean).
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR]


def client(url: str, ca_pem: str, cert: pki.CertPair | None = None) -> httpx2.AsyncClient:
    context = ssl.create_default_context(cadata=ca_pem)
    if cert is not None:
        context.load_cert_chain(cert.cert, cert.key)
    return httpx2.AsyncClient(base_url=url, verify=context, timeout=10)


async def test_answers_and_reads_the_request(served: tuple[str, str, Handler]) -> None:
    url, ca_pem, handler = served
    async with client(url, ca_pem) as http:
        response = await http.get(
            "/v1/x", params={"follow": "true", "a": ["1", "2"]},
            headers=[("X-Remote-Group", "a"), ("X-Remote-Group", "b")],
        )  # fmt: skip
    assert response.status_code == 200 and response.json() == {"ok": True}
    (request,) = handler.requests
    assert request.path == "/v1/x"
    assert request.params == {"follow": "true", "a": "1"}
    # A header sent twice is kept twice (the front proxy sends a group per line).
    assert [v for n, v in request.header_lines if n.lower() == "x-remote-group"] == ["a", "b"]
    assert request.certificate_cn is None


async def test_a_verified_client_certificate_gives_its_cn(
    served: tuple[str, str, Handler], ca: pki.CertPair, tmp_path: Path
) -> None:
    url, ca_pem, handler = served
    proxy = pki.issue(ca, tmp_path, "proxy", common_name="front-proxy-client")
    async with client(url, ca_pem, proxy) as http:
        assert (await http.get("/")).status_code == 200
    assert handler.requests[0].certificate_cn == "front-proxy-client"


def _two_cns(ca: pki.CertPair, directory: Path) -> pki.CertPair:
    """A client certificate of ``ca`` whose subject names two CNs, the allowed one first."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "front-proxy-client"),
        x509.NameAttribute(NameOID.COMMON_NAME, "mallory"),
    ])  # fmt: skip
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pair = pki.CertPair(directory / "two-cns.crt", directory / "two-cns.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pair.key.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))  # fmt: skip
    return pair


async def test_a_certificate_naming_two_cns_gives_none_of_them(
    served: tuple[str, str, Handler], ca: pki.CertPair, tmp_path: Path
) -> None:
    url, ca_pem, handler = served
    async with client(url, ca_pem, _two_cns(ca, tmp_path)) as http:
        assert (await http.get("/")).status_code == 200
    # Verified by the CA, yet it names no one CN: trust_rules.identify refuses it (401).
    assert handler.requests[0].certificate_cn == ""
    found = identify(FrontProxy(client_ca=ca.cert.read_text()), "", [("X-Remote-User", "a")])
    assert isinstance(found, str) and "exactly one CN" in found


async def test_a_certificate_of_another_ca_is_refused(
    served: tuple[str, str, Handler], tmp_path: Path
) -> None:
    url, ca_pem, handler = served
    other = pki.ensure_ca(tmp_path / "other")
    mallory = pki.issue(other, tmp_path, "mallory", common_name="system:admin")
    async with client(url, ca_pem, mallory) as http:
        with pytest.raises(httpx2.HTTPError):
            await http.get("/")
    assert handler.requests == []


async def test_streams_until_the_chunks_end(served: tuple[str, str, Handler]) -> None:
    url, ca_pem, handler = served
    for chunk in (b"one\n", b"two\n", None):
        handler.feed.put_nowait(chunk)
    async with client(url, ca_pem) as http:
        response = await http.get("/stream")
    assert response.text == "one\ntwo\n"
    await asyncio.wait_for(handler.stream_ended.wait(), 5)


async def test_a_client_that_goes_away_ends_the_stream(served: tuple[str, str, Handler]) -> None:
    url, ca_pem, handler = served
    handler.feed.put_nowait(b"first\n")
    async with (
        client(url, ca_pem) as http,
        http.stream("GET", "/stream") as response,
    ):
        async for chunk in response.aiter_bytes():
            assert chunk == b"first\n"
            break
    # Nothing more was fed: only the hang-up can have ended it.
    await asyncio.wait_for(handler.stream_ended.wait(), 5)


@pytest.mark.logs_exceptions
async def test_a_failing_handler_answers_500(served: tuple[str, str, Handler]) -> None:
    url, ca_pem, _ = served
    async with client(url, ca_pem) as http:
        response = await http.get("/boom")
    assert response.status_code == 500
    assert response.json()["kind"] == "Status"
    assert "handler bug" not in response.text


async def test_a_client_that_stops_reading_is_dropped_and_its_stream_ends(
    ca: pki.CertPair,
) -> None:
    """It keeps its connection open but reads nothing: past the write deadline it is dropped,
    and its stream (and the worker streams behind it) ends."""
    cert, key = self_signed(["127.0.0.1"])
    handler = Handler()

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"z" * 65536
            await asyncio.sleep(0)

    async def serve(request: HttpRequest) -> Answer | Stream:
        return Stream(endless(), done=handler.stream_ended.set)

    server = ApiServer(
        "127.0.0.1:0", server_context(cert, key, ca.cert.read_text()), serve, write_timeout=0.5
    )
    ((host, port),) = await server.start()
    context = ssl.create_default_context(cadata=cert.decode())
    _reader, writer = await asyncio.open_connection(host, port, ssl=context)
    try:
        writer.write(f"GET /stream HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        # It never reads: the server's buffers and the sockets' fill, then the deadline.
        await asyncio.wait_for(handler.stream_ended.wait(), 30)
    finally:
        writer.transport.abort()
        await server.close()


async def test_a_post_body_is_read(served: tuple[str, str, Handler]) -> None:
    url, ca_pem, handler = served
    async with client(url, ca_pem) as http:
        response = await http.post("/mutate/managedby", content=b'{"a": 1}' * 1000)
    assert response.status_code == 200
    (request,) = handler.requests
    assert request.method == "POST" and request.body == b'{"a": 1}' * 1000


async def test_a_body_over_the_cap_is_a_413_never_read_whole(ca: pki.CertPair) -> None:
    cert, key = self_signed(["127.0.0.1"])
    handler = Handler()
    server = ApiServer(
        "127.0.0.1:0", server_context(cert, key, ca.cert.read_text()), handler, max_body_bytes=100
    )
    ((host, port),) = await server.start()
    try:
        async with client(f"https://{host}:{port}", cert.decode()) as http:
            declared = await http.post("/mutate/managedby", content=b"x" * 101)

            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(10):
                    yield b"y" * 50

            # Chunked, no length: cut off past the cap (the 413, or the connection dropped
            # under the client's feet while it still sends: either way never handled).
            try:
                streamed: httpx2.Response | None = await http.post(
                    "/mutate/managedby", content=chunks()
                )
            except httpx2.TransportError:
                streamed = None
            fits = await http.post("/mutate/managedby", content=b"z" * 100)
    finally:
        await server.close()
    for response in (declared, streamed) if streamed is not None else (declared,):
        assert response.status_code == 413
        assert response.json()["reason"] == "RequestEntityTooLarge"
        assert "at most 100 bytes" in response.json()["message"]
    assert fits.status_code == 200
    assert [r.body for r in handler.requests] == [b"z" * 100]
