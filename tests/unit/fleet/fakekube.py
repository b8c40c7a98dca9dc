"""An in-memory apiserver for the worker pool's unit tests, behind httpx2.MockTransport.

It serves what the pool asks of a manager and of a worker: lists and watches
of a few collections (selectors are ignored), reads, status patches, and
``/version``. A test can hold the lists of a collection (to see what the pool
does while a cache is being filled), and make the server refuse everyone (401) or
every list (403). Real-apiserver behaviour is covered by tests/e2e/test_worker_connection.py.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import msgspec

from jobrelay.kube.client import ApiClient
from jobrelay.vocabulary.merge_patch import apply_merge_patch
from jobrelay.vocabulary.resource import Resource

JsonObj = dict[str, Any]


def collection_path(resource: Resource, namespace: str | None = None) -> str:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    if namespace:
        prefix += f"/namespaces/{namespace}"
    return f"{prefix}/{resource.plural}"


def _status(code: int, reason: str, message: str) -> JsonObj:
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message}  # fmt: skip


class FakeKube:
    """One apiserver holding ``collections``: collection path -> object name -> object."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.collections: dict[str, dict[str, JsonObj]] = {}
        self.revision = 100
        self.refuse_everyone = False  # answer 401 to every request
        self.forbid_lists = False  # answer 403 to lists and watches (credentials without rights)
        # Collections whose lists and watches are refused (403), as RBAC refuses them.
        self.forbidden: set[str] = set()
        self.clients: list[ApiClient] = []
        self._watches: dict[str, list[asyncio.Queue[JsonObj]]] = {}
        self._list_gates: dict[str, asyncio.Event] = {}
        self.lists_asked: dict[str, asyncio.Event] = {}
        self.status_patches: list[tuple[str, JsonObj]] = []
        self.requests: list[tuple[str, str]] = []  # (method, path)

    # -- test side ---------------------------------------------------------------

    def serve(self, path: str) -> None:
        self.collections.setdefault(path, {})
        self._watches.setdefault(path, [])
        self.lists_asked.setdefault(path, asyncio.Event())

    def forbid(self, path: str) -> None:
        """Lists and watches of ``path`` are answered 403, as for a credential without rights."""
        self.forbidden.add(path)

    def client(self) -> ApiClient:
        http = httpx2.AsyncClient(
            transport=httpx2.MockTransport(self), base_url=f"https://{self.name}"
        )
        client = ApiClient(http, cluster=self.name)
        self.clients.append(client)
        return client

    def put(self, path: str, obj: JsonObj) -> JsonObj:
        self.revision += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.revision)
        name = stored["metadata"]["name"]
        existed = name in self.collections[path]
        self.collections[path][name] = stored
        self._emit(path, "MODIFIED" if existed else "ADDED", stored)
        return stored

    def hold_lists(self, path: str) -> asyncio.Event:
        """Lists of ``path`` wait until the returned event is set."""
        gate = asyncio.Event()
        self._list_gates[path] = gate
        return gate

    def open_watches(self, path: str) -> int:
        return len(self._watches[path])

    # -- server side ---------------------------------------------------------------

    def _emit(self, path: str, kind: str, obj: JsonObj) -> None:
        for queue in self._watches[path]:
            queue.put_nowait({"type": kind, "object": copy.deepcopy(obj)})

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append((request.method, request.url.path))
        if self.refuse_everyone:
            return _answer(401, _status(401, "Unauthorized", "Unauthorized"))
        path = request.url.path
        if path == "/version":
            return _answer(200, {"gitVersion": "v1.35.4"})
        if path.endswith("/selfsubjectreviews"):  # an apiserver older than 1.28
            return _answer(404, _status(404, "NotFound", "the server could not find it"))
        if path.endswith("/selfsubjectaccessreviews"):  # a worker admin's reach, by default
            return _answer(201, {"status": {"allowed": not self.forbid_lists}})
        if request.method == "GET" and path in self.forbidden:
            message = f'User "nobody" cannot list resource "{path.rsplit("/", 1)[1]}"'
            return _answer(403, _status(403, "Forbidden", message))
        if path in self.collections and request.method == "GET":
            if self.forbid_lists:
                message = f'User "nobody" cannot list resource "{path.rsplit("/", 1)[1]}"'
                return _answer(403, _status(403, "Forbidden", message))
            if request.url.params.get("watch") == "true":
                return self._watch(path)
            self.lists_asked[path].set()
            if (gate := self._list_gates.get(path)) is not None:
                await gate.wait()
            items = list(self.collections[path].values())
            body = {"metadata": {"resourceVersion": str(self.revision)}, "items": items}
            return _answer(200, body)
        collection, _, rest = path.rpartition("/")
        subresource = ""
        if collection not in self.collections:
            collection, _, name = collection.rpartition("/")
            subresource = rest
        else:
            name = rest
        if collection not in self.collections:
            raise AssertionError(f"unexpected {request.method} {path}")
        obj = self.collections[collection].get(name)
        if obj is None:
            return _answer(404, _status(404, "NotFound", f'"{name}" not found'))
        if request.method == "GET" and not subresource:
            return _answer(200, obj)
        if request.method == "PATCH" and subresource == "status":
            patch = msgspec.json.decode(request.content)
            self.status_patches.append((name, patch))
            return _answer(200, self.put(collection, apply_merge_patch(obj, patch)))
        raise AssertionError(f"unexpected {request.method} {path}")

    def _watch(self, path: str) -> httpx2.Response:
        queue: asyncio.Queue[JsonObj] = asyncio.Queue()
        self._watches[path].append(queue)

        async def stream() -> AsyncIterator[bytes]:
            try:
                while True:
                    yield msgspec.json.encode(await queue.get()) + b"\n"
            finally:
                self._watches[path].remove(queue)

        return httpx2.Response(200, content=stream())


def _answer(code: int, body: Any) -> httpx2.Response:
    return httpx2.Response(code, content=msgspec.json.encode(body))
