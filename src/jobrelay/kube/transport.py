"""An httpx2 transport that sends over aiohttp: the controller's HTTP core.

httpx2's own transport (httpcore2 on anyio) spent most of a busy controller's
CPU under py-spy: Python-level HTTP/1.1 framing, TLS through anyio's memory
BIOs, and headers and body written to the socket separately. aiohttp parses
HTTP in C and writes a small request in one call. httpx2 stays the client
interface: lightkube's authentication flows (tokens, exec plugins), timeouts
per request and the tests' mock transports keep working unchanged; only the
bytes on the wire go through aiohttp.

Errors are translated to httpx2's exception types, each chained to aiohttp's
(whose OSError carries the errno that ``errors.unreachable_error`` reports).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import httpx2
import yarl

from jobrelay.kube.errors import ResponseTooLarge

__all__ = [
    "AiohttpTransport",
    "DirectResponse",
    "DirectSender",
    "StreamedResponse",
    "direct_auth_headers",
    "env_proxy",
    "read_capped",
]


async def read_capped(
    chunks: AsyncIterator[bytes], limit: int, *, code: int, what: str = "the response"
) -> bytes:
    """The whole body of ``chunks``, or ResponseTooLarge as soon as it passes ``limit``
    bytes (nothing more is read: the caller closes the response)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(code, what, limit)
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _translated(
    exc: BaseException, request: httpx2.Request | None, phase: str
) -> httpx2.TransportError:
    """httpx2's name for what went wrong, ``phase`` being ``send`` or ``read``."""
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(message, request=request)
    if isinstance(exc, (aiohttp.ServerTimeoutError, asyncio.TimeoutError, TimeoutError)):
        # aiohttp's pool wait and read time-outs.
        return httpx2.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(message, request=request)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx2.RemoteProtocolError(message, request=request)
    if phase == "send":
        return httpx2.WriteError(message, request=request)
    return httpx2.ReadError(message, request=request)


def _timeout_of(request: httpx2.Request) -> aiohttp.ClientTimeout:
    """httpx2's time-outs of ``request`` as aiohttp's (no bound on the whole exchange)."""
    timeouts: Mapping[str, float | None] = request.extensions.get("timeout") or {}
    return aiohttp.ClientTimeout(
        total=None,
        connect=timeouts.get("pool"),  # waiting for a pooled connection, or making one
        sock_connect=timeouts.get("connect"),
        sock_read=timeouts.get("read"),
    )


