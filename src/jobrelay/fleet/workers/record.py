"""One record per registered worker, holding everything about it.

A :class:`WorkerRecord` lives from a ``WorkerCluster``'s first sync until it is
unregistered, and is dropped as a unit: its current connection (a
:class:`Worker`), its lost clock, its status clock and its capacity calls.

A :class:`Worker` is one connection to it and everything read through that
connection: the client, one mirror cache per kind, the probe's last answer,
its feeds (feed_base.py: capacity, owner hops, namespaces, our copies, claims) and the
Warning Event informer. A rotated kubeconfig builds a new one beside the old, which keeps
serving until the new caches have listed; the old one is then retired whole.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobrelay.fleet.workerevents_targets import WORKER_EVENT_FIELD_SELECTOR, slim_event
from jobrelay.fleet.workers.capacity_feed import CapacityCalls, CapacityFeed
from jobrelay.fleet.workers.claim_feed import ClaimFeed
from jobrelay.fleet.workers.dependency_feed import DependencyFeed
from jobrelay.fleet.workers.feed_base import FeedWiring, WorkerFeed
from jobrelay.fleet.workers.hop_feed import HopFeed
from jobrelay.fleet.workers.liveness_rules import (
    NOT_LISTED,
    ConnectedVerdict,
    LostClock,
    verdict,
)
from jobrelay.fleet.workers.namespace_feed import NamespaceFeed
from jobrelay.fleet.workers.provisioning_feed import ProvisioningFeed
from jobrelay.fleet.workers.status_rules import WorkerStatus
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import EVENTS
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.tracker import CapacityTracker, OwnedPods
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.workercluster import DrainMode

__all__ = ["Identity", "MirrorEcho", "Worker", "WorkerEventSink", "WorkerRecord"]

# What a connection was built from (Secret name, key, context, Secret resourceVersion):
# a change reconnects.
Identity = tuple[str, ...]

# Deleted mirrors remembered per worker: enough for every mirror of a busy worker
# deleted behind our back between two reconciles of its key.
_VANISHED_KEPT = 4096


# Whether a mirror's watch event on a worker (by name) echoes the relay's own write.
MirrorEcho = Callable[[str, WorkloadKey, InformerEvent], bool]


class WorkerEventSink(Protocol):
    """Told of every worker's Events and mirror changes (fleet/workerevents_relay.py)."""

    def worker_event(self, worker: Worker, event: InformerEvent) -> None: ...

    def mirror_changed(self, worker: Worker, kind: WorkloadKind, event: InformerEvent) -> None: ...


