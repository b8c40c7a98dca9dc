"""Fakes for the controller's I/O: an in-memory apiserver per cluster, a worker pool, caches.

FakeCluster answers a real ApiClient through httpx2.MockTransport, for any
namespaced kind: create (AlreadyExists; NotFound when the namespace is
missing), get, merge patch with the resourceVersion compare-and-swap, status
patches, delete with a UID precondition, discovery, and scripted failures. So
the executor's error handling is exercised against the Status bodies a real
apiserver sends, not against hand-made ApiErrors. The caches (FakeInformer,
FakeWorker) change only when a test says so: they lag, as real ones do.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import msgspec

from jobrelay.controller.relay.executor import Executor
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.fleet.workers import WorkerView
from jobrelay.fleet.workers.provisioning_feed import ProvisioningFeed
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.mirrors import is_ours
from jobrelay.kube.client import ApiClient
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.claims import WorkerClaims
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.placement.tracker import CapacityTracker, OwnedPods
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.merge_patch import apply_merge_patch
from jobrelay.vocabulary.workercluster import drain_mode

_revisions = itertools.count(1000)


def status_body(code: int, reason: str, message: str = "", **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message or reason,
        "details": details,
    }


@dataclass
class Failure:
    method: str
    path_suffix: str
    code: int  # 0: the connection fails; negative: the client raises something unexpected
    reason: str
    times: int = 1


@dataclass
class FakeCluster:
    """One apiserver. ``objects`` is keyed by (plural, namespace, name)."""

    name: str
    namespaces: set[str] = field(default_factory=lambda: {"default", "team-a"})
    objects: dict[tuple[str, str, str], JsonObj] = field(default_factory=dict)
    # group/version -> the APIResourceList's resources (discovery).
    served: dict[str, list[JsonObj]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    events: list[JsonObj] = field(default_factory=list)
    # How its admission answers a Pod (always a dry run here): None admits it, else
    # (code, reason, message) refuses it.
    pod_admission: tuple[int, str, str] | None = None
    # Labels of namespaces, by name (a namespace without an entry has none).
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # Annotations of namespaces, by name (a namespace's GET answers its uid too).
    namespace_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # What its /version reports.
    git_version: str = "v1.35.4"
    # Called with each request's method and path as it arrives (before it is answered).
    on_request: Callable[[str, str], None] | None = None
    _uids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- test side -------------------------------------------------------------

    def client(self) -> ApiClient:
        http = httpx2.AsyncClient(
            transport=httpx2.MockTransport(self), base_url=f"https://{self.name}"
        )
        return ApiClient(http, cluster=self.name)

    def fail(
        self, method: str, path_suffix: str, code: int, reason: str, *, times: int = 1
    ) -> None:
        """Answer the next ``times`` requests ``method`` to a path ending so with an error."""
        self.failures.append(Failure(method, path_suffix, code, reason, times))

    def put(self, plural: str, obj: JsonObj) -> JsonObj:
        """Store an object as if created by someone; fills in uid and resourceVersion."""
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", f"{self.name}-uid-{next(self._uids)}")
        metadata["resourceVersion"] = str(next(_revisions))
        self.objects[(plural, metadata["namespace"], metadata["name"])] = obj
        return obj

    def get(self, plural: str, key: str) -> JsonObj | None:
        namespace, _, name = key.partition("/")
        return self.objects.get((plural, namespace, name))

    def writes(self) -> list[tuple[str, str, Any]]:
        """Requests that change something (dry runs of pods store nothing)."""
        return [r for r in self.requests if r[0] != "GET" and not r[1].endswith("/pods")]

    def dry_runs(self) -> list[JsonObj]:
        return [body for method, path, body in self.requests if path.endswith("/pods")]

    # -- server side -----------------------------------------------------------

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        body = msgspec.json.decode(request.content) if request.content else None
        self.requests.append((request.method, path, body))
        if self.on_request is not None:
            self.on_request(request.method, path)
        for failure in self.failures:
            if (
                failure.times > 0
                and request.method == failure.method
                and path.endswith(failure.path_suffix)
            ):
                failure.times -= 1
                if failure.code == 0:
                    raise httpx2.ConnectError("connection refused", request=request)
                if failure.code < 0:
                    raise RuntimeError(failure.reason)  # a bug, not an API answer
                return _answer(failure.code, status_body(failure.code, failure.reason))
        if path == "/version":
            major, minor = self.git_version.lstrip("v").split(".")[:2]
            return _answer(200, {"major": major, "minor": minor, "gitVersion": self.git_version})
        parts = path.strip("/").split("/")
        # /api/v1/... or /apis/<group>/<version>/...
        prefix, rest = (parts[:2], parts[2:]) if parts[0] == "api" else (parts[:3], parts[3:])
        group_version = "/".join(prefix[1:])
        if not rest:
            return self._discovery(group_version)
        if rest == ["namespaces"] and request.method == "POST":
            return self._create_namespace(body)
        if len(rest) == 2 and rest[0] == "namespaces" and request.method == "GET":
            if rest[1] not in self.namespaces:
                return _answer(404, status_body(404, "NotFound", f'namespaces "{rest[1]}"'))
            labels = self.namespace_labels.get(rest[1], {})
            metadata = {"name": rest[1], "uid": f"{self.name}-ns-{rest[1]}", "labels": labels}
            if annotations := self.namespace_annotations.get(rest[1]):
                metadata["annotations"] = annotations
            return _answer(200, {"metadata": metadata})
        if request.method == "GET" and (
            len(rest) == 1 or (len(rest) == 3 and rest[0] == "namespaces")
        ):
            return self._list(rest[-1], rest[1] if len(rest) == 3 else None, request)
        if len(rest) < 3 or rest[0] != "namespaces":
            raise AssertionError(f"unexpected {request.method} {path}")
        namespace, plural, *named = rest[1:]
        if plural == "events" and request.method in ("POST", "PATCH"):
            self.events.append(body)
            return _answer(201, body)
        if plural == "pods":
            assert request.method == "POST" and request.url.params.get("dryRun") == "All", path
            if self.pod_admission is not None:
                code, reason, message = self.pod_admission
                return _answer(code, status_body(code, reason, message))
            return _answer(201, {**body, "metadata": {**body["metadata"], "name": "probe-1"}})
        if not named:
            assert request.method == "POST", path
            return self._create(plural, namespace, body)
        name, subresource = named[0], (named[1] if len(named) > 1 else "")
        key = (plural, namespace, name)
        if key not in self.objects:
            return _answer(404, status_body(404, "NotFound", f'{plural} "{name}" not found'))
        if request.method == "GET":
            return _answer(200, self.objects[key])
        if request.method == "PATCH":
            return self._patch(key, body, subresource)
        if request.method == "PUT":
            return self._replace(key, body)
        if request.method == "DELETE":
            return self._delete(key, body)
        raise AssertionError(f"unexpected {request.method} {path}")

    def _list(self, plural: str, namespace: str | None, request: httpx2.Request) -> httpx2.Response:
        """A LIST (in one namespace, or in all) as an apiserver answers it, or a WATCH that
        stays open and quiet (this fake's objects change only through its requests)."""
        if request.url.params.get("watch") in ("true", "1"):

            async def quiet() -> AsyncIterator[bytes]:
                await asyncio.Event().wait()
                yield b""  # never reached: the watch ends when its reader closes it

            return httpx2.Response(200, content=quiet())
        if plural == "namespaces":
            found: list[JsonObj] = [
                {"metadata": {"name": n, "labels": self.namespace_labels.get(n, {})}}
                for n in sorted(self.namespaces)
            ]
        else:
            found = [
                obj
                for (kind, ns, _name), obj in sorted(self.objects.items())
                if kind == plural and namespace in (None, ns)
            ]
        wanted = _equalities(request.url.params.get("labelSelector", ""))
        fields = _equalities(request.url.params.get("fieldSelector", ""))
        items = [
            obj
            for obj in found
            if all(((obj.get("metadata") or {}).get("labels") or {}).get(k) == v
                   for k, v in wanted.items())
            and all((obj.get("metadata") or {}).get("name") == v
                    for k, v in fields.items() if k == "metadata.name")
        ]  # fmt: skip
        revision = str(next(_revisions))
        return _answer(200, {"metadata": {"resourceVersion": revision}, "items": items})

    def _discovery(self, group_version: str) -> httpx2.Response:
        versions = [
            gv.partition("/")[2] for gv in self.served if gv.startswith(group_version + "/")
        ]
        if "/" not in group_version and group_version != "v1" and versions:  # /apis/<group>
            found = [{"groupVersion": f"{group_version}/{v}", "version": v} for v in versions]
            return _answer(200, {"kind": "APIGroup", "name": group_version, "versions": found})
        if group_version not in self.served:
            return _answer(404, status_body(404, "NotFound", "the server could not find it"))
        resources = self.served[group_version]
        return _answer(200, {"kind": "APIResourceList", "resources": resources})

    def _create_namespace(self, body: JsonObj) -> httpx2.Response:
        name = body["metadata"]["name"]
        if name in self.namespaces:
            return _answer(409, status_body(409, "AlreadyExists", f'namespaces "{name}"'))
        self.namespaces.add(name)
        self.namespace_labels[name] = dict(body["metadata"].get("labels") or {})
        self.namespace_annotations[name] = dict(body["metadata"].get("annotations") or {})
        return _answer(201, body)

    def _create(self, plural: str, namespace: str, body: JsonObj) -> httpx2.Response:
        if namespace not in self.namespaces:
            return _answer(
                404,
                status_body(
                    404, "NotFound", f'namespaces "{namespace}" not found', kind="namespaces"
                ),
            )
        name = body["metadata"]["name"]
        if (plural, namespace, name) in self.objects:
            return _answer(409, status_body(409, "AlreadyExists", f'{plural} "{name}" exists'))
        stored = self.put(plural, msgspec.json.decode(msgspec.json.encode(body)))
        return _answer(201, stored)

    def _patch(
        self, key: tuple[str, str, str], patch: JsonObj, subresource: str
    ) -> httpx2.Response:
        current = self.objects[key]
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            return _answer(409, status_body(409, "Conflict", "the object has been modified"))
        patch = dict(patch)
        metadata = {k: v for k, v in (patch.pop("metadata", None) or {}).items()}
        metadata.pop("resourceVersion", None)
        if subresource == "status":
            patch = {"status": patch.get("status") or {}}
        elif metadata:
            patch["metadata"] = metadata
        updated = apply_merge_patch(current, patch)
        updated["metadata"] = {**updated["metadata"], "resourceVersion": str(next(_revisions))}
        self.objects[key] = updated
        return _answer(200, updated)

    def _replace(self, key: tuple[str, str, str], body: JsonObj) -> httpx2.Response:
        current = self.objects[key]
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted != current["metadata"]["resourceVersion"]:
            return _answer(409, status_body(409, "Conflict", "the object has been modified"))
        metadata = {**body["metadata"], "uid": current["metadata"]["uid"]}
        metadata["resourceVersion"] = str(next(_revisions))
        self.objects[key] = {**body, "metadata": metadata}
        return _answer(200, self.objects[key])

    def _delete(self, key: tuple[str, str, str], options: JsonObj | None) -> httpx2.Response:
        uid = ((options or {}).get("preconditions") or {}).get("uid")
        if uid is not None and uid != self.objects[key]["metadata"]["uid"]:
            return _answer(409, status_body(409, "Conflict", "Precondition failed: UID"))
        del self.objects[key]
        return _answer(200, {"kind": "Status", "status": "Success"})


def _equalities(selector: str) -> dict[str, str]:
    """``k=v,k2=v2`` (a selector of equalities only; anything else this fake cannot judge)."""
    terms: dict[str, str] = {}
    for term in filter(None, selector.split(",")):
        key, equals, value = term.partition("=")
        if not equals or key.endswith(("!", "=")) or value.startswith("="):
            raise AssertionError(f"this fake judges only k=v selectors, not {term!r}")
        terms[key] = value
    return terms


def _answer(code: int, body: Any) -> httpx2.Response:
    return httpx2.Response(code, content=msgspec.json.encode(body))


# -- caches and the pool ------------------------------------------------------------


class FakeInformer:
    """The management cache: what the test (or ``refresh``) last put in it."""

    def __init__(self, objects: dict[str, JsonObj] | None = None) -> None:
        self.objects: dict[str, JsonObj] = dict(objects or {})
        # What the real Informer says of its list+watch: the last resourceVersion seen.
        self.resource_version = ""
        # What readiness reads of the real Informer: listed, nothing failed.
        self.name = "fake"
        self.has_synced = True
        self.last_error: Exception | None = None

    def get(self, key: str) -> JsonObj | None:
        return self.objects.get(key)

    def keys(self) -> list[str]:
        return list(self.objects)

    def items(self) -> list[tuple[str, JsonObj]]:
        return list(self.objects.items())

    def __len__(self) -> int:
        return len(self.objects)

    def refresh(self, cluster: FakeCluster, kind: WorkloadKind) -> None:
        """Catch up with the apiserver, as a watch would."""
        self.objects = {
            f"{ns}/{name}": kind.slim_local(copy.deepcopy(obj))
            for (plural, ns, name), obj in cluster.objects.items()
            if plural == kind.ref.plural
        }


@dataclass
class FakeNamespaceFeed:
    """A worker's namespace feed (fleet/workers/namespace_feed.py). ``judged`` False (the
    default, for tests of other rules): every namespace open, placement does not judge."""

    judged: bool = False
    listed: bool = True
    origins: dict[str, str | None] = field(default_factory=dict)
    credential: str | None = None
    username: str | None = None
    # The manager namespace UID each worker namespace was made for (fleet/namespace_grants.py).
    made: dict[str, str] = field(default_factory=dict)

    def made_for(self, namespace: str) -> str | None:
        return self.made.get(namespace)

    def open_to(self, origin: str, namespace: str) -> bool:
        return not self.judged or (self.listed and self.origins.get(namespace) == origin)

    def view(self, origin: str, *, create: bool) -> WorkerNamespaces | None:
        if not self.judged:
            return None
        return WorkerNamespaces(origin, create, self.listed, dict(self.origins), self.credential)


@dataclass
class FakeCopyFeed:
    """A worker's feed of our copies (fleet/workers/dependency_feed.py): a credential that
    reads them everywhere, none cached (the copier reads the worker)."""

    everywhere: bool | None = True

    def copy(self, kind: str, namespace: str, name: str) -> JsonObj | None:
        return None

    def granted(self, namespace: str) -> None:
        """Its informers there would open (nothing to do: none cached)."""


@dataclass
class FakeClaimFeed:
    """A worker's PersistentVolumeClaim feed (fleet/workers/claim_feed.py). ``phases`` None
    (the default, for tests of other rules): placement does not judge data."""

    phases: dict[str, dict[str, str]] | None = None
    listed: bool = True
    unreadable: str | None = None

    def view(self) -> WorkerClaims | None:
        if self.phases is None:
            return None
        return WorkerClaims(self.listed, self.phases, self.unreadable)


@dataclass
class FakeWorker:
    """What the pool exposes of one worker: its client, its state and its mirror caches."""

    name: str
    cluster: FakeCluster
    connected: bool = True
    cordoned: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    synced_kinds: set[str] | None = None  # None: every kind
    cache: dict[WorkloadKey, JsonObj] = field(default_factory=dict)
    active: int = 0
    # The last state of mirrors deleted here, by key (as the pool's delete events keep it).
    vanished: dict[WorkloadKey, JsonObj] = field(default_factory=dict)
    # Not connected: seconds until it is declared lost (<= 0: lost); None: connected.
    lost_in: float | None = None
    drain: str = ""
    # Its nodes (None: unknown; with ``capacity_forbidden``, blind: placed by load alone).
    nodes: WorkerCapacity | None = None
    capacity_forbidden: bool = True
    unfinished: set[WorkloadKey] = field(default_factory=set)
    pods: dict[tuple[str, str], OwnedPods] = field(default_factory=dict)
    tracker: CapacityTracker = field(default_factory=CapacityTracker)
    namespace_feed: FakeNamespaceFeed = field(default_factory=FakeNamespaceFeed)
    claim_feed: FakeClaimFeed = field(default_factory=FakeClaimFeed)
    dependency_feed: FakeCopyFeed = field(default_factory=lambda: FakeCopyFeed())
    # The real feed, never started: a test fills it through its _apply.
    provisioning_feed: ProvisioningFeed = field(default_factory=lambda: ProvisioningFeed("fake"))
    bindings_version: int = 0

    def __post_init__(self) -> None:
        self.client = self.cluster.client()

    def capacity(self) -> WorkerCapacity | None:
        return self.nodes

    def pods_of(self, namespace: str, name: str) -> OwnedPods | None:
        return self.pods.get((namespace, name), OwnedPods())

    def holds_pods_named(self, namespace: str, name: str) -> bool | None:
        return self.pods.get((namespace, name), OwnedPods()).total > 0

    def rebound_since(self, version: int) -> set[tuple[str, str]] | None:
        return None  # tests change ``pods`` at will: every reservation is looked at again

    def mirror(self, key: WorkloadKey) -> JsonObj | None:
        return self.cache.get(key)

    def synced(self, kind: str) -> bool:
        return self.synced_kinds is None or kind in self.synced_kinds

    def active_mirrors(self) -> int:
        return self.active

    def refresh(self, kind: WorkloadKind, controller_name: str, origin: str = "manager") -> None:
        """Catch up with the worker's apiserver: our mirrors of this kind, slimmed."""
        self.cache = {key: obj for key, obj in self.cache.items() if key.kind != kind.name} | {
            WorkloadKey(kind.name, f"{ns}/{name}"): kind.slim_mirror(copy.deepcopy(obj))
            for (plural, ns, name), obj in self.cluster.objects.items()
            if plural == kind.ref.plural and is_ours(obj, controller_name, origin)
        }


class FakePool:
    def __init__(self, *workers: FakeWorker) -> None:
        self._workers = {w.name: w for w in workers}

    def get(self, name: str) -> FakeWorker | None:
        return self._workers.get(name)

    def workers(self) -> list[FakeWorker]:
        return list(self._workers.values())

    def views(self) -> list[WorkerView]:
        return [
            WorkerView(
                name=w.name,
                worker=w,  # type: ignore[arg-type]  # duck-typed: what a reconcile reads
                cordoned=w.cordoned,
                drain=drain_mode(w.drain),
                labels=w.labels,
                lost_in=w.lost_in if w.lost_in is not None or w.connected else 1.0,
            )
            for w in self._workers.values()
        ]

    def mirror_keys(self) -> set[WorkloadKey]:
        return {key for w in self._workers.values() for key in w.cache}

    def has_mirror(self, key: WorkloadKey) -> bool:
        return any(w.mirror(key) is not None for w in self._workers.values())

    def pods_counted(self, key: WorkloadKey) -> bool:
        return any(w.holds_pods_named(key.namespace, key.name) for w in self._workers.values())

    async def aclose(self) -> None:
        for worker in self._workers.values():
            await worker.client.aclose()


@dataclass
class RecordedEvent:
    name: str
    type: str
    reason: str
    message: str


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[RecordedEvent] = []

    def record(self, obj: JsonObj, event_type: str, reason: str, message: str) -> None:
        self.recorded.append(
            RecordedEvent(str(obj["metadata"]["name"]), event_type, reason, message)
        )

    def reasons(self) -> list[str]:
        return [e.reason for e in self.recorded]


def executor_over(
    manager: ApiClient,
    pool: FakePool,
    events: FakeEvents,
    *,
    create_namespaces: bool = True,
    memory: RelayMemory | None = None,
) -> Executor:
    """A real Executor over fakes, with a fresh memory (expectations, reservations)."""
    return Executor(
        manager=manager,
        pool=pool,  # type: ignore[arg-type]
        events=events,  # type: ignore[arg-type]
        create_namespaces=create_namespaces,
        rejected_retry=30.0,
        memory=memory or RelayMemory(),
        origin="manager",
    )
