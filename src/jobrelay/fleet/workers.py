"""The live pool of worker clusters: one client and one mirror cache per kind per worker.

The pool follows the manager's ``WorkerCluster`` objects: a new or changed
one is (re)connected from its kubeconfig Secret, a deleted one is dropped.
Each worker's informers cache only the mirrors this controller created
(label-selected), one per configured workload kind, and report every change
as the management object's key, so the reconciler learns of mirror status
changes without polling.

A rotated kubeconfig Secret reconnects its worker without a restart, and the
worker's mirror caches are never seen empty meanwhile: the new connection is
built beside the old one, which keeps serving the reconciler until the new
caches have listed (or the new credentials have failed), and only then takes
its place.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobrelay.fleet import health, registry
from jobrelay.fleet.workerevents import WORKER_EVENT_FIELD_SELECTOR, slim_event
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.api import (
    EVENTS,
    NODES,
    PODS,
    SECRETS,
    WORKER_CLUSTERS,
    ApiClient,
    ApiError,
    ApiOptions,
    Resource,
)
from jobrelay.kube.queueing import WorkQueue, run_workers
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.tracker import (
    POD_FIELD_SELECTOR,
    CapacityTracker,
    OwnedPods,
    slim_node,
    slim_pod,
)
from jobrelay.vocabulary.names import mirror_selector

_log = logging.getLogger(__name__)

# How often a (re)connecting worker's caches are looked at until they have listed or failed.
_LISTED_POLL = 0.05

# A burst of node and pod events tells the placement at most this often per worker:
# soon enough to place a held workload within seconds of capacity freeing.
CAPACITY_DEBOUNCE = 0.5

# Builds a worker's client from its kubeconfig: (kubeconfig, context, worker name, options).
ClientFactory = Callable[[Mapping[str, Any], str | None, str, ApiOptions], ApiClient]


def client_from_kubeconfig(
    kubeconfig: Mapping[str, Any], context: str | None, name: str, options: ApiOptions
) -> ApiClient:
    return ApiClient.from_kubeconfig_dict(kubeconfig, context, cluster=name, options=options)


@dataclass(frozen=True)
class PoolOptions:
    """The pool's part of the controller's options (defaults: controller/options.py)."""

    namespace: str
    controller_name: str
    # Which management cluster this is: only mirrors of this origin are watched.
    origin: str
    # How long a worker may take to list its mirrors before it counts as unreachable.
    sync_timeout: float
    # How often each worker's status (Connected, activeMirrors) is refreshed at most.
    status_interval: float
    # A worker that fails or stops answering shows Connected=False within this many
    # seconds: it is probed (GET /version) every sixth of it, each probe bounded by a third.
    health_timeout: float
    # A worker not connected for this many seconds is declared lost: its workloads move.
    lost_timeout: float
    # Accept kubeconfigs with exec credential plugins (fleet/credentials.py).
    allow_exec_credentials: bool = False
    api: ApiOptions = field(default_factory=ApiOptions)
    informer: InformerOptions = field(default_factory=InformerOptions)


@dataclass
class Worker:
    """One connected (or connecting) worker cluster."""

    name: str
    client: ApiClient
    # One mirror cache per configured kind, by the kind's name.
    mirrors: dict[str, Informer]
    identity: tuple[str, ...]  # what the connection was built from; a change reconnects
    kinds: dict[str, WorkloadKind] = field(default_factory=dict)
    cordoned: bool = False
    drain: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    # The last probe's failure (None: it answered, or no probe ran yet).
    probe_error: Exception | None = None
    # When it last answered (RFC 3339) and its gitVersion, from the probe.
    last_contact: str | None = None
    kubernetes_version: str | None = None
    probe_task: asyncio.Task[None] | None = None
    # Mirrors that have not finished, kept by the informer handlers: placement
    # asks for the count on every decision, so it must not scan.
    unfinished: set[WorkloadKey] = field(default_factory=set)
    # The last state of mirrors deleted here, by key (bounded, oldest dropped first),
    # so that the work of a mirror deleted behind jobrelay's back still counts.
    vanished: collections.OrderedDict[WorkloadKey, dict[str, Any]] = field(
        default_factory=collections.OrderedDict
    )
    # Its Nodes and (unfinished) Pods, slimmed, feeding the tracker; they do not count
    # for the Connected verdict: a worker whose nodes cannot be read still runs mirrors.
    nodes: Informer | None = None
    pods: Informer | None = None
    tracker: CapacityTracker = field(default_factory=CapacityTracker)
    capacity_task: asyncio.Task[None] | None = None
    # The capacity_error already logged (each is logged once).
    capacity_error_logged: str | None = None
    # Its Warning Events, slimmed, for the pool's event sink (fleet/eventrelay.py).
    events: Informer | None = None

    def capacity(self) -> WorkerCapacity | None:
        """Its nodes and what is requested on each; None until both its Nodes and Pods
        have listed (or when it forbids listing them: ``capacity_error`` says why)."""
        if not self.capacity_listed:
            return None
        return self.tracker.capacity()

    @property
    def capacity_listed(self) -> bool:
        return (
            self.nodes is not None
            and self.pods is not None
            and self.nodes.has_synced
            and self.pods.has_synced
        )

    @property
    def capacity_error(self) -> str | None:
        """Why its capacity is not known (listing Nodes or Pods failed), if it is not."""
        for informer in (self.nodes, self.pods):
            if informer is not None and not informer.has_synced and informer.last_error:
                reason, message = health.classify(informer.last_error)
                return f"cannot list {informer.name}: {reason}: {message}"
        return None

    @property
    def capacity_forbidden(self) -> bool:
        """Its credentials may not list its Nodes or Pods: placement there goes without a
        fit check (blind) rather than never. Other errors (it does not answer) wait."""
        return any(
            informer is not None
            and not informer.has_synced
            and informer.last_error is not None
            and health.classify(informer.last_error)[0] == "Forbidden"
            for informer in (self.nodes, self.pods)
        )

    def pods_of(self, namespace: str, name: str) -> OwnedPods | None:
        """The unfinished pods of the Job or JobSet ``namespace/name`` here; None until its
        Pods have listed (unknown, not none)."""
        if self.pods is None or not self.pods.has_synced:
            return None
        return self.tracker.pods_of(namespace, name)

    @property
    def connected(self) -> bool:
        """The worker answers its probe and at least one kind's mirrors are listed and watched.

        A kind a worker does not serve (its CRD is missing there) makes that
        worker no candidate for that kind only; its other kinds still flow.
        """
        return self.verdict().connected

    def verdict(self) -> health.Verdict:
        """Its Connected condition now, from the last probe and its informers."""
        return health.verdict(
            self.probe_error,
            {kind: (i.has_synced, i.last_error) for kind, i in self.mirrors.items()},
            self.client.server,
        )

    def synced(self, kind: str) -> bool:
        """Whether this kind's mirror cache has listed (what it lacks is really absent)."""
        informer = self.mirrors.get(kind)
        return informer is not None and informer.has_synced

    def mirror(self, key: tuple[str, str]) -> dict[str, Any] | None:
        informer = self.mirrors.get(key[0])
        return informer.get(key[1]) if informer is not None else None

    def active_mirrors(self) -> int:
        return len(self.unfinished)

    def keys(self) -> list[WorkloadKey]:
        """The key of every mirror cached here."""
        return [
            WorkloadKey(kind, key)
            for kind, informer in self.mirrors.items()
            for key in informer.keys()  # noqa: SIM118 (an Informer, not a dict)
        ]

    def track(self, kind: WorkloadKind, event: InformerEvent) -> None:
        key = WorkloadKey(kind.name, event.key)
        if event.new is None or _finished(kind, event.new):
            self.unfinished.discard(key)
        else:
            self.unfinished.add(key)
        if event.new is None and event.old is not None:
            self.vanished[key] = event.old
            self.vanished.move_to_end(key)
            while len(self.vanished) > _VANISHED_KEPT:
                self.vanished.popitem(last=False)
        elif event.new is not None:
            self.vanished.pop(key, None)

    async def wait_synced(self) -> None:
        for informer in self.mirrors.values():
            await informer.wait_synced()

    def node_changed(self, event: InformerEvent) -> bool:
        if event.new is None:
            return self.tracker.delete_node(event.key)
        return self.tracker.set_node(event.new)

    def pod_changed(self, event: InformerEvent) -> bool:
        return self.tracker.set_pod(event.key, event.new)

    async def stop_watching(self) -> None:
        """Stop its probe and its informers (the client stays usable)."""
        for attribute in ("probe_task", "capacity_task"):
            task = getattr(self, attribute)
            setattr(self, attribute, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for informer in (*self.mirrors.values(), self.nodes, self.pods, self.events):
            if informer is not None:
                await informer.stop()

    async def close(self) -> None:
        await self.stop_watching()
        await self.client.aclose()


# Deleted mirrors remembered per worker: enough for every mirror of a busy worker
# deleted behind our back between two reconciles of its key.
_VANISHED_KEPT = 4096


class WorkerEventSink(Protocol):
    """Told of every worker's Events and mirror changes (fleet/eventrelay.py)."""

    def worker_event(self, worker: Worker, event: InformerEvent) -> None: ...

    def mirror_changed(self, worker: Worker, kind: WorkloadKind, event: InformerEvent) -> None: ...


@dataclass(frozen=True)
class WorkerView:
    """One registered worker as a reconcile needs it, connected or not."""

    name: str
    worker: Worker | None  # None: no connection could be made from its kubeconfig
    cordoned: bool
    drain: str
    labels: Mapping[str, str]
    # None while connected; else seconds until it is declared lost (<= 0: it is).
    lost_in: float | None

    @property
    def connected(self) -> bool:
        return self.lost_in is None

    @property
    def lost(self) -> bool:
        return self.lost_in is not None and self.lost_in <= 0


class WorkerPool:
    """Connects to every registered worker and keeps the connections current."""

    def __init__(
        self,
        manager: ApiClient,
        kinds: Sequence[WorkloadKind],
        on_mirror_change: Callable[[WorkloadKey], None],
        options: PoolOptions,
        *,
        client_factory: ClientFactory = client_from_kubeconfig,
        on_capacity_change: Callable[[str], None] | None = None,
        event_sink: WorkerEventSink | None = None,
    ) -> None:
        self._manager = manager
        self._event_sink = event_sink
        self._client_factory = client_factory
        self._kinds = list(kinds)
        self._on_mirror_change = on_mirror_change
        self._on_capacity_change = on_capacity_change
        # Per worker: when the capacity callback last ran (loop time), and the call
        # scheduled for the end of the debounce window, if any.
        self._capacity_told: dict[str, float] = {}
        self._capacity_call: dict[str, asyncio.TimerHandle] = {}
        # Per worker: the status.capacity last written, and when (loop time).
        self._capacity_written: dict[str, tuple[dict[str, Any], float]] = {}
        self._options = options
        self._workers: dict[str, Worker] = {}
        self._registrations = Informer(manager, WORKER_CLUSTERS, options=self._options.informer)
        # The kubeconfig Secrets, watched so that a rotated credential reconnects its worker.
        self._secrets = Informer(
            manager, SECRETS, namespace=self._options.namespace, options=self._options.informer
        )
        self._queue: WorkQueue[str] = WorkQueue()
        self._task: asyncio.Task[None] | None = None
        self._selector = mirror_selector(self._options.controller_name, self._options.origin)
        self._status_written: dict[str, health.Written] = {}
        # Set whenever a worker joins the pool or its kubeconfig turns out unusable.
        self._worker_settled = asyncio.Event()
        # Workers whose last connection attempt found no usable kubeconfig.
        self._unusable: set[str] = set()
        # Since when (seconds since the epoch) each worker has not been connected.
        self._down_since: dict[str, float] = {}
        self._declared_lost: set[str] = set()
        # Clients of workers that left the pool, closed once their last requests are over.
        self._retiring: set[asyncio.Task[None]] = set()

    # -- reading ---------------------------------------------------------------

    def get(self, name: str) -> Worker | None:
        return self._workers.get(name)

    def workers(self) -> list[Worker]:
        return list(self._workers.values())

    def mirror_keys(self) -> set[WorkloadKey]:
        """Every cached mirror's key, on any worker (for a full resync)."""
        keys: set[WorkloadKey] = set()
        for worker in self._workers.values():
            keys.update(worker.keys())
        return keys

    def has_mirror(self, key: WorkloadKey) -> bool:
        """Whether some worker's cache holds a mirror of ``key`` (cheap: one lookup a worker)."""
        return any(worker.mirror(key) is not None for worker in self._workers.values())

    def is_registered(self, name: str) -> bool:
        return self._registrations.get(name) is not None

    def views(self) -> list[WorkerView]:
        """Every registered worker, connected or not, with how close it is to being lost."""
        views = []
        for registration in self._registrations.values():
            name = str(registration["metadata"]["name"])
            spec = registration.get("spec") or {}
            views.append(
                WorkerView(
                    name=name,
                    worker=self._workers.get(name),
                    cordoned=bool(spec.get("cordoned")),
                    drain=str(spec.get("drain") or ""),
                    labels=dict((registration.get("metadata") or {}).get("labels") or {}),
                    lost_in=self._lost_in(name, registration),
                )
            )
        return views

    def _lost_in(self, name: str, registration: Mapping[str, Any]) -> float | None:
        worker = self._workers.get(name)
        now = time.time()
        if worker is not None and worker.connected:
            self._down_since.pop(name, None)
            return None
        if name not in self._down_since:
            failing = (worker is None and name in self._unusable) or (
                worker is not None and worker.verdict().reason != health.NOT_LISTED
            )
            if not failing:
                # Still connecting (or listing): not timed yet. Declaring a worker lost
                # early could run a workload twice.
                return self._options.lost_timeout
            # This process sees it fail too: the time the stored condition turned False
            # counts, so that a controller that restarts or hands over often still
            # declares it lost on time.
            self._down_since[name] = _silent_since(registration) or now
        return health.lost_in(self._down_since[name], now, self._options.lost_timeout)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._registrations.add_handler(self._on_registration)
        self._secrets.add_handler(self._on_secret)
        self._secrets.start()
        self._registrations.start()
        await self._secrets.wait_synced()
        await self._registrations.wait_synced()
        self._task = asyncio.get_running_loop().create_task(
            run_workers(self._queue, 2, self._sync, name="worker-pool"), name="worker-pool"
        )

    async def wait_connected(self, timeout: float) -> None:
        """Wait (bounded) until every registered worker has listed its mirrors once."""
        with contextlib.suppress(TimeoutError, RuntimeError):
            async with asyncio.timeout(timeout):
                for name in self._registrations.keys():  # noqa: SIM118 (an Informer, not a dict)
                    while (
                        worker := self._workers.get(name)
                    ) is None and name not in self._unusable:
                        self._worker_settled.clear()
                        await self._worker_settled.wait()
                    # One that cannot be used or did not answer would only hold up the rest.
                    if worker is not None and worker.probe_error is None:
                        await worker.wait_synced()

    async def stop(self) -> None:
        self._queue.shutdown()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._registrations.stop()
        await self._secrets.stop()
        for handle in self._capacity_call.values():
            handle.cancel()
        self._capacity_call.clear()
        for worker in list(self._workers.values()):
            await worker.close()
        self._workers.clear()
        for task in list(self._retiring):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _on_registration(self, event: InformerEvent) -> None:
        self._queue.add(event.key)

    def _on_secret(self, event: InformerEvent) -> None:
        secret = str((event.obj.get("metadata") or {}).get("name"))
        for registration in self._registrations.values():
            ref = (registration.get("spec") or {}).get("kubeconfigSecretRef") or {}
            if ref.get("name") == secret:
                self._queue.add(str(registration["metadata"]["name"]))

    # -- keeping one worker current ------------------------------------------------

    async def _sync(self, name: str) -> float | None:
        registration = self._registrations.get(name)
        current = self._workers.get(name)
        if registration is None:
            if current is not None:
                _log.info("worker %s unregistered: disconnecting", name)
                del self._workers[name]
                await self._retire(current)
            self._status_written.pop(name, None)
            self._capacity_written.pop(name, None)
            self._capacity_told.pop(name, None)
            handle = self._capacity_call.pop(name, None)
            if handle is not None:
                handle.cancel()
            self._down_since.pop(name, None)
            self._declared_lost.discard(name)
            return None
        self._follow_lost(name, registration)
        spec = registration.get("spec") or {}
        identity = self._identity(spec)
        if current is None or current.identity != identity:
            replacement = await self._connect(name, spec, identity)
            if replacement is None:  # an unusable kubeconfig: no connection at all
                if current is not None:
                    _log.info("worker %s: disconnecting", name)
                    del self._workers[name]
                    held = current.keys()
                    await self._retire(current)
                    # Each workload it holds now waits for it to come back or to be
                    # declared lost; without a cache, nothing else would bring them back.
                    for key in held:
                        self._on_mirror_change(key)
                return self._options.status_interval
            if current is None:
                self._add(replacement)
                await self._wait_listed(replacement)
            else:
                # The old connection serves until the new caches have listed: a cache
                # seen empty would make its mirrors look vanished, and its workloads
                # look placeable elsewhere.
                _log.info("worker %s changed: reconnecting", name)
                try:
                    await self._wait_listed(replacement)
                except BaseException:  # stopped meanwhile: it is in no pool to be closed with
                    await replacement.close()
                    raise
                self._add(replacement)
                await self._retire(current)
                # A change the new cache saw first may have been reconciled against the
                # old one: every key either knows is looked at again.
                for key in {*current.keys(), *replacement.keys()}:
                    self._on_mirror_change(key)
            current = replacement
        drain = str(spec.get("drain") or "")
        if drain != current.drain:
            # A drain moves workloads that no event of theirs would bring back.
            current.drain = drain
            if drain:
                _log.info("worker %s: draining (%s)", name, drain)
                self._requeue_mirrors(name)
        current.cordoned = bool(spec.get("cordoned"))
        current.labels = dict((registration.get("metadata") or {}).get("labels") or {})
        await self._write_status(name, current)
        return self._options.status_interval

    def _add(self, worker: Worker) -> None:
        self._workers[worker.name] = worker
        self._unusable.discard(worker.name)
        self._worker_settled.set()

    async def _retire(self, worker: Worker) -> None:
        """Stop a worker that left the pool; its client is closed only once any request
        a reconcile began on it has ended (each is bounded by the API timeouts), so that
        a mirror being created while its worker reconnects is not cut off half-way."""
        await worker.stop_watching()
        api = self._options.api
        task = asyncio.get_running_loop().create_task(
            _close_after(worker.client, api.connect_timeout + api.request_timeout),
            name=f"retire-{worker.name}",
        )
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _wait_listed(self, worker: Worker) -> None:
        """Until each mirror cache has listed or failed (no rights, no such kind there),
        bounded by the connect timeout; not at all when the worker did not answer its
        first probe: its status must say why now."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.sync_timeout
        while worker.probe_error is None and loop.time() < deadline:
            if all(i.has_synced or i.last_error is not None for i in worker.mirrors.values()):
                return
            await asyncio.sleep(_LISTED_POLL)  # an Informer signals no failure to await

    def _identity(self, spec: Mapping[str, Any]) -> tuple[str, ...]:
        ref = spec.get("kubeconfigSecretRef") or {}
        secret = self._secrets.get(f"{self._options.namespace}/{ref.get('name')}") or {}
        secret_version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
        return (
            str(ref.get("name")),
            str(ref.get("key")),
            str(spec.get("context") or ""),
            secret_version,
        )

    async def _connect(
        self, name: str, spec: Mapping[str, Any], identity: tuple[str, ...]
    ) -> Worker | None:
        """A new connection (probed once), not yet in the pool; None when the kubeconfig
        is unusable (its status then says why)."""
        try:
            kubeconfig = await registry.read_kubeconfig(
                self._manager, {"spec": spec}, self._options.namespace,
                allow_exec=self._options.allow_exec_credentials,
            )  # fmt: skip
            client = self._client_factory(
                kubeconfig, spec.get("context") or None, name, self._options.api
            )
        except (registry.RegistryError, ValueError) as error:
            written = self._status_written.get(name)
            if written is None or written.condition.get("message") != str(error):
                _log.warning("worker %s: %s", name, error)  # once, not every retry
            self._unusable.add(name)
            self._worker_settled.set()
            await self._write_conditions(
                name, connected=False, reason="InvalidKubeconfig", message=str(error)
            )
            return None
        worker = Worker(name, client, {}, identity, kinds={k.name: k for k in self._kinds})
        for kind in self._kinds:
            informer = Informer(
                client,
                Resource.of(kind.ref),
                label_selector=self._selector,
                transform=kind.slim_mirror,
                options=self._options.informer,
            )
            informer.add_handler(functools.partial(worker.track, kind))
            informer.add_handler(functools.partial(self._mirror_changed, kind.name))
            if self._event_sink is not None:
                informer.add_handler(
                    functools.partial(self._event_sink.mirror_changed, worker, kind)
                )
            worker.mirrors[kind.name] = informer
            informer.start()
        self._watch_capacity(worker)
        if self._event_sink is not None:
            self._watch_events(worker, self._event_sink)
        _log.info("worker %s: connecting to %s", name, client.server)
        await self._probe(worker)
        worker.probe_task = asyncio.get_running_loop().create_task(
            self._probe_loop(worker), name=f"probe-{name}"
        )
        return worker

    # -- health ----------------------------------------------------------------------

    def _follow_lost(self, name: str, registration: Mapping[str, Any]) -> None:
        """Declare a worker lost once its time is up (its workloads then move), and
        bring back every key it holds when that happens or when it answers again."""
        lost_in = self._lost_in(name, registration)
        lost = lost_in is not None and lost_in <= 0
        if lost == (name in self._declared_lost):
            return
        if lost:
            self._declared_lost.add(name)
            _log.warning(
                "worker %s: declared lost after %gs without a connection: its workloads move",
                name,
                self._options.lost_timeout,
            )
        else:
            self._declared_lost.discard(name)
            _log.info("worker %s: answers again after being declared lost", name)
        self._requeue_mirrors(name)

    def _requeue_mirrors(self, name: str) -> None:
        worker = self._workers.get(name)
        for key in worker.keys() if worker is not None else ():
            self._on_mirror_change(key)

    def _lost_time(self, name: str) -> str | None:
        """When the worker was declared lost (RFC 3339), if it is."""
        since = self._down_since.get(name)
        if name not in self._declared_lost or since is None:
            return None
        return _rfc3339(since + self._options.lost_timeout)

    async def _probe_loop(self, worker: Worker) -> None:
        """Probe every sixth of the health timeout; a changed verdict is written at once."""
        interval = self._options.health_timeout / 6
        seen = worker.verdict()
        while True:
            await asyncio.sleep(interval)
            await self._probe(worker)
            now = worker.verdict()
            # A new message alone waits for the next status refresh.
            if (now.connected, now.reason) != (seen.connected, seen.reason):
                _log.log(
                    logging.INFO if now.connected else logging.WARNING,
                    "worker %s: %s: %s",
                    worker.name,
                    now.reason,
                    now.message,
                )
                seen = now
                self._queue.add(worker.name)
                if now.connected:
                    # Back: its mirrors may be stale runs of workloads that moved, or
                    # hold news; every key it holds is looked at again.
                    self._down_since.pop(worker.name, None)
                    self._requeue_mirrors(worker.name)
                else:
                    # The lost timeout counts from here, not from whenever it is next asked.
                    self._down_since.setdefault(worker.name, time.time())

    async def _probe(self, worker: Worker) -> None:
        """GET /version, bounded by a third of the health timeout."""
        timeout = self._options.health_timeout / 3
        try:
            async with asyncio.timeout(timeout):
                version = await worker.client.version(timeout=timeout)
        except Exception as error:  # whatever it is, the worker did not answer
            worker.probe_error = error
            return
        worker.probe_error = None
        worker.last_contact = _now()
        git_version = version.get("gitVersion")
        if isinstance(git_version, str) and git_version:
            worker.kubernetes_version = git_version

    def _mirror_changed(self, kind: str, event: InformerEvent) -> None:
        self._on_mirror_change(WorkloadKey(kind, event.key))

    def _watch_events(self, worker: Worker, sink: WorkerEventSink) -> None:
        """Start the informer of its Warning Events, handed to ``sink``."""
        worker.events = Informer(
            worker.client,
            EVENTS,
            field_selector=WORKER_EVENT_FIELD_SELECTOR,
            transform=slim_event,
            options=self._options.informer,
        )
        worker.events.add_handler(functools.partial(sink.worker_event, worker))
        worker.events.start()

    # -- capacity ----------------------------------------------------------------------

    def _watch_capacity(self, worker: Worker) -> None:
        """Start the Node and Pod informers feeding ``worker``'s tracker."""
        name = worker.name
        worker.nodes = Informer(
            worker.client, NODES, transform=slim_node, options=self._options.informer
        )
        worker.pods = Informer(
            worker.client,
            PODS,
            field_selector=POD_FIELD_SELECTOR,
            transform=slim_pod,
            options=self._options.informer,
        )
        for informer, apply in (
            (worker.nodes, worker.node_changed),
            (worker.pods, worker.pod_changed),
        ):

            def handler(
                event: InformerEvent, apply: Callable[[InformerEvent], bool] = apply
            ) -> None:
                # While the first lists run, the one call once both have listed says it all.
                if apply(event) and worker.capacity_listed and self._workers.get(name) is worker:
                    self._capacity_changed(name)

            informer.add_handler(handler)
            informer.start()
        worker.capacity_task = asyncio.get_running_loop().create_task(
            self._capacity_listed(worker), name=f"capacity-{name}"
        )

    async def _capacity_listed(self, worker: Worker) -> None:
        """Once its Nodes and Pods have listed: tell the placement, publish the summary."""
        for informer in (worker.nodes, worker.pods):
            if informer is not None:
                await informer.wait_synced()
        _log.info(
            "worker %s: capacity known: %s",
            worker.name,
            worker.tracker.capacity().summary.columns(),
        )
        if self._workers.get(worker.name) is worker:
            self._capacity_changed(worker.name)
        self._queue.add(worker.name)

    def _capacity_changed(self, name: str) -> None:
        """Call ``on_capacity_change(name)`` at once, or at the end of the debounce window
        if it ran less than CAPACITY_DEBOUNCE ago; never twice within one window."""
        if self._on_capacity_change is None or name in self._capacity_call:
            return
        loop = asyncio.get_running_loop()
        told = self._capacity_told.get(name)
        delay = 0.0 if told is None else max(0.0, told + CAPACITY_DEBOUNCE - loop.time())
        self._capacity_call[name] = loop.call_later(delay, self._tell_capacity, name)

    def _tell_capacity(self, name: str) -> None:
        self._capacity_call.pop(name, None)
        self._capacity_told[name] = asyncio.get_running_loop().time()
        if self._on_capacity_change is not None and name in self._workers:
            self._on_capacity_change(name)

    def _capacity_status(
        self, name: str, worker: Worker | None, now: float
    ) -> dict[str, Any] | None:
        """The status.capacity to write now: when it changed, at most once per status
        interval; None when there is nothing new (or nothing known) to write."""
        if worker is None:
            return None
        error = worker.capacity_error
        if error is not None and error != worker.capacity_error_logged:
            _log.warning("worker %s: capacity not known: %s", name, error)
            worker.capacity_error_logged = error
        capacity = worker.capacity()
        if capacity is None:
            return None
        summary = capacity.summary.to_status()
        written = self._capacity_written.get(name)
        if written is not None and (
            written[0] == summary or now - written[1] < self._options.status_interval
        ):
            return None
        return summary

    async def _write_status(self, name: str, worker: Worker) -> None:
        verdict = worker.verdict()
        await self._write_conditions(
            name, connected=verdict.connected, reason=verdict.reason, message=verdict.message,
            active=worker.active_mirrors(), worker=worker,
        )  # fmt: skip

    async def _write_conditions(
        self,
        name: str,
        *,
        connected: bool,
        reason: str,
        message: str,
        active: int | None = None,
        worker: Worker | None = None,
    ) -> None:
        """Write the status on a change, and for a connected worker once a heartbeat."""
        fence = self._options.api.write_fence
        if fence is not None and not fence():
            return  # a standby writes nothing; once leading, the next refresh writes it
        wanted: dict[str, Any] = {
            "type": "Connected",
            "status": "True" if connected else "False",
            "reason": reason,
            "message": message,
        }
        version = worker.kubernetes_version if worker is not None else None
        lost_time = self._lost_time(name)
        registration = self._registrations.get(name) or {}
        # The spec (cordon, drain) this status reflects: a drain waits for this to catch up.
        generation = (registration.get("metadata") or {}).get("generation")
        generation = generation if isinstance(generation, int) else None
        now = asyncio.get_running_loop().time()
        previous = self._status_written.get(name)
        capacity = self._capacity_status(name, worker, now)
        if capacity is None and not health.needs_write(
            previous, wanted, active, version, now,
            lost_time=lost_time, observed_generation=generation,
        ):  # fmt: skip
            return
        existing = next(
            (
                c
                for c in (registration.get("status") or {}).get("conditions") or []
                if c.get("type") == "Connected"
            ),
            None,
        )
        transition = health.transition_time(existing, wanted["status"], _now())
        status: dict[str, Any] = {
            "conditions": [{**wanted, "lastTransitionTime": transition}],
            # Which manager's mirrors `jobrelay clusters remove` may delete there.
            "origin": self._options.origin,
        }
        if active is not None:
            status["activeMirrors"] = active
        if worker is not None and worker.last_contact:
            status["lastContactTime"] = worker.last_contact
        if version:
            status["kubernetesVersion"] = version
        # Null removes it from the stored status once the worker is back.
        status["lostTime"] = lost_time
        if generation is not None:
            status["observedGeneration"] = generation
        if capacity is not None:
            stored = (registration.get("status") or {}).get("capacity")
            status["capacity"] = _replacing(stored, capacity)
        try:
            await self._manager.patch(
                WORKER_CLUSTERS, name, {"status": status}, subresource="status"
            )
        except ApiError as error:
            if not error.is_not_found:
                _log.warning("worker %s: cannot write status: %s", name, error)
            return
        self._status_written[name] = health.Written(
            wanted, active, version, now, lost_time, generation
        )
        if capacity is not None:
            self._capacity_written[name] = (capacity, now)


async def _close_after(client: ApiClient, seconds: float) -> None:
    try:
        await asyncio.sleep(seconds)
    finally:
        await client.aclose()


def _replacing(old: Any, new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that turns ``old`` into ``new``: what ``new`` lacks is nulled (a
    resource the worker no longer has leaves the stored summary)."""
    patch: dict[str, Any] = {}
    old = old if isinstance(old, Mapping) else {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        patch[key] = _replacing(old.get(key), value) if isinstance(value, dict) else value
    return patch


def _finished(kind: WorkloadKind, mirror: dict[str, Any]) -> bool:
    """Whether a mirror has finished; one whose status cannot be read has not (a worker may
    answer anything, and the reconcile says so on the workload)."""
    try:
        return kind.is_finished(mirror)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        return False


def _now() -> str:
    return _rfc3339(time.time())


def _rfc3339(epoch_seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch_seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _silent_since(registration: Mapping[str, Any]) -> float | None:
    """When the stored Connected condition turned False (epoch seconds), if it is False."""
    status = registration.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") != "Connected" or condition.get("status") != "False":
            continue
        try:
            moment = datetime.datetime.fromisoformat(str(condition.get("lastTransitionTime")))
        except ValueError:
            return None
        return moment.timestamp()
    return None
