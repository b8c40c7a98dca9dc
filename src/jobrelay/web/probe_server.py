"""``/healthz``, ``/readyz`` and ``/metrics`` of one controller process, over plain HTTP/1.1.

h11 does the HTTP (parsing, framing, the protocol's rules) on asyncio streams:
two fixed JSON answers and a metrics page need no web framework. Each
connection carries one request and is closed, as probes expect.

- ``/healthz``: 200 whenever the event loop answers at all (liveness: a loop
  that is stuck answers nothing and the probe times out).
- ``/readyz``: 200 once the caches have synced, leader or standby; 503 before.

Both bodies say the same: ``{"role": "leader"|"standby", "ready": bool,
"leader": "<holder identity>", "identity": "<this replica>"}``, and while a cache
has not synced, ``"waiting": {"<cache>": "not synced after 31s: <its informer>:
<its last error>"}``: which one holds readiness back, and why.

- ``/metrics`` (when the server has a ``metrics`` page): Prometheus' text format.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

import h11

__all__ = ["Health", "HealthServer", "MetricsPage", "parse_address"]

_log = logging.getLogger(__name__)

# A client gets this long to send its request (a stalled one must not hold a connection).
REQUEST_TIMEOUT = 10.0
_MAX_REQUEST_BYTES = 16 * 1024
_JSON = "application/json"

Role = Literal["leader", "standby"]

# The metrics page: its body (rendered afresh at every request) and its content type.
MetricsPage = tuple[Callable[[], bytes], str]


@dataclass(frozen=True, slots=True)
class Health:
    role: Role
    ready: bool
    leader: str  # the lease holder's identity as last seen ("" unknown)
    identity: str  # this replica's
    # Each cache not synced yet, and why (only in the body while there is one).
    waiting: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> bytes:
        said = asdict(self)
        if not self.waiting:
            del said["waiting"]
        return json.dumps(said).encode()


def parse_address(text: str) -> tuple[str | None, int]:
    """``HOST:PORT``, ``:PORT`` (every interface) or ``[IPv6]:PORT``; port 0 picks a free one."""
    host, colon, port_text = text.rpartition(":")
    if not colon or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. :8081 or 127.0.0.1:8081)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host or None), int(port_text)


class HealthServer:
    """Serves the probes from ``health()``, asked afresh at every request, and the
    ``metrics`` page if given."""

    def __init__(
        self, address: str, health: Callable[[], Health], metrics: MetricsPage | None = None
    ) -> None:
        self._host, self._port = parse_address(address)
        self._health = health
        self._metrics = metrics
        self._server: asyncio.Server | None = None

    async def start(self) -> list[str]:
        """Listen; the addresses actually bound (with the port chosen when it was 0)."""
        self._server = await asyncio.start_server(self._serve, host=self._host, port=self._port)
        bound = []
        for sock in self._server.sockets:
            host, port = sock.getsockname()[:2]
            bound.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        return bound

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST_BYTES)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                request = await next_request(connection, reader)
            if request is None:
                return
            status, body, content_type = self._answer(request)
            headers = [
                ("content-type", content_type),
                ("content-length", str(len(body))),
                ("cache-control", "no-store"),
                ("connection", "close"),
            ]
            writer.write(connection.send(h11.Response(status_code=status, headers=headers)) or b"")
            if request.method != b"HEAD":
                writer.write(connection.send(h11.Data(data=body)) or b"")
            writer.write(connection.send(h11.EndOfMessage()) or b"")
            await writer.drain()
        except (h11.ProtocolError, TimeoutError, ConnectionError) as error:
            _log.debug("health endpoint: dropped a connection: %s", error)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, request: h11.Request) -> tuple[int, bytes, str]:
        if request.method not in (b"GET", b"HEAD"):
            return 405, b'{"error": "only GET and HEAD"}', _JSON
        path = request.target.split(b"?", 1)[0]
        if path == b"/metrics" and self._metrics is not None:
            render, content_type = self._metrics
            return 200, render(), content_type
        if path not in (b"/healthz", b"/readyz"):
            return 404, b'{"error": "not found: try /healthz, /readyz or /metrics"}', _JSON
        health = self._health()
        ok = path == b"/healthz" or health.ready
        return (200 if ok else 503), health.body(), _JSON


async def next_request(
    connection: h11.Connection, reader: asyncio.StreamReader
) -> h11.Request | None:
    """The next request on ``connection`` (None: the client closed first); also the API
    server's (relayapi/httpserver.py)."""
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await reader.read(4096))
            continue
        if isinstance(event, h11.Request):
            return event
        return None  # the client closed before asking anything
