"""An apiserver's Leases behind httpx2.MockTransport, for the leader election tests.

GET, POST (AlreadyExists) and PUT with the resourceVersion compare-and-swap
(Conflict), as the real apiserver answers them. Each client it hands out can
be cut off on its own (a SIGKILLed replica, a partitioned one), and the whole
server can refuse connections or hang (a frozen apiserver). Every request is
recorded with the event loop's time, which is fake under ``looptime``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from dataclasses import dataclass
from typing import Any

import httpx2
import msgspec

from jobrelay.kube.client import ApiClient

PREFIX = "/apis/coordination.k8s.io/v1/namespaces/"


@dataclass(frozen=True)
class Request:
    at: float  # loop time when it reached the server
    client: str
    method: str
    name: str
    ok: bool
    holder: str | None  # the holderIdentity a write carried


class FakeLeases:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.down = False  # every connection refused
        self.frozen = False  # every request hangs (until thawed)
        self.cut_off: set[str] = set()  # clients whose requests never reach the server
        self.latency = 0.0  # seconds each request takes to reach the server
        self._revisions = itertools.count(1)
        self._thawed = asyncio.Event()

    # -- test side -------------------------------------------------------------

    def client(self, name: str = "client") -> ApiClient:
        async def handle(request: httpx2.Request) -> httpx2.Response:
            return await self._handle(name, request)

        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handle), base_url="https://fake")
        return ApiClient(http, cluster=name)

    def spec(self, name: str, namespace: str = "jobrelay-system") -> dict[str, Any]:
        return dict(self.objects[(namespace, name)]["spec"])

    def holder(self, name: str, namespace: str = "jobrelay-system") -> str | None:
        lease = self.objects.get((namespace, name))
        return None if lease is None else str(lease["spec"].get("holderIdentity") or "")

    def put(self, name: str, spec: dict[str, Any], namespace: str = "jobrelay-system") -> None:
        """Write the Lease as someone else would (another holder, a person)."""
        self.objects[(namespace, name)] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": str(next(self._revisions)),
            },
            "spec": dict(spec),
        }

    def thaw(self) -> None:
        self.frozen = False
        self._thawed.set()

    def writes(self, client: str | None = None, *, ok: bool = True) -> list[Request]:
        return [
            r
            for r in self.requests
            if r.method != "GET" and r.ok == ok and (client is None or r.client == client)
        ]

    # -- server side -----------------------------------------------------------

    async def _handle(self, client: str, request: httpx2.Request) -> httpx2.Response:
        if client in self.cut_off or self.down:
            raise httpx2.ConnectError("connection refused", request=request)
        if self.frozen:
            self._thawed.clear()
            await self._thawed.wait()
        if self.latency:
            await asyncio.sleep(self.latency)
        path = request.url.path
        assert path.startswith(PREFIX), path
        namespace, plural, *named = path[len(PREFIX) :].split("/")
        assert plural == "leases", path
        body: dict[str, Any] = msgspec.json.decode(request.content) if request.content else {}
        if request.method == "POST":
            name = body["metadata"]["name"]
            code, answer = self._create(namespace, name, body)
        elif request.method == "GET":
            name = named[0]
            code, answer = self._get(namespace, name)
        elif request.method == "PUT":
            name = named[0]
            code, answer = self._replace(namespace, name, body)
        else:
            raise AssertionError(f"unexpected {request.method} {path}")
        holder = body.get("spec", {}).get("holderIdentity")
        loop_time = asyncio.get_running_loop().time()
        self.requests.append(Request(loop_time, client, request.method, name, code < 300, holder))
        return httpx2.Response(code, content=msgspec.json.encode(answer))

    def _get(self, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        lease = self.objects.get((namespace, name))
        if lease is None:
            return 404, _status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return 200, copy.deepcopy(lease)

    def _create(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        if (namespace, name) in self.objects:
            return 409, _status(409, "AlreadyExists", f'leases "{name}" already exists')
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._revisions))
        self.objects[(namespace, name)] = stored
        return 201, copy.deepcopy(stored)

    def _replace(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        current = self.objects.get((namespace, name))
        if current is None:
            return 404, _status(404, "NotFound", f'leases "{name}" not found')
        wanted = body["metadata"].get("resourceVersion")
        if wanted != current["metadata"]["resourceVersion"]:
            return 409, _status(409, "Conflict", "the object has been modified")
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._revisions))
        self.objects[(namespace, name)] = stored
        return 200, copy.deepcopy(stored)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
