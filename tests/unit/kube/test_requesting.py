"""The two paths of a request: a 401 on the direct path is tried through the credential's
flow, and the direct path then takes the fresh header, for requests and watches alike."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Mapping
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS
from jobrelay.kube.transport import AiohttpTransport, DirectSender

OLD, NEW = "Bearer old-token", "Bearer rotated-token"
CONFIGMAP = {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1"}}


class RotatedTokenFile(httpx2.Auth):
    """A token file's flow after the token was rotated: it reads the new one."""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = NEW
        yield request


class _Response:
    """A streamed response of the fake direct path."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self._body = body
        self.closed = False

    async def aiter_bytes(self) -> AsyncGenerator[bytes]:
        yield self._body

    async def aread(self) -> bytes:
        return self._body

    async def aclose(self) -> None:
        self.closed = True


class FakeDirect(DirectSender):
    """The direct path, answering as an apiserver that accepts only the rotated token."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__(
            AiohttpTransport(None, max_connections=1, keepalive_expiry=1),
            "https://api",
            headers,
            connect_timeout=1,
        )
        self.answers: list[int] = []

    def _status(self) -> int:
        status = 200 if self.headers.get("Authorization") == NEW else 401
        self.answers.append(status)
        return status

    async def send(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        status = self._status()
        return status, msgspec.json.encode(CONFIGMAP if status == 200 else {"kind": "Status"})

    async def open(self, request: httpx2.Request) -> Any:
        status = self._status()
        return _Response(status, _event() if status == 200 else b"{}")


def _event() -> bytes:
    return msgspec.json.encode({"type": "ADDED", "object": CONFIGMAP}) + b"\n"


def _client(direct: FakeDirect) -> tuple[ApiClient, list[str]]:
    flowed: list[str] = []

    def apiserver(request: httpx2.Request) -> httpx2.Response:
        flowed.append(request.headers["Authorization"])
        watch = request.url.params.get("watch") == "true"
        return httpx2.Response(200, content=_event() if watch else msgspec.json.encode(CONFIGMAP))

    http = httpx2.AsyncClient(
        transport=httpx2.MockTransport(apiserver), base_url="https://api", auth=RotatedTokenFile()
    )
    return ApiClient(http, cluster="c1", direct=direct), flowed


async def test_a_refused_token_is_retried_through_its_flow_and_the_direct_path_takes_it() -> None:
    direct = FakeDirect({"Authorization": OLD})
    client, flowed = _client(direct)
    async with client:
        assert (await client.get(CONFIGMAPS, "a", namespace="ns")) == CONFIGMAP
        assert (await client.get(CONFIGMAPS, "a", namespace="ns")) == CONFIGMAP
    assert direct.answers == [401, 200]  # the second request went direct, with the new token
    assert flowed == [NEW]
    assert client.request_counts == {"get": 2}


async def test_a_watch_refused_on_the_direct_path_refreshes_its_header_too() -> None:
    direct = FakeDirect({"Authorization": OLD})
    client, flowed = _client(direct)
    async with client:
        for _ in range(2):
            async with client.watch(CONFIGMAPS, namespace="ns") as events:
                assert [event.object async for event in events] == [CONFIGMAP]
    assert direct.answers == [401, 200]
    assert flowed == [NEW]
    assert client.request_counts == {"watch": 2}


async def test_without_a_credential_header_a_401_is_final() -> None:
    direct = FakeDirect({})  # a client certificate: nothing httpx2's flow could renew
    assert not direct.carries_credential
    client, flowed = _client(direct)
    async with client:
        with pytest.raises(ApiError) as refused:
            await client.get(CONFIGMAPS, "a", namespace="ns")
    assert refused.value.code == 401
    assert direct.answers == [401]
    assert flowed == []