class _ResponseStream(httpx2.AsyncByteStream):
    """The body of an aiohttp response as httpx2 reads it, chunk by chunk as it arrives."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _translated(exc, self._request, "read") from exc

    async def aclose(self) -> None:
        # Back to the pool when read to the end; a stream abandoned early (a watch
        # that is stopped) closes its connection.
        self._response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """One apiserver's connection pool (HTTP/1.1 with keep-alive, TLS by ``ssl_context``).

    The session is made on first use, inside the running event loop.
    """

    def __init__(
        self,
        ssl_context: ssl.SSLContext | None,
        *,
        max_connections: int,
        keepalive_expiry: float,
        proxy: str | None = None,
    ) -> None:
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self.proxy = proxy
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                ssl=self._ssl,
                limit=self._max_connections,
                limit_per_host=0,
                keepalive_timeout=self._keepalive_expiry,
                use_dns_cache=True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # httpx2 sets every header itself and decodes the body by its
                # Content-Encoding: aiohttp adds and undoes nothing.
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
                timeout=aiohttp.ClientTimeout(total=None),
                # The proxy is looked up once (env_proxy): aiohttp's trust_env reads the
                # environment and ~/.netrc on every request, 0.4 ms of CPU each.
                trust_env=False,
            )
        return self._session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        # httpx2 mounts its own transport for a proxy it finds: none reaches here.
        timeout = _timeout_of(request)
        body = await request.aread()
        headers: list[tuple[str, str]] = [
            (k, v) for k, v in request.headers.multi_items() if k.lower() != "host"
        ]
        session = self.session()
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                timeout=timeout,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _translated(exc, request, "send") from exc
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("ascii", "replace")
        return httpx2.Response(
            response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            stream=_ResponseStream(response, request),
            extensions=extensions,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def env_proxy(server: str) -> str | None:
    """The proxy HTTP(S)_PROXY names for ``server`` (None: none, or NO_PROXY exempts it),
    as kubectl and httpx2 read them."""
    url = urlsplit(server)
    if not url.hostname or proxy_bypass(url.hostname):
        return None
    return getproxies().get(url.scheme)


def direct_auth_headers(auth: httpx2.Auth | None, base_url: str) -> dict[str, str] | None:
    """The headers ``auth`` puts on every request, or None when it must run per request.

    A static token, basic credentials or a token file (read once here; a 401 sends
    the request through httpx2, whose flow re-reads it, and the headers are taken
    again) set one fixed header. An exec plugin may block, refresh or need the
    answer, so its requests keep going through httpx2.
    """
    if auth is None:
        return {}
    if (
        type(auth).__name__ == "ExecAuth"
        or auth.requires_request_body
        or auth.requires_response_body
    ):
        return None
    flow = auth.sync_auth_flow(httpx2.Request("GET", base_url))
    try:
        authed = next(flow)
    finally:
        flow.close()
    value = authed.headers.get("Authorization")
    return {"Authorization": value} if value else {}


class DirectSender:
    """Plain requests straight over the transport's aiohttp session, without building
    httpx2 requests and responses: what the controller's reads and writes take.

    ``headers`` are sent on every request (User-Agent, Accept, authentication).
    Errors are httpx2's, as from the client.
    """

    def __init__(
        self,
        transport: AiohttpTransport,
        base_url: str,
        headers: Mapping[str, str],
        *,
        connect_timeout: float,
    ) -> None:
        self._transport = transport
        self._base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self._connect_timeout = connect_timeout

    @property
    def carries_credential(self) -> bool:
        """Whether requests carry an Authorization header: a 401 may then mean only that
        the credential changed, and httpx2's flow for it (which reads a token file again)
        is worth one more try."""
        return "Authorization" in self.headers

    def refresh(self, auth: httpx2.Auth | None) -> None:
        """Take the credential's header again (after httpx2's flow renewed it)."""
        fresh = direct_auth_headers(auth, self._base_url)
        if fresh:
            self.headers.update(fresh)

    async def open(self, request: httpx2.Request) -> DirectResponse:
        """Send ``request`` (its method, URL and time-outs; this sender's headers) and
        return once the headers arrived: the body is read as it streams."""
        session = self._transport.session()
        try:
            response = await session.request(
                request.method,
                yarl.URL(str(request.url), encoded=True),
                headers=self.headers,
                timeout=_timeout_of(request),
                allow_redirects=False,
                proxy=self._transport.proxy,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _translated(exc, request, "send") from exc
        return DirectResponse(response)

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: Mapping[str, str] | None,
        timeout: float,
        limit: int,
    ) -> tuple[int, bytes]:
        """The status and the whole body of one request; ResponseTooLarge past ``limit``
        bytes (announced or sent), the connection then closed."""
        url = self._base_url + path
        if params:
            url += "?" + urlencode(params)
        sent = self.headers if not headers else {**self.headers, **headers}
        session = self._transport.session()
        try:
            async with session.request(
                method,
                yarl.URL(url, encoded=True),
                headers=sent,
                data=content,
                timeout=aiohttp.ClientTimeout(
                    total=timeout, connect=timeout, sock_connect=self._connect_timeout
                ),
                allow_redirects=False,
                proxy=self._transport.proxy,
            ) as response:
                length = response.content_length
                try:
                    if length is not None and length > limit:
                        raise ResponseTooLarge(response.status, "the response", limit)
                    if length is not None:
                        return response.status, await response.read()
                    body = await read_capped(
                        response.content.iter_any(), limit, code=response.status
                    )
                except ResponseTooLarge:
                    response.close()  # never back to the pool with a body half read
                    raise
                return response.status, body
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _translated(exc, None, "send") from exc


class StreamedResponse(Protocol):
    """An open response whose body is read as it arrives (httpx2's, or the direct path's)."""

    @property
    def status_code(self) -> int: ...

    def aiter_bytes(self) -> AsyncGenerator[bytes]: ...

    async def aread(self) -> bytes: ...

    async def aclose(self) -> None: ...


class DirectResponse:
    """A streamed response of the direct path: what the apiserver sends, chunk by chunk."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status_code(self) -> int:
        return self._response.status

    async def aiter_bytes(self) -> AsyncGenerator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _translated(exc, None, "read") from exc

    async def aread(self) -> bytes:
        try:
            return await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _translated(exc, None, "read") from exc

    async def aclose(self) -> None:
        self._response.release()
