"""The logs API's HTTPS server: h11 on asyncio streams with TLS, one request per connection.

It parses the request (a POST's body too, up to ``max_body_bytes``: a 413 beyond,
unread), reads the CN of the client certificate TLS verified
(against the context's CA: ``trust.py`` swaps it during the handshake), hands
the request to a handler and writes its answer: a JSON body, or a stream of
chunks (chunked transfer) that ends when the handler's chunks end or the
client goes away. What to answer is the handler's business (``handler.py``);
the routes' decisions are in ``rules.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import h11

from jobrelay.relayapi.route_rules import status_body
from jobrelay.relayapi.trust_rules import common_name
from jobrelay.web.probe_server import next_request, parse_address

__all__ = ["Answer", "ApiServer", "HttpRequest", "Stream"]

_log = logging.getLogger(__name__)

# A client gets this long to complete TLS and send its request.
REQUEST_TIMEOUT = 10.0
_MAX_REQUEST_BYTES = 32 * 1024
# A POST's body is read up to this (the admission webhook's reviews); more is a 413.
MAX_BODY_BYTES = 3 * 1024 * 1024 + 64 * 1024
# A client gets this long to accept each write of an answer (--api-write-timeout).
WRITE_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    params: dict[str, str]  # the first value of each query parameter
    headers: dict[str, str]  # lower-cased names, the last value of each
    certificate_cn: str | None  # of the client certificate the TLS layer verified
    # Every header line as sent (a header may come several times: X-Remote-Group).
    header_lines: tuple[tuple[str, str], ...] = ()
    # A POST's body (at most the server's max_body_bytes; GET: empty).
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class Stream:
    """A 200 whose body is ``chunks``; ``done`` runs once it ended, however it ended."""

    chunks: AsyncIterator[bytes]
    done: Callable[[], None] = field(default=lambda: None)
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[HttpRequest], Awaitable[Answer | Stream]]


class ApiServer:
    """Serves ``handler`` on ``address`` over TLS."""

    def __init__(
        self,
        address: str,
        tls: ssl.SSLContext,
        handler: Handler,
        *,
        write_timeout: float = WRITE_TIMEOUT,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._host, self._port = parse_address(address)
        self._max_body_bytes = max_body_bytes
        # A client that takes longer to accept a write is dropped (its streams end).
        self._write_timeout = write_timeout
        self._tls = tls
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> list[tuple[str, int]]:
        """Listen; the (host, port) pairs actually bound."""
        self._server = await asyncio.start_server(
            self._serve,
            host=self._host,
            port=self._port,
            ssl=self._tls,
            ssl_handshake_timeout=REQUEST_TIMEOUT,
        )
        return [sock.getsockname()[:2] for sock in self._server.sockets]

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        # Open streams (follows) would keep wait_closed waiting: end them.
        for task in list(self._connections):
            task.cancel()
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            # close() ends open connections so; the task ends normally, since asyncio's
            # stream callback would log a cancelled connection task as an error.
            _log.debug("API: closed a connection at shutdown")
        finally:
            self._connections.discard(task)

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST_BYTES)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                event = await next_request(connection, reader)
            if event is None:
                return
            request = _request(event, writer.get_extra_info("peercert"))
            answer: Answer | Stream
            if request.method == "POST":
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    body = await _read_body(connection, reader, request, self._max_body_bytes)
                if body is None:
                    answer = Answer(413, status_body(
                        413, f"a request body of at most {self._max_body_bytes} bytes",
                        "RequestEntityTooLarge",
                    ))  # fmt: skip
                else:
                    answer = await self._answer(dataclasses.replace(request, body=body))
            else:
                answer = await self._answer(request)
            if isinstance(answer, Answer):
                async with asyncio.timeout(self._write_timeout):
                    await _write_answer(connection, writer, answer)
            else:
                await _write_stream(connection, reader, writer, answer, self._write_timeout)
        except TimeoutError:
            # Slow to send its request, or it stopped reading: what it has not taken is
            # dropped with the connection (a graceful close would wait for it to read).
            _log.debug("API: dropped a connection that timed out")
            writer.transport.abort()
        except (h11.ProtocolError, ConnectionError, ssl.SSLError) as error:
            _log.debug("API: dropped a connection: %s", error)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
                async with asyncio.timeout(1):
                    await writer.wait_closed()

    async def _answer(self, request: HttpRequest) -> Answer | Stream:
        try:
            return await self._handler(request)
        except Exception:
            _log.exception("API request %s %s failed", request.method, request.path)
            return Answer(500, status_body(500, "internal error; see the controller's log"))


async def _read_body(
    connection: h11.Connection, reader: asyncio.StreamReader, request: HttpRequest, limit: int
) -> bytes | None:
    """The request's body; None once it is over ``limit`` bytes (the rest is not read)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    parts: list[bytes] = []
    size = 0
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await reader.read(65536))
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > limit:
                return None
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return b"".join(parts)
        else:  # the client closed half way
            raise h11.RemoteProtocolError("the request body ended early")