@dataclass
class Worker:
    """One connected (or connecting) worker cluster."""

    name: str
    client: ApiClient
    identity: Identity
    # One mirror cache per configured kind, by the kind's name.
    mirrors: dict[str, Informer] = field(default_factory=dict)
    # The last probe's failure (None: it answered, or no probe ran yet).
    probe_error: Exception | None = None
    # What its registration itself says is wrong (a ClusterProfile's ControlPlaneHealthy=False).
    reported_problem: str | None = None
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
    # Its feeds (feed_base.py), one per fact read through this connection, started and
    # stopped in this order by :meth:`feeds`: a new fact is one more field here.
    # Its Nodes and Pods, feeding its capacity tracker (capacity_feed.py).
    capacity_feed: CapacityFeed = field(init=False)
    # The objects its operators make from mirrors, feeding the same tracker (hop_feed.py).
    hop_feed: HopFeed = field(init=False)
    # Its namespaces and their origin labels (namespace_feed.py).
    namespace_feed: NamespaceFeed = field(init=False)
    # Our copies there of workloads' ConfigMaps, Secrets and ServiceAccounts.
    dependency_feed: DependencyFeed = field(init=False)
    # Its PersistentVolumeClaims and their phases (claim_feed.py), for placement by data.
    claim_feed: ClaimFeed = field(init=False)
    # jobrelay's ProvisioningRequests there (provisioning_feed.py): only when autoscaled.
    provisioning_feed: ProvisioningFeed = field(init=False)
    # Its Warning Events, slimmed, for the pool's event sink (fleet/workerevents_relay.py).
    events: Informer | None = None
    # The client of users' streams (logs API): a bounded pool of its own, so that the
    # probe and the informers never wait behind a user's follows. None: they share ``client``.
    stream_client: ApiClient | None = None
    # Its WorkerCluster has spec.autoscaling (its requests are watched); a change of that
    # makes a new connection (pool.py).
    autoscaled: bool = False

    def __post_init__(self) -> None:
        self.capacity_feed = CapacityFeed(self.name)
        self.hop_feed = HopFeed(self.name, self.capacity_feed.tracker)
        self.namespace_feed = NamespaceFeed(self.name)
        self.dependency_feed = DependencyFeed(self.name, self.namespace_feed)
        self.claim_feed = ClaimFeed(self.name)
        self.provisioning_feed = ProvisioningFeed(self.name, enabled=self.autoscaled)

    @property
    def streams(self) -> ApiClient:
        """The client users' streams go through."""
        return self.stream_client if self.stream_client is not None else self.client

    # -- starting its informers ----------------------------------------------------------

    def feeds(self) -> tuple[WorkerFeed, ...]:
        """Every fact read through this connection beside its mirrors and Events: each
        field that is a feed (feed_base.py), started in the order they are declared."""
        found = (getattr(self, f.name) for f in dataclasses.fields(self))
        return tuple(feed for feed in found if isinstance(feed, WorkerFeed))

    def start_feeds(self, wiring: FeedWiring) -> None:
        for feed in self.feeds():
            feed.start(wiring)

    def watch_mirrors(
        self,
        kinds: Sequence[WorkloadKind],
        selector: str,
        options: InformerOptions,
        changed: Callable[[WorkloadKey], None],
        sink: WorkerEventSink | None,
        is_echo: MirrorEcho | None = None,
    ) -> None:
        """Start one mirror cache per kind; ``changed(key)`` on every change but the
        echoes of the relay's own writes (``is_echo``), which the writer acted on."""
        for kind in kinds:
            informer = Informer(
                self.client,
                kind.ref,
                label_selector=selector,
                transform=kind.cached_mirror,
                options=options,
            )
            informer.add_handler(functools.partial(self.track, kind))
            informer.add_handler(
                functools.partial(_tell_key, changed, kind.name, self.name, is_echo)
            )
            if sink is not None:
                informer.add_handler(functools.partial(sink.mirror_changed, self, kind))
            self.mirrors[kind.name] = informer
            informer.start()

    def watch_events(self, sink: WorkerEventSink, options: InformerOptions) -> None:
        """Start the informer of its Warning Events, handed to ``sink``."""
        self.events = Informer(
            self.client,
            EVENTS,
            field_selector=WORKER_EVENT_FIELD_SELECTOR,
            transform=slim_event,
            options=options,
        )
        self.events.add_handler(functools.partial(sink.worker_event, self))
        self.events.start()

    # -- its mirrors -------------------------------------------------------------------

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

    async def wait_synced(self) -> None:
        for informer in self.mirrors.values():
            await informer.wait_synced()

    def listed_or_failed(self) -> bool:
        """Each mirror cache has listed or failed (no rights, no such kind there)."""
        return all(i.has_synced or i.last_error is not None for i in self.mirrors.values())

    # -- whether it is connected ---------------------------------------------------------

    @property
    def connected(self) -> bool:
        """The worker answers its probe and at least one kind's mirrors are listed and watched.

        A kind a worker does not serve (its CRD is missing there) makes that
        worker no candidate for that kind only; its other kinds still flow.
        """
        return self.verdict().connected

    def verdict(self) -> ConnectedVerdict:
        """Its Connected condition now, from the last probe and its informers."""
        return verdict(
            self.probe_error,
            {kind: (i.has_synced, i.last_error) for kind, i in self.mirrors.items()},
            self.client.server,
            self.reported_problem,
        )

    # -- its capacity (capacity_feed.py) -----------------------------------------------------

    def capacity(self) -> WorkerCapacity | None:
        """Its nodes and what is requested on each; None until both its Nodes and Pods
        have listed (or when it forbids listing them: ``capacity_error`` says why)."""
        return self.capacity_feed.capacity()

    @property
    def capacity_error(self) -> str | None:
        return self.capacity_feed.error

    @property
    def capacity_forbidden(self) -> bool:
        return self.capacity_feed.forbidden

    def pods_of(self, namespace: str, name: str) -> OwnedPods | None:
        """The unfinished pods of the mirror ``namespace/name`` cached here: only those its
        UID owns count, or a hop's it controls (see placement.tracker.pod_owners); none
        while no mirror is."""
        key = f"{namespace}/{name}"
        for informer in self.mirrors.values():
            mirror = informer.get(key)
            if mirror is not None:
                return self.capacity_feed.pods_of(namespace, name, Meta(mirror).uid)
        return self.capacity_feed.pods_of(namespace, name, "")

    @property
    def bindings_version(self) -> int:
        """Moves whenever which pods are bound here, or whose they are, changes."""
        return self.capacity_feed.tracker.bindings_version

    def rebound_since(self, version: int) -> set[tuple[str, str]] | None:
        """The (namespace, name) of the workloads whose pod bindings here moved after
        ``version`` (None: too long ago to say)."""
        return self.capacity_feed.tracker.rebound_since(version)

    def holds_pods_named(self, namespace: str, name: str) -> bool | None:
        """Whether pods of a run of ``namespace/name`` are still cached here, its mirror
        gone or not (None: its Pods have not listed)."""
        return self.capacity_feed.holds_pods_named(namespace, name)

    @property
    def tracker(self) -> CapacityTracker:
        return self.capacity_feed.tracker

    @property
    def pods(self) -> Informer | None:
        return self.capacity_feed.pods

    # -- retiring it ---------------------------------------------------------------------

    async def stop_watching(self) -> None:
        """Stop its probe and its informers (the client stays usable)."""
        task, self.probe_task = self.probe_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for feed in self.feeds():
            await feed.stop()
        for informer in (*self.mirrors.values(), self.events):
            if informer is not None:
                await informer.stop()

    async def close(self) -> None:
        await self.stop_watching()
        await self.close_clients()

    async def close_clients(self) -> None:
        """Close its clients (the users' streams through them end)."""
        if self.stream_client is not None:
            await self.stream_client.aclose()
        await self.client.aclose()


