"""/healthz and /readyz over a real socket on 127.0.0.1 (the port the kernel picks)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from jobrelay.web.probe_server import Health, HealthServer, parse_address


class State:
    def __init__(self) -> None:
        self.health = Health("standby", False, "leader-pod_7_ab12", "standby-pod_9_cd34")

    def __call__(self) -> Health:
        return self.health


@pytest.fixture
def state() -> State:
    return State()


@pytest.fixture
async def base_url(state: State) -> AsyncIterator[str]:
    server = HealthServer("127.0.0.1:0", state)
    (address,) = await server.start()
    host, _, port = address.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    try:
        yield f"http://{address}"
    finally:
        await server.close()


async def get(url: str, method: str = "GET") -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=10, trust_env=False) as client:
        return await client.request(method, url)


async def test_readyz_is_503_until_synced_then_200_and_both_say_the_role(
    base_url: str, state: State
) -> None:
    ready = await get(f"{base_url}/readyz")
    assert ready.status_code == 503
    assert ready.headers["content-type"] == "application/json"
    assert json.loads(ready.content) == {
        "role": "standby",
        "ready": False,
        "leader": "leader-pod_7_ab12",
        "identity": "standby-pod_9_cd34",
    }
    # Alive all the same: liveness does not wait for the caches.
    assert (await get(f"{base_url}/healthz")).status_code == 200

    state.health = Health("standby", True, "leader-pod_7_ab12", "standby-pod_9_cd34")
    assert (await get(f"{base_url}/readyz")).status_code == 200
    state.health = Health("leader", True, "standby-pod_9_cd34", "standby-pod_9_cd34")
    answer = await get(f"{base_url}/readyz?verbose=1")
    assert answer.status_code == 200
    assert json.loads(answer.content)["role"] == "leader"


async def test_head_unknown_paths_and_other_methods(base_url: str) -> None:
    head = await get(f"{base_url}/healthz", "HEAD")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) > 0
    assert (await get(f"{base_url}/metrics")).status_code == 404
    assert (await get(f"{base_url}/healthz", "POST")).status_code == 405


async def test_garbage_and_silent_clients_are_dropped(base_url: str) -> None:
    host, _, port = base_url.removeprefix("http://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(10):
        assert await reader.read() == b""  # closed without an answer
    writer.close()
    # The server still answers others.
    assert (await get(f"{base_url}/healthz")).status_code == 200


async def test_a_taken_port_fails_to_start(base_url: str, state: State) -> None:
    address = base_url.removeprefix("http://")
    with pytest.raises(OSError):
        await HealthServer(address, state).start()


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (":8081", (None, 8081)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:9000", ("localhost", 9000)),
        ("[::1]:8081", ("::1", 8081)),
    ],
)
def test_addresses(text: str, parsed: tuple[str | None, int]) -> None:
    assert parse_address(text) == parsed


@pytest.mark.parametrize("text", ["8081", "host:", ":http", ":70000", ""])
def test_bad_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_address(text)


async def test_metrics_are_served_beside_the_probes_when_given(state: State) -> None:
    pages = iter([b"jobrelay_leader 1.0\n", b"jobrelay_leader 0.0\n"])
    server = HealthServer("127.0.0.1:0", state, (lambda: next(pages), "text/plain; version=0.0.4"))
    (address,) = await server.start()
    try:
        first = await get(f"http://{address}/metrics")
        assert first.status_code == 200
        assert first.headers["content-type"] == "text/plain; version=0.0.4"
        assert first.content == b"jobrelay_leader 1.0\n"
        # Rendered afresh at every scrape.
        assert (await get(f"http://{address}/metrics")).content == b"jobrelay_leader 0.0\n"
        assert (await get(f"http://{address}/healthz")).status_code == 200
    finally:
        await server.close()


async def test_no_metrics_page_without_one(base_url: str) -> None:
    assert (await get(f"{base_url}/metrics")).status_code == 404
