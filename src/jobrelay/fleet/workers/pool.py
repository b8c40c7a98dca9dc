"""The live pool of worker clusters: one record per registered worker.

The pool follows the manager's ``WorkerCluster`` objects and, when configured, selected
ClusterProfiles (definitions.py): a new or changed one is (re)connected from its
kubeconfig Secret or its profile's access provider (connection.py), a deleted one
is dropped with everything the pool knew of it (record.py). Each worker's
informers cache only the mirrors this controller created (label-selected), one
per configured workload kind, and report every change as the management
object's key, so the reconciler learns of mirror status changes without
polling. Its liveness (liveness.py), status (status_writer.py) and each fact read
through a connection (a feed: feed_base.py) have a module of their own; reading the
pool never changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobrelay.fleet import workerclusters
from jobrelay.fleet.cluster_profile_rules import ClusterProfileSettings
from jobrelay.fleet.workers.connection import (
    ClientFactory,
    Connector,
    client_from_kubeconfig,
    wait_listed,
)
from jobrelay.fleet.workers.definitions import WorkerDefinitions, WorkerView
from jobrelay.fleet.workers.feed_base import CopyChanged, FeedWiring
from jobrelay.fleet.workers.liveness import probe, run_probes
from jobrelay.fleet.workers.liveness_rules import ConnectedVerdict, LostClock
from jobrelay.fleet.workers.record import (
    Identity,
    MirrorEcho,
    Worker,
    WorkerEventSink,
    WorkerRecord,
)
from jobrelay.fleet.workers.status_writer import StatusWriter
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.queueing import WorkQueue, run_workers
from jobrelay.kube.watching import InformerEvent, InformerOptions
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import copy_selector, mirror_selector
from jobrelay.vocabulary.outcome import Done, QueueOutcome, RequeueAfter
from jobrelay.vocabulary.workercluster import WorkerClusterSpec

__all__ = ["PoolOptions", "WorkerPool", "WorkerView"]

_log = logging.getLogger(__name__)


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
    # Connections of each worker's own pool for users' streams (the logs API); 0: none,
    # they would share the pool of the probe and the informers.
    stream_connections: int = 0
    informer: InformerOptions = field(default_factory=InformerOptions)
    # Workers from the ClusterProfiles of a namespace too (--cluster-profiles); None: none.
    cluster_profiles: ClusterProfileSettings | None = None


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
        on_copy_change: CopyChanged | None = None,
        is_mirror_echo: MirrorEcho | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        self._kinds = list(kinds)
        # Which mirror events echo the relay's own writes (no look: record.py).
        self._is_mirror_echo = is_mirror_echo
        # Told of every change of a dependency copy on any worker (kind, namespace/name).
        self._on_copy_change = on_copy_change
        self._on_mirror_change = on_mirror_change
        self._on_capacity_change = on_capacity_change
        self._event_sink = event_sink
        self._options = options
        self._selector = mirror_selector(options.controller_name, options.origin)
        # Everything known of each registered worker, by name: dropped as a unit.
        self._records: dict[str, WorkerRecord] = {}
        # Each registration's name, spec and labels, read once per object (views() is
        # asked for every snapshot), by the object's id with the object kept.
        self._view_parts: dict[
            int, tuple[Mapping[str, Any], str, WorkerClusterSpec, Mapping[str, str]]
        ] = {}
        # Every worker's registration: WorkerClusters, and ClusterProfiles when configured.
        self._registrations = WorkerDefinitions.of(
            manager, options.informer, options.cluster_profiles, events
        )
        self._connector = Connector(
            manager,
            namespace=options.namespace,
            api=options.api,
            informer=options.informer,
            allow_exec_credentials=options.allow_exec_credentials,
            client_factory=client_factory,
            stream_connections=options.stream_connections,
            profiles=self._registrations.profiles,
        )
        self._status = StatusWriter(
            manager,
            origin=options.origin,
            status_interval=options.status_interval,
            write_fence=options.api.write_fence,
            profiles=self._registrations.profiles,
            conflict=self._registrations.conflict,
        )
        self._queue: WorkQueue[str] = WorkQueue()
        self._task: asyncio.Task[None] | None = None
        # Set whenever a worker joins the pool or its kubeconfig turns out unusable.
        self._worker_settled = asyncio.Event()

    # -- reading (never changes anything) ---------------------------------------------

    def get(self, name: str) -> Worker | None:
        record = self._records.get(name)
        return record.worker if record is not None else None

    def workers(self) -> list[Worker]:
        return [r.worker for r in self._records.values() if r.worker is not None]

    def registrations(self) -> list[dict[str, Any]]:
        """Every WorkerCluster as the manager holds it (spec and the status written), and
        every profile worker's registration (definitions.py)."""
        return self._registrations.values()

    def mirror_keys(self) -> set[WorkloadKey]:
        """Every cached mirror's key, on any worker (for a full resync)."""
        keys: set[WorkloadKey] = set()
        for record in self._records.values():
            keys.update(record.mirror_keys())
        return keys

    def has_mirror(self, key: WorkloadKey) -> bool:
        """Whether some worker's cache holds a mirror of ``key`` (cheap: one lookup a worker)."""
        return any(worker.mirror(key) is not None for worker in self.workers())

    def pods_counted(self, key: WorkloadKey) -> bool:
        """Whether some worker still counts pods of a run of ``key`` (under any UID, its
        mirror gone or not), or has not listed its pods yet: its room is not known free."""
        return any(
            worker.holds_pods_named(key.namespace, key.name) is not False
            for worker in self.workers()
        )

    def views(self) -> list[WorkerView]:
        """Every registered worker, connected or not, with how close it is to being lost."""
        now = time.time()
        views = []
        known, parts = self._view_parts, {}
        for registration in self._registrations.values():
            read = known.get(id(registration))
            if read is None or read[0] is not registration:
                meta = Meta(registration)
                read = (registration, meta.name, WorkerClusterSpec.of(registration),
                        dict(meta.labels))  # fmt: skip
            parts[id(registration)] = read
            _, name, spec, labels = read
            record = self._records.get(name)
            views.append(
                WorkerView(
                    name=name,
                    worker=record.worker if record is not None else None,
                    cordoned=spec.cordoned,
                    drain=spec.drain,
                    labels=labels,
                    lost_in=self._lost_in(record, registration, now),
                    autoscaling=spec.autoscaling,
                )
            )
        self._view_parts = parts
        return views

    def _lost_in(
        self, record: WorkerRecord | None, registration: Mapping[str, Any], now: float
    ) -> float | None:
        if record is None:  # not synced yet: still connecting, not timed
            return self._options.lost_timeout
        if record.connected:  # the common case, read for every snapshot: one verdict
            return None
        return record.lost.lost_in(
            connected=False, failing=record.failing, registration=registration, now=now
        )

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._registrations.add_handler(self._on_registration)
        self._connector.secrets.add_handler(self._on_secret)
        self._connector.secrets.start()
        self._registrations.start()
        await self._connector.secrets.wait_synced()
        await self._registrations.wait_synced()
        self._task = asyncio.get_running_loop().create_task(
            run_workers(self._queue, 2, self._sync, name="worker-pool"), name="worker-pool"
        )

    async def wait_connected(self, timeout: float) -> None:
        """Wait (bounded) until every registered worker has listed its mirrors once."""
        with contextlib.suppress(TimeoutError, RuntimeError):
            async with asyncio.timeout(timeout):
                for name in self._registrations.keys():  # noqa: SIM118 (an Informer, not a dict)
                    while (record := self._records.get(name)) is None or (
                        record.worker is None and not record.unusable
                    ):
                        self._worker_settled.clear()
                        await self._worker_settled.wait()
                    worker = record.worker
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
        await self._connector.secrets.stop()
        for record in self._records.values():
            record.drop()
            if record.worker is not None:
                await record.worker.close()
                record.worker = None
        self._records.clear()
        await self._connector.stop()

    def _on_registration(self, name: str) -> None:
        self._queue.add(name)

    def _on_secret(self, event: InformerEvent) -> None:
        for name in self._connector.using_secret(
            Meta(event.obj).name, self._registrations.values()
        ):
            self._queue.add(name)

    # -- keeping one worker current ------------------------------------------------

    async def _sync(self, name: str) -> QueueOutcome:
        registration = self._registrations.get(name)
        if registration is None:
            await self._forget(name)
            return Done()
        record = self._records.get(name)
        if record is None:
            record = self._records[name] = WorkerRecord(name, LostClock(self._options.lost_timeout))
        self._follow_lost(record, registration)
        spec = registration.get("spec") or {}
        identity = self._connector.identity(spec)
        current = record.worker
        # Autoscaling added or taken away: a new connection, with its requests' feed or not.
        wanted = (identity, bool(spec.get("autoscaling")))
        reconnect = current is None or (current.identity, current.autoscaled) != wanted
        if reconnect and not await self._reconnect(record, registration, identity):
            return RequeueAfter(self._options.status_interval)
        problem = self._registrations.health_problem(name)  # a ClusterProfile's conditions
        if record.worker is not None and problem != record.worker.reported_problem:
            record.worker.reported_problem = problem
            self._capacity_changed(record.worker)  # held workloads look again
        drain = WorkerClusterSpec.of(registration).drain
        if drain != record.drain:
            # A drain moves workloads that no event of theirs would bring back.
            record.drain = drain
            if drain:
                _log.info("worker %s: draining (%s)", name, drain)
                self._requeue_mirrors(record)
        # The lost clock follows what the status is about to say.
        self._observe(record, registration)
        await self._status.write_verdict(record, registration)
        return RequeueAfter(self._options.status_interval)

    async def _forget(self, name: str) -> None:
        """It was unregistered: drop its record, and retire its connection."""
        record = self._records.pop(name, None)
        if record is None:
            return
        record.drop()
        if record.worker is not None:
            _log.info("worker %s unregistered: disconnecting", name)
            worker, record.worker = record.worker, None
            await self._connector.retire(worker)

    async def _reconnect(
        self, record: WorkerRecord, registration: Mapping[str, Any], identity: Identity
    ) -> bool:
        """Build a new connection and put it in place of the current one (if any), once its
        caches have listed; False when the kubeconfig is unusable (no connection at all)."""
        name = record.name
        spec = registration.get("spec") or {}
        replacement = await self._connect(record, registration, spec, identity)
        current = record.worker
        if replacement is None:
            if current is not None:
                _log.info("worker %s: disconnecting", name)
                record.worker = None
                held = current.keys()
                await self._connector.retire(current)
                # Each workload it holds now waits for it to come back or to be
                # declared lost; without a cache, nothing else would bring them back.
                for key in held:
                    self._on_mirror_change(key)
            self._observe(record, registration)
            return False
        if current is None:
            self._add(record, replacement)
            await wait_listed(replacement, self._options.sync_timeout)
            return True
        # The old connection serves until the new caches have listed: a cache
        # seen empty would make its mirrors look vanished, and its workloads
        # look placeable elsewhere.
        _log.info("worker %s changed: reconnecting", name)
        try:
            await wait_listed(replacement, self._options.sync_timeout)
        except BaseException:  # stopped meanwhile: it is in no pool to be closed with
            await replacement.close()
            raise
        self._add(record, replacement)
        await self._connector.retire(current)
        # A change the new cache saw first may have been reconciled against the
        # old one: every key either knows is looked at again.
        for key in {*current.keys(), *replacement.keys()}:
            self._on_mirror_change(key)
        return True

    def _add(self, record: WorkerRecord, worker: Worker) -> None:
        record.worker = worker
        record.unusable = False
        record.drain = None  # a new connection has not acted on the drain yet
        self._worker_settled.set()

    async def _connect(
        self,
        record: WorkerRecord,
        registration: Mapping[str, Any],
        spec: Mapping[str, Any],
        identity: Identity,
    ) -> Worker | None:
        """A new connection (probed once), not yet in the pool; None when the kubeconfig
        is unusable (its status then says why)."""
        name = record.name
        try:
            client, stream_client = await self._connector.client(name, spec)
        except (workerclusters.RegistryError, ValueError) as error:
            written = record.status.written
            if written is None or written.condition.get("message") != str(error):
                _log.warning("worker %s: %s", name, error)  # once, not every retry
            record.unusable = True
            self._worker_settled.set()
            await self._status.write(
                record, registration, connected=False,
                reason=getattr(error, "reason", "InvalidKubeconfig"), message=str(error),
            )  # fmt: skip
            return None
        worker = Worker(name, client, identity, stream_client=stream_client,
                        autoscaled=bool(spec.get("autoscaling")))  # fmt: skip
        worker.watch_mirrors(
            self._kinds, self._selector, self._options.informer,
            self._on_mirror_change, self._event_sink, self._is_mirror_echo,
        )  # fmt: skip
        # Every fact of it (feed_base.py): capacity and the hops that tie pods to mirrors,
        # namespaces, our copies, claims. A change of one once listed may place a held
        # workload; its capacity listed, its status shows the summary.
        worker.start_feeds(
            FeedWiring(
                client, self._options.informer,
                changed=lambda: self._capacity_changed(worker),
                status_changed=lambda: self._queue.add(worker.name),
                copy_selector=copy_selector(self._options.controller_name, self._options.origin),
                copy_changed=self._on_copy_change,
                origin=self._options.origin,
                kinds=self._kinds,
            )
        )  # fmt: skip
        if self._event_sink is not None:
            worker.watch_events(self._event_sink, self._options.informer)
        _log.info("worker %s: connecting to %s", name, client.server)
        await probe(worker, self._options.health_timeout)
        worker.probe_task = asyncio.get_running_loop().create_task(
            run_probes(
                worker, self._options.health_timeout,
                changed=self._verdict_changed, probed=self._probed,
            ),
            name=f"probe-{name}",
        )  # fmt: skip
        return worker

    def _current(self, worker: Worker) -> WorkerRecord | None:
        """The record whose current connection is ``worker`` (None: it was replaced)."""
        record = self._records.get(worker.name)
        return record if record is not None and record.worker is worker else None

    # -- liveness ------------------------------------------------------------------

    def _observe(self, record: WorkerRecord, registration: Mapping[str, Any]) -> None:
        record.lost.observe(
            connected=record.connected, failing=record.failing,
            registration=registration, now=time.time(),
        )  # fmt: skip

    def _follow_lost(self, record: WorkerRecord, registration: Mapping[str, Any]) -> None:
        """Declare a worker lost once its time is up (its workloads then move), and
        bring back every key it holds when that happens or when it answers again."""
        declared = record.lost.follow(
            connected=record.connected, failing=record.failing,
            registration=registration, now=time.time(),
        )  # fmt: skip
        if declared is None:
            return
        if declared:
            _log.warning(
                "worker %s: declared lost after %gs without a connection: its workloads move",
                record.name,
                self._options.lost_timeout,
            )
        else:
            _log.info("worker %s: answers again after being declared lost", record.name)
        self._requeue_mirrors(record)

    def _verdict_changed(self, worker: Worker, verdict: ConnectedVerdict) -> None:
        """A probe saw its verdict change: its status is written at once."""
        self._queue.add(worker.name)
        record = self._records.get(worker.name)
        if record is None:
            return
        if verdict.connected:
            # Back: its mirrors may be stale runs of workloads that moved, or
            # hold news; every key it holds is looked at again.
            record.lost.back()
            self._requeue_mirrors(record)
        else:
            # The lost timeout counts from here, not from whenever it is next asked.
            record.lost.failed_at(time.time())

    def _probed(self, worker: Worker) -> None:
        record = self._current(worker)
        registration = self._registrations.get(worker.name)
        if record is not None and registration is not None:
            self._observe(record, registration)

    def _requeue_mirrors(self, record: WorkerRecord) -> None:
        for key in record.mirror_keys():
            self._on_mirror_change(key)

    # -- capacity --------------------------------------------------------------------

    def _capacity_changed(self, worker: Worker) -> None:
        """A fact of ``worker`` changed (its capacity, namespaces or claims): tell the
        placement, debounced (capacity_feed.py), while ``worker`` is current."""
        record = self._current(worker)
        if record is None or self._on_capacity_change is None:
            return
        record.capacity_calls.schedule(lambda: self._tell_capacity(record.name))

    def _tell_capacity(self, name: str) -> None:
        if self._on_capacity_change is not None and self.get(name) is not None:
            self._on_capacity_change(name)