def _request(event: h11.Request, peercert: Any) -> HttpRequest:
    target = urlsplit(event.target.decode("latin-1"))
    params: dict[str, str] = {}
    for key, value in parse_qsl(target.query, keep_blank_values=True):
        params.setdefault(key, value)
    lines = tuple(
        (name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers
    )
    return HttpRequest(
        event.method.decode("ascii"),
        target.path,
        params,
        {name.lower(): value for name, value in lines},
        common_name(peercert if isinstance(peercert, dict) else None),
        lines,
    )


def _headers(content_type: str, extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        ("content-type", content_type),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
        ("connection", "close"),
        *extra,
    ]


async def _write_answer(
    connection: h11.Connection, writer: asyncio.StreamWriter, answer: Answer
) -> None:
    headers = _headers(
        answer.content_type, [("content-length", str(len(answer.body))), *answer.headers]
    )
    writer.write(connection.send(h11.Response(status_code=answer.code, headers=headers)) or b"")
    writer.write(connection.send(h11.Data(data=answer.body)) or b"")
    writer.write(connection.send(h11.EndOfMessage()) or b"")
    await writer.drain()


async def _write_stream(
    connection: h11.Connection,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    stream: Stream,
    write_timeout: float,
) -> None:
    try:
        headers = _headers(stream.content_type, [("transfer-encoding", "chunked"), *stream.headers])
        writer.write(connection.send(h11.Response(status_code=200, headers=headers)) or b"")
        async with asyncio.timeout(write_timeout):
            await writer.drain()
        copying = asyncio.create_task(_copy(connection, writer, stream.chunks, write_timeout))
        # The client sends nothing more: its end of the connection means it went away
        # (a follow must not hold a worker's stream until its idle time-out).
        hangup = asyncio.create_task(reader.read(1))
        try:
            await asyncio.wait({copying, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hangup.cancel()
            if not copying.done():
                copying.cancel()
            try:
                await copying
            except asyncio.CancelledError:
                pass
            except (ConnectionError, ssl.SSLError, TimeoutError):
                raise  # the client went away or stopped reading: dropped
            except Exception:
                # The handler's chunks failed mid-stream: the body just ends there.
                _log.exception("API: a stream failed")
    finally:
        with contextlib.suppress(Exception):
            await stream.chunks.aclose()  # type: ignore[attr-defined]
        stream.done()


async def _copy(
    connection: h11.Connection,
    writer: asyncio.StreamWriter,
    chunks: AsyncIterator[bytes],
    write_timeout: float,
) -> None:
    """Every chunk to the client; TimeoutError when it does not take one within
    ``write_timeout`` (a client that stops reading must not hold its streams)."""
    async for chunk in chunks:
        if chunk:
            writer.write(connection.send(h11.Data(data=chunk)) or b"")
            async with asyncio.timeout(write_timeout):
                await writer.drain()
    writer.write(connection.send(h11.EndOfMessage()) or b"")
    async with asyncio.timeout(write_timeout):
        await writer.drain()
