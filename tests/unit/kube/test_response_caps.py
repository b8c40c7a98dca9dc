"""An apiserver that sends without end (a hostile or broken worker) costs a bounded read.

A tiny aiohttp server on 127.0.0.1 (port chosen by the kernel) serves an endless LIST
body, a body announcing more than the cap, and a watch whose one line never ends; the
client fails each with ResponseTooLarge after reading about the cap, over the direct
path and over httpx2's, and an informer relists with a growing backoff.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx2
import msgspec
import pytest
from aiohttp import web

from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError, ResponseTooLarge
from jobrelay.kube.streams import split_lines
from jobrelay.kube.transport import AiohttpTransport
from jobrelay.kube.watching import Informer, InformerOptions
from jobrelay.vocabulary.resource import Resource

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
CAP = 1024 * 1024
OPTIONS = ApiOptions(max_body_bytes=CAP, max_watch_line_bytes=CAP, request_timeout=10.0)
CHUNK = b"x" * 65536


@dataclass
class Endless:
    """What the server sent, per path."""

    sent: dict[str, int] = field(default_factory=dict)
    lists: int = 0
    relists: int = 0  # the lists' first pages (each relist then halves its pages to 1)
    watches: int = 0

    async def forever(self, request: web.Request, head: bytes) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(head)
        sent = len(head)
        try:
            while sent < 512 * CAP:  # a bound for the test itself, never reached
                await response.write(CHUNK)
                sent += len(CHUNK)
                self.sent[request.path] = sent
        except (ConnectionResetError, ConnectionError, RuntimeError):
            pass  # the client closed: what it read was enough
        return response

    async def configmaps(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            self.watches += 1
            # One small event, then a line that never ends.
            event = {"type": "ADDED", "object": {"metadata": {"name": "a", "namespace": "ns",
                                                              "resourceVersion": "2"}}}  # fmt: skip
            return await self.forever(request, msgspec.json.encode(event) + b'\n{"type":"')
        self.lists += 1
        self.relists += request.query.get("limit") == "500"
        if self.lists == 1:  # the informer's first list works
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        return await self.forever(request, b'{"items":[')

    async def announced(self, request: web.Request) -> web.Response:
        # Announces a body far past the cap (and would send it).
        return web.Response(body=b"{" + b" " * (2 * CAP) + b"}", content_type="application/json")


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Endless]]:
    endless = Endless()
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps", endless.configmaps)
    app.router.add_get("/api/v1/namespaces/ns/configmaps/announced", endless.announced)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", endless
    finally:
        await runner.cleanup()


def direct_client(url: str) -> ApiClient:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    client = ApiClient.from_kubeconfig_dict(config, options=OPTIONS)
    assert client._direct is not None
    return client


def httpx2_client(url: str) -> ApiClient:
    """No direct path: every request through httpx2 (as with an exec credential plugin)."""
    transport = AiohttpTransport(None, max_connections=10, keepalive_expiry=5.0)
    return ApiClient(httpx2.AsyncClient(base_url=url, transport=transport), options=OPTIONS)


CLIENTS = [pytest.param(direct_client, id="direct"), pytest.param(httpx2_client, id="httpx2")]


@pytest.mark.parametrize("make", CLIENTS)
async def test_an_endless_list_fails_after_the_cap_with_memory_bounded(
    server: tuple[str, Endless], make: object
) -> None:
    url, endless = server
    endless.lists = 1  # past the informer's one good list
    async with make(url) as client:  # type: ignore[operator]
        tracemalloc.start()
        try:
            with pytest.raises(ApiError) as caught:
                await client.list(CONFIGMAPS, namespace="ns")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert isinstance(caught.value, ResponseTooLarge)
    assert caught.value.reason == "ResponseTooLarge"
    assert "longer than 1 MiB" in caught.value.message
    assert peak < 8 * CAP, f"held {peak} bytes reading a body capped at {CAP}"


@pytest.mark.parametrize("make", CLIENTS)
async def test_a_body_announced_past_the_cap_is_not_read(
    server: tuple[str, Endless], make: object
) -> None:
    url, _ = server
    async with make(url) as client:  # type: ignore[operator]
        with pytest.raises(ResponseTooLarge):
            await client.get(CONFIGMAPS, "announced", namespace="ns")


async def test_an_endless_watch_line_ends_the_watch_after_the_cap(
    server: tuple[str, Endless],
) -> None:
    url, endless = server
    async with direct_client(url) as client:
        seen = []
        with pytest.raises(ResponseTooLarge) as caught:
            async with client.watch(CONFIGMAPS, namespace="ns", timeout_seconds=30) as events:
                async for event in events:
                    seen.append(event.type)
    assert seen == ["ADDED"], "the events before the endless line arrive"
    assert "a line of the watch" in caught.value.message
    await asyncio.sleep(0.05)
    assert endless.sent["/api/v1/namespaces/ns/configmaps"] < 64 * CAP


async def test_an_informer_relists_with_a_growing_backoff_not_a_hot_loop(
    server: tuple[str, Endless],
) -> None:
    url, endless = server
    # Each watch delivers an event before its endless line: without the held backoff,
    # that event would reset it and the informer would re-read every ~0.1 s.
    options = InformerOptions(backoff_initial=0.1, backoff_max=10.0, inactivity_timeout=30.0)
    async with direct_client(url) as client:
        informer = Informer(client, CONFIGMAPS, namespace="ns", options=options)
        async with informer:
            await asyncio.wait_for(informer.wait_synced(), 5)
            await asyncio.sleep(2.0)
            assert isinstance(informer.last_error, ResponseTooLarge)
    # Backoff 0.1, 0.2, 0.4, 0.8 (jitter halves at most): at most 6 attempts in 2 s,
    # each a relist (the endless LIST fails too, in pages of 500 down to 1: 9 requests);
    # a reset backoff would make ~20.
    assert endless.watches == 1, "after the oversized line it relists, not watches again"
    assert 2 <= endless.relists <= 7
    assert endless.lists <= 1 + 9 * endless.relists


@pytest.mark.parametrize("cut", [1, 7, 1000])
async def test_split_lines_refuses_a_long_line_however_it_is_cut(cut: int) -> None:
    data = b'{"a":1}\n' + b"y" * 100 + b"\n" + b"z" * 5000

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(data), cut):
            yield data[start : start + cut]

    lines = []
    with pytest.raises(ResponseTooLarge):
        async for line in split_lines(chunks(), max_line=200):
            lines.append(bytes(line))
    assert lines == [b'{"a":1}', b"y" * 100]
    # Under the cap, the same stream reads whole.
    whole = [bytes(line) async for line in split_lines(chunks(), max_line=5000)]
    assert whole == [b'{"a":1}', b"y" * 100, b"z" * 5000]
