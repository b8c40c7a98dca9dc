"""An in-memory apiserver behind httpx2.MockTransport, for fast client and informer tests.

It speaks just enough of the API for one namespaced kind (ConfigMaps): paged
lists, watches streamed from a queue the test feeds, and scripted failures.
Real-apiserver behaviour is covered by tests/integration/kube.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import msgspec
import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.vocabulary.resource import Resource

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
_CLOSE = object()


class FakeWatch:
    """One open watch stream; the test pushes lines into it."""

    def __init__(self, params: dict[str, str], chunk_size: int | None) -> None:
        self.params = params
        self._lines: asyncio.Queue[object] = asyncio.Queue()
        self._chunk_size = chunk_size
        self.closed = False

    def send(self, event_type: str, obj: dict[str, Any]) -> None:
        self._lines.put_nowait(msgspec.json.encode({"type": event_type, "object": obj}) + b"\n")

    def close(self) -> None:
        """End the stream cleanly, as the apiserver does after timeoutSeconds."""
        self._lines.put_nowait(_CLOSE)

    def fail(self) -> None:
        """Break the connection mid-stream."""
        self._lines.put_nowait(httpx2.ReadError("connection reset by peer"))

    async def body(self) -> AsyncIterator[bytes]:
        try:
            while True:
                item = await self._lines.get()
                if item is _CLOSE:
                    return
                if isinstance(item, Exception):
                    raise item
                assert isinstance(item, bytes)
                if self._chunk_size is None:
                    yield item
                else:
                    for start in range(0, len(item), self._chunk_size):
                        yield item[start : start + self._chunk_size]
        finally:
            self.closed = True


class FakeApiserver:
    # Tests reach these through the fixture: a conftest is not importable by name.
    RESOURCE = CONFIGMAPS

    @staticmethod
    def status(code: int, reason: str, message: str = "") -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message or reason,
        }

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.revision = 100
        self.requests: list[httpx2.Request] = []
        self.watches: list[FakeWatch] = []
        self._new_watches: asyncio.Queue[FakeWatch] = asyncio.Queue()
        # Scripted answers for the next requests of a kind: (status, body) or an exception.
        self.next_watch_answers: deque[tuple[int, dict[str, Any]] | Exception] = deque()
        self.next_list_answers: deque[tuple[int, dict[str, Any]] | Exception] = deque()
        self.watch_chunk_size: int | None = None
        self.handler: Callable[[httpx2.Request], httpx2.Response] | None = None

    # -- test side -------------------------------------------------------------

    def put(self, name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
        self.revision += 1
        key = f"{namespace}/{name}"
        existed = key in self.objects
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": str(self.revision),
                "uid": f"uid-{name}",
            },
            "data": dict(data),
        }
        self.objects[key] = obj
        for watch in self.open_watches():
            watch.send("MODIFIED" if existed else "ADDED", obj)
        return obj

    def remove(self, name: str, namespace: str = "default") -> None:
        self.revision += 1
        obj = self.objects.pop(f"{namespace}/{name}")
        obj["metadata"]["resourceVersion"] = str(self.revision)
        for watch in self.open_watches():
            watch.send("DELETED", obj)

    def open_watches(self) -> list[FakeWatch]:
        return [w for w in self.watches if not w.closed]

    async def next_watch(self, within: float = 2.0) -> FakeWatch:
        async with asyncio.timeout(within):
            return await self._new_watches.get()

    def lists(self) -> list[httpx2.Request]:
        """List requests, not counting the follow-up pages of a paginated list."""
        return [
            r
            for r in self.requests
            if r.method == "GET" and not {"watch", "continue"} & set(r.url.params)
        ]

    # -- server side -----------------------------------------------------------

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if self.handler is not None:
            return self.handler(request)
        params = dict(request.url.params)
        if request.method == "GET" and params.get("watch") == "true":
            return self._watch(params)
        if request.method == "GET":
            return self._list(params)
        raise AssertionError(f"unexpected {request.method} {request.url}")

    def _answer(
        self, scripted: deque[tuple[int, dict[str, Any]] | Exception]
    ) -> httpx2.Response | None:
        if not scripted:
            return None
        answer = scripted.popleft()
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx2.Response(status, content=msgspec.json.encode(body))

    def _list(self, params: dict[str, str]) -> httpx2.Response:
        if (scripted := self._answer(self.next_list_answers)) is not None:
            return scripted
        items = [
            {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            for _, obj in sorted(self.objects.items())
        ]
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(self.revision)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        body = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": metadata, "items": page}
        return httpx2.Response(200, content=msgspec.json.encode(body))

    def _watch(self, params: dict[str, str]) -> httpx2.Response:
        if (scripted := self._answer(self.next_watch_answers)) is not None:
            return scripted
        watch = FakeWatch(params, self.watch_chunk_size)
        self.watches.append(watch)
        self._new_watches.put_nowait(watch)
        return httpx2.Response(200, content=watch.body())


@pytest.fixture
def fake() -> FakeApiserver:
    return FakeApiserver()


@pytest.fixture
async def client(fake: FakeApiserver) -> AsyncIterator[ApiClient]:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(fake), base_url="https://fake")
    async with ApiClient(http, cluster="fake") as api:
        yield api
