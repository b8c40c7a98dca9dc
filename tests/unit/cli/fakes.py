"""An in-memory apiserver for the `jobrelay clusters` tests, behind httpx2.MockTransport.

It serves whatever the test stores (cluster-scoped or namespaced, any group):
get, list with an equality label selector, merge patch (the status subresource
apart, generation bumped on spec changes, as for a CRD with a status
subresource), delete with a UID precondition, discovery, and watches. A watch
plays the controller: it applies the test's scripted status patches one by one,
sending each as a MODIFIED event, then stays open and silent, as a real watch
does until its timeout.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx2
import msgspec
from tests.unit.controller.fakes import _answer, status_body

from jobrelay.kube.client import ApiClient
from jobrelay.vocabulary.merge_patch import apply_merge_patch
from jobrelay.vocabulary.timestamps import micro_time

_revisions = itertools.count(100)
WORKER_CLUSTERS_PATH = "jobrelay.dev/v1alpha1/workerclusters"
LEASES_PATH = "coordination.k8s.io/v1/leases"


@dataclass
class FakeApiserver:
    """One cluster. ``objects`` is keyed by (group/version/plural, namespace or "", name)."""

    name: str
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    # group/version -> the APIResourceList's resources (discovery).
    served: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Status patches the "controller" writes, one per watch event, while a watch is open.
    controller: deque[dict[str, Any]] = field(default_factory=deque)
    # What the next watch does instead of streaming: "break" drops the connection after
    # one scripted event, "interrupt" raises KeyboardInterrupt (Ctrl-C), "gone" answers 410,
    # "delete" deletes the object (and sends the event).
    watch_mishaps: deque[str] = field(default_factory=deque)
    # Events (type, object) the next watch sends as they are, then Ctrl-C ends the command.
    watch_events: deque[tuple[str, dict[str, Any]]] = field(default_factory=deque)
    # An older CRD prunes spec fields it does not know.
    pruned_spec_fields: set[str] = field(default_factory=set)
    unreachable: bool = False
    refuse: tuple[int, str] | None = None  # every request is answered with this error
    forbidden: set[str] = field(default_factory=set)  # plurals this user may not read: 403
    # Plurals this user may read in a namespace but not list across namespaces: 403.
    forbidden_across: set[str] = field(default_factory=set)
    crd_served: bool = True  # False: WorkerClusters are not served (404 naming no object)
    # The kubeconfigs, contexts and names the CLI connected to this worker with.
    connections: list[tuple[Any, ...]] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)

    # -- test side -------------------------------------------------------------------

    def client(self) -> ApiClient:
        http = httpx2.AsyncClient(
            transport=httpx2.MockTransport(self), base_url=f"https://{self.name}"
        )
        return ApiClient(http, cluster=self.name)

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", f"uid-{metadata['name']}-{next(_revisions)}")
        metadata.setdefault("generation", 1)
        metadata["resourceVersion"] = str(next(_revisions))
        self.objects[(path, metadata.get("namespace", ""), metadata["name"])] = obj
        return obj

    def lead(
        self,
        holder: str = "pod-a",
        *,
        renewed: datetime | None = None,
        lease_seconds: int = 15,
        namespace: str = "jobrelay-system",
        name: str = "jobrelay-relay",
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The controller's leader Lease, renewed at ``renewed`` (now when None): fresh."""
        stamp = micro_time(renewed or datetime.now(UTC))
        return self.put(
            LEASES_PATH,
            {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace,
                             "annotations": annotations or {}},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": lease_seconds,
                         "acquireTime": stamp, "renewTime": stamp},
            },
        )  # fmt: skip

    def get(self, path: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.objects.get((path, namespace, name))

    def worker_cluster(self, name: str) -> dict[str, Any] | None:
        return self.get(WORKER_CLUSTERS_PATH, name)

    def writes(self) -> list[tuple[str, str, Any]]:
        return [(method, path, body) for method, path, _, body in self.requests if method != "GET"]

    # -- server side -----------------------------------------------------------------

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        params = dict(request.url.params)
        body = msgspec.json.decode(request.content) if request.content else None
        self.requests.append((request.method, path, params, body))
        if self.unreachable:
            raise httpx2.ConnectError("connection refused", request=request)
        if self.refuse is not None:
            return _answer(self.refuse[0], status_body(*self.refuse))
        if any(f"/{plural}" in path for plural in self.forbidden):
            return _answer(403, status_body(403, "Forbidden", "you may not"))
        if "/namespaces/" not in path and any(
            path.endswith(f"/{p}") for p in self.forbidden_across
        ):
            return _answer(403, status_body(403, "Forbidden", "not across namespaces"))
        if not self.crd_served and "/workerclusters" in path:
            return _answer(404, status_body(404, "NotFound", "the server could not find it"))
        parts = path.strip("/").split("/")
        # /api/v1/... or /apis/<group>/<version>/...
        prefix, rest = (parts[:2], parts[2:]) if parts[0] == "api" else (parts[:3], parts[3:])
        group_version = "/".join(prefix[1:])
        if not rest:
            if group_version not in self.served:
                return _answer(404, status_body(404, "NotFound", "the server could not find it"))
            return _answer(
                200, {"kind": "APIResourceList", "resources": self.served[group_version]}
            )
        namespace = ""
        if rest[0] == "namespaces" and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        plural, name, subresource = rest[0], *[*rest[1:], "", ""][:2]
        key = (f"{group_version}/{plural}", namespace, name)
        if not name:
            assert request.method == "GET", path
            if params.get("watch") == "true":
                return self._watch(key[0], params)
            return self._list(key[0], namespace, params)
        if key not in self.objects:
            return _answer(
                404, status_body(404, "NotFound", f'{plural} "{name}" not found', name=name)
            )
        if request.method == "GET":
            return _answer(200, self.objects[key])
        if request.method == "PATCH":
            return _answer(200, self._patch(key, body, subresource))
        if request.method == "DELETE":
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid is not None and uid != self.objects[key]["metadata"]["uid"]:
                return _answer(409, status_body(409, "Conflict", "Precondition failed: UID"))
            del self.objects[key]
            return _answer(200, {"kind": "Status", "status": "Success"})
        raise AssertionError(f"unexpected {request.method} {path}")

    def _list(self, path: str, namespace: str, params: dict[str, str]) -> httpx2.Response:
        wanted = dict(
            term.split("=", 1) for term in (params.get("labelSelector") or "").split(",") if term
        )
        items = [
            obj
            for (p, ns, _), obj in sorted(self.objects.items())
            if p == path
            and (not namespace or ns == namespace)
            and wanted.items() <= (obj["metadata"].get("labels") or {}).items()
        ]
        return _answer(200, {"metadata": {"resourceVersion": "1"}, "items": items})

    def _patch(
        self, key: tuple[str, str, str], patch: dict[str, Any], subresource: str
    ) -> dict[str, Any]:
        current = self.objects[key]
        if subresource == "status":
            updated = apply_merge_patch(current, {"status": patch.get("status") or {}})
        else:
            patch = {k: v for k, v in patch.items() if k != "status"}
            updated = apply_merge_patch(current, patch)
            spec = {
                k: v for k, v in (updated.get("spec") or {}).items()
                if k not in self.pruned_spec_fields
            }  # fmt: skip
            updated["spec"] = spec
            if spec != current.get("spec"):
                updated["metadata"] = {
                    **updated["metadata"],
                    "generation": current["metadata"]["generation"] + 1,
                }
        updated["metadata"] = {**updated["metadata"], "resourceVersion": str(next(_revisions))}
        self.objects[key] = updated
        return copy.deepcopy(updated)

    def _watch(self, path: str, params: dict[str, str]) -> httpx2.Response:
        mishap = self.watch_mishaps.popleft() if self.watch_mishaps else ""
        if mishap == "gone":
            return _answer(410, status_body(410, "Expired", "too old resource version"))
        selected = params.get("fieldSelector", "").removeprefix("metadata.name=")
        if self.watch_events:
            return httpx2.Response(200, content=self._scripted())
        return httpx2.Response(200, content=self._stream(path, selected, mishap))

    async def _scripted(self) -> AsyncIterator[bytes]:
        while self.watch_events:
            kind, obj = self.watch_events.popleft()
            yield msgspec.json.encode({"type": kind, "object": obj}) + b"\n"
            await asyncio.sleep(0)
        raise KeyboardInterrupt  # the user stops the watch

    async def _stream(self, path: str, name: str, mishap: str) -> AsyncIterator[bytes]:
        if mishap == "interrupt":
            raise KeyboardInterrupt
        if mishap == "delete":
            deleted = self.objects.pop((path, "", name))
            yield msgspec.json.encode({"type": "DELETED", "object": deleted}) + b"\n"
        while self.controller:
            updated = self._patch((path, "", name), self.controller.popleft(), "status")
            yield msgspec.json.encode({"type": "MODIFIED", "object": updated}) + b"\n"
            await asyncio.sleep(0)  # let the client read it, as a network would
            if mishap == "break":
                raise httpx2.ReadError("connection reset by peer")
        await asyncio.Event().wait()  # open and silent until the client gives up


def worker_cluster(
    name: str,
    *,
    active: int | None = None,
    cordoned: bool = False,
    drain: str | None = None,
    lost: str | None = None,
    connected: str = "True",
    origin: str | None = None,
) -> dict[str, Any]:
    """A WorkerCluster as `clusters add` and the controller leave it."""
    spec: dict[str, Any] = {
        "kubeconfigSecretRef": {"name": f"worker-{name}-kubeconfig", "key": "kubeconfig"},
        "cordoned": cordoned,
    }
    if drain:
        spec["drain"] = drain
    status: dict[str, Any] = {}
    if active is not None:
        status = {
            "activeMirrors": active,
            "conditions": [{"type": "Connected", "status": connected, "reason": "Connected"}],
        }
    if lost:
        status["lostTime"] = lost
    if origin:
        status["origin"] = origin
    obj: dict[str, Any] = {
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": name},
        "spec": spec,
    }
    if status:
        obj["status"] = status
    return obj