@dataclass
class WorkerRecord:
    """Everything the pool knows of one registered worker, created and dropped as a unit."""

    name: str
    lost: LostClock
    # Its current connection; None while none could be made from its kubeconfig.
    worker: Worker | None = None
    # Its last connection attempt found no usable kubeconfig.
    unusable: bool = False
    status: WorkerStatus = field(default_factory=WorkerStatus)
    capacity_calls: CapacityCalls = field(default_factory=CapacityCalls)
    # The spec.drain last acted on: a new drain brings back every key it holds.
    drain: DrainMode | None = None

    @property
    def connected(self) -> bool:
        return self.worker is not None and self.worker.connected

    @property
    def failing(self) -> bool:
        """Not connected and not merely still connecting (or listing): timed for being lost."""
        if self.worker is None:
            return self.unusable
        return self.worker.verdict().reason != NOT_LISTED

    def mirror_keys(self) -> list[WorkloadKey]:
        """The key of every mirror its current connection caches."""
        return self.worker.keys() if self.worker is not None else []

    def drop(self) -> None:
        """It left the pool: nothing of it may run later (its connection is retired apart)."""
        self.capacity_calls.cancel()


def _tell_key(
    changed: Callable[[WorkloadKey], None],
    kind: str,
    worker: str,
    is_echo: MirrorEcho | None,
    event: InformerEvent,
) -> None:
    key = WorkloadKey(kind, event.key)
    if is_echo is None or not is_echo(worker, key, event):
        changed(key)


def _finished(kind: WorkloadKind, mirror: dict[str, Any]) -> bool:
    """Whether a mirror has finished; one whose status cannot be read has not (a worker may
    answer anything, and the reconcile says so on the workload)."""
    try:
        return kind.is_finished(mirror)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        return False
