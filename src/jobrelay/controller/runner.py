"""Wires the controller together and runs it until told to stop.

Start-up is declared as two lists of runnables (controller/runnables.py): what
every replica runs (:meth:`Controller._every_replica`) and what only the leader
does (:meth:`Controller._leader_only`); a :class:`RunnableGroup` starts them in
order and stops them in reverse.

Start-up order matters for safety: each kind's management cache must be
synced before any key is reconciled (an unsynced cache would make every
mirror look orphaned), and workers get a bounded chance to list their mirrors
first (so that nothing is placed on the strength of an empty cache).

With leader election (the default) every replica starts its caches and the worker
pool, then campaigns for the Lease; only the leader runs the reconcile workers and the
resync, and every write of any replica passes a fence that opens only while it holds
the lease (controller-runtime's order: caches, election, the leader-only runnables).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal

from jobrelay.admission.workload_reads import slim_namespace
from jobrelay.controller import crd_checks
from jobrelay.controller.change_routing import ChangeRouting
from jobrelay.controller.copy_sweep import CopyJanitor
from jobrelay.controller.http_serving import ApiListener, ProbeListeners
from jobrelay.controller.http_serving import Listener as Listener
from jobrelay.controller.http_serving import listeners as listeners
from jobrelay.controller.instrument import Instruments
from jobrelay.controller.kind_resolution import ConfigurationError as ConfigurationError
from jobrelay.controller.kind_resolution import managed_by as managed_by
from jobrelay.controller.kind_resolution import resolve_kinds as resolve_kinds
from jobrelay.controller.leader_passes import known_keys, place_held, resync
from jobrelay.controller.lease_election import elector_for
from jobrelay.controller.options import ControllerOptions
from jobrelay.controller.origin_startup import with_settled_origin
from jobrelay.controller.readiness import CACHE_SYNC_BOUND, StartupCaches
from jobrelay.controller.relay.admission import Admission
from jobrelay.controller.relay.dependency_sources import DependencySources
from jobrelay.controller.relay.executor import Executor
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.controller.relay.reconciler import KindRuntime, Reconciler
from jobrelay.controller.runnables import (
    CacheRunnable,
    ListingRunnable,
    LoopRunnable,
    Runnable,
    RunnableGroup,
    StepsRunnable,
)
from jobrelay.controller.state_gauges import StateGauges
from jobrelay.fleet import workerclusters
from jobrelay.fleet.relayqueues import RelayQueueCache
from jobrelay.fleet.workerevents_relay import EventRelay
from jobrelay.fleet.workers import WorkerPool, client_from_kubeconfig
from jobrelay.kinds import WorkloadKey, WorkloadKind
from jobrelay.kinds.finish_times import mirror_still_kept
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.election.elector import LeadershipLost, new_identity
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.queueing import Lane, WorkQueue, run_workers
from jobrelay.kube.resources import NAMESPACES
from jobrelay.kube.watching import Informer
from jobrelay.observe.logging import loop_exception_handler
from jobrelay.observe.metrics import CONTENT_TYPE, MANAGER, ControllerState
from jobrelay.relayapi import serving as relayapi
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.managedby_webhook_rules import ManagedByDefault, managed_by_default
from jobrelay.relayapi.trust import FrontProxyTrust
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import ORIGIN_LABEL, origin_problem
from jobrelay.vocabulary.timestamps import utc_now
from jobrelay.web.probe_server import Health as Health

_log = logging.getLogger(__name__)


# Connections of a worker's pool of users' streams beyond its stream bound: the pod LISTs
# that start requests (brief; the stream bound already counts each follow's watch).
_STREAM_LIST_ROOM = 16


class Controller:
    """One running jobrelay: caches, queue, reconcilers; with an elector, leader or standby."""

    def __init__(
        self,
        manager: ApiClient,
        options: ControllerOptions,
        kinds: list[WorkloadKind],
        *,
        election_client: ApiClient | None = None,
        review_client: ApiClient | None = None,
        identity: str | None = None,
    ) -> None:
        if problem := origin_problem(options.origin):
            raise ConfigurationError(f"--origin: {problem}")
        self.options = options
        self.manager = manager
        self.identity = identity or new_identity()
        self.elector = elector_for(
            options, kinds, manager=manager, election_client=election_client,
            identity=self.identity,
        )  # fmt: skip
        self.synced = False
        self.startup = StartupCaches()  # the start-up caches, once run() declares them
        # Metrics: the manager's requests counted as "manager", each worker's by its name.
        self.instruments = Instruments(self.metrics_state)
        manager.on_request = self.instruments.manager_hook()
        manager.on_watch_restart = self.instruments.watch_hook(MANAGER)
        if election_client is not None:
            election_client.on_request = self.instruments.manager_hook()
        # The API's SubjectAccessReviews go through a client of their own (relayapi).
        self.review_client = review_client
        if review_client is not None:
            review_client.on_request = self.instruments.manager_hook()
        self.queue: WorkQueue[WorkloadKey] = WorkQueue(options.queue)
        self.kinds = {
            kind.name: KindRuntime(
                kind,
                Informer(
                    manager,
                    kind.ref,
                    transform=managed_by(
                        kind, options.kinds.claimed(kind.name, options.controller_name)
                    ),
                ),
            )
            for kind in kinds
        }
        # Namespaces carry the placement policy their admin set (annotations), and the
        # labels queues select them by.
        self.namespaces = Informer(manager, NAMESPACES, transform=slim_namespace)
        self.sources = DependencySources(
            manager, secret_namespaces=options.dependency_secret_namespaces
        )
        # Set when a worker's capacity changes: held workloads are looked at again.
        self.capacity_changed = asyncio.Event()
        # The fleet's queues (RelayQueues): a change may admit held workloads.
        self.queues = RelayQueueCache(
            manager, may_write=self.may_write, on_change=lambda: self.routing.queues_changed(),
            figures=lambda: self.queue_admission.figures(),
        )  # fmt: skip
        # Events name the replica that wrote them (reportingInstance).
        self.events = EventRecorder(manager, component="jobrelay", instance=self.identity)
        # Worker Events about mirrors and their pods, onto the management objects.
        self.worker_events = EventRelay(
            manager, self.events, kinds, local=self._local, may_write=self.may_write
        )
        self.worker_events.on_relayed = lambda worker, relayed, suppressed: (
            self.instruments.worker_events(worker, relayed=relayed, suppressed=suppressed)
        )
        self.pool = WorkerPool(
            manager,
            kinds,
            lambda key: self.routing.mirror_changed(key),
            # Workers' clients write (mirrors) only while this replica may.
            dataclasses.replace(
                options.workers,
                api=ApiOptions(write_fence=self.may_write),
                # Users' log streams get a pool of their own per worker (relayapi's
                # bound per worker, and room for the pod LISTs that start them).
                stream_connections=(
                    options.api.max_streams_per_worker + _STREAM_LIST_ROOM
                    if options.api.address
                    else 0
                ),
            ),
            on_capacity_change=lambda _name: self.capacity_changed.set(),
            event_sink=self.worker_events,
            client_factory=self._worker_client,
            events=self.events,
            on_copy_change=self.sources.copy_changed,
            is_mirror_echo=lambda worker, key, event: self.routing.is_mirror_echo(
                worker, key, event
            ),
        )
        relay = options.relay
        # What one reconcile leaves for the next (expectations, reservations, held ...).
        self.memory = memory = RelayMemory(requeue=self.queue.add)
        # Admission before placement: fleet-wide queues, the manager's ResourceQuotas.
        self.queue_admission = QueueAdmission.watching(
            manager, queues=self.queues, mirror_keys=self.pool.mirror_keys, memory=memory.queues
        )
        # A workload no admission pass has judged yet, a quota or priority changed: a pass.
        self.queue_admission.on_needed = self.capacity_changed.set
        executor = Executor(
            manager=manager,
            pool=self.pool,
            events=self.events,
            create_namespaces=relay.create_namespaces,
            rejected_retry=relay.rejected_retry,
            memory=memory,
            observer=self.instruments,
            origin=relay.origin,
            controller_name=relay.controller_name,
            manager_namespace_uid=self._namespace_uid,
        )
        self.reconciler = Reconciler(
            self.kinds,
            self.pool,
            executor,
            relay,
            manager=manager,
            memory=memory,
            admission=Admission(manager),
            sources=self.sources,
            queue_admission=self.queue_admission,
        )
        self.routing = ChangeRouting(
            kinds=self.kinds, queue=self.queue, pool=self.pool, memory=memory,
            sources=self.sources, queue_admission=self.queue_admission,
            reconciler=self.reconciler, instruments=self.instruments,
            capacity_changed=self.capacity_changed, may_write=self.may_write,
        )  # fmt: skip

    def _unrecorded(self, kind: str, key: str, worker: str) -> tuple[int, str] | None:
        """The mirror of ``key`` this replica created on ``worker``, while unrecorded."""
        found = self.memory.unrecorded(worker, WorkloadKey(kind, key))
        return None if found is None else (found.run, found.uid)

    def _namespace_uid(self, namespace: str) -> str | None:
        cached = self.namespaces.get(namespace)
        return (Meta(cached).uid or None) if cached is not None else None

    def _local(self, key: WorkloadKey) -> dict[str, Any] | None:
        runtime = self.kinds.get(key.kind)
        return runtime.objects.get(key.key) if runtime is not None else None

    def _worker_client(
        self, kubeconfig: Mapping[str, Any], context: str | None, name: str, api: ApiOptions
    ) -> ApiClient:
        client = client_from_kubeconfig(kubeconfig, context, name, api)
        client.on_request = self.instruments.request_hook()
        client.on_watch_restart = self.instruments.watch_hook()
        return client

    def metrics_state(self) -> ControllerState:
        """What the state gauges show, at each scrape (see controller/state_gauges.py)."""
        if self._state_gauges is None:
            self._state_gauges = StateGauges(
                kinds=self.kinds, queue=self.queue, memory=self.memory, pool=self.pool,
                leader=lambda: self.elector is None or self.elector.is_leader,
                ready=lambda: self.health().ready, queue_specs=self.queue_admission.specs,
                api=self._api,
            )  # fmt: skip
        return self._state_gauges()

    _state_gauges: StateGauges | None = None

    def may_write(self) -> bool:
        """The write fence: always without election, else only while holding the lease."""
        return self.elector is None or self.elector.holds_lease()

    def health(self) -> Health:
        """Ready once the start-up is done and every cache synced; else which cache waits
        and why (controller/readiness.py)."""
        waiting = self.startup.waiting()
        ready = self.synced and not waiting
        if self.elector is None:
            return Health("leader", ready, self.identity, self.identity, waiting)
        role: Literal["leader", "standby"] = "leader" if self.elector.is_leader else "standby"
        return Health(role, ready, self.elector.leader, self.identity, waiting)

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop``: the runnables of :meth:`_every_replica` in order, each waited
        on until synced (a cache at most CACHE_SYNC_BOUND); once every cache has synced,
        leading, those of :meth:`_leader_only`; every one started is stopped in reverse
        order (controller/runnables.py, controller/readiness.py)."""
        self._add_handlers()
        group = RunnableGroup(self._every_replica(), self._leader_only())
        elector = self.elector

        async def campaign(lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
            # Leading (or campaigning for it) only on complete caches.
            if not await self.startup.synced_or(stop):
                return
            if elector is None:
                await lead()
            else:
                await elector.run(stop, lead, on_stopped_leading=self._stopped_leading)

        await group.run(stop, on_synced=self._synced, campaign=campaign)

    def _add_handlers(self) -> None:
        """What the management caches' events set going (before they start)."""
        for name, runtime in self.kinds.items():
            runtime.objects.add_handler(self.routing.workload_handler(name))
            runtime.objects.add_handler(self.instruments.object_seen(runtime.kind))
        self.namespaces.add_handler(self.routing.namespace_changed)

    def _every_replica(self) -> list[Runnable]:
        """Leader and standby alike, in start order (stopped in reverse): the HTTP
        listeners; the one start-up write (the Lease's namespace), then the write fence;
        the Event recorder (closed last); the caches (each waited on for a bounded time;
        leading waits for all), each kind's first, the namespaces, the queue admission's,
        the RelayQueues', the dependency sources' (bounded); the worker Event relay; the
        worker pool (each worker given a bounded time to list its mirrors, so that nothing
        is placed on the strength of an empty cache)."""
        bound = self.options.workers.sync_timeout
        pool, sources = self.pool, self.sources
        self.startup = StartupCaches([
            *(CacheRunnable(f"{name} cache", r.objects, CACHE_SYNC_BOUND, (r.objects,))
              for name, r in self.kinds.items()),
            CacheRunnable("namespaces", self.namespaces, CACHE_SYNC_BOUND, (self.namespaces,)),
            CacheRunnable("queue admission", self.queue_admission, CACHE_SYNC_BOUND,
                          self.queue_admission.informers),
            CacheRunnable("relay queues", self.queues, CACHE_SYNC_BOUND, (self.queues,)),
        ])  # fmt: skip
        return [
            ProbeListeners(
                self.options.metrics_address, self.options.health_address, self.health,
                (self.instruments.metrics.render, CONTENT_TYPE),
            ),
            *self._api_listener(),
            StepsRunnable("write fence", on_start=self._fence),
            StepsRunnable("event recorder", on_stop=self.events.aclose),
            *self.startup.caches,
            ListingRunnable(
                "dependency sources", lambda: sources.start(self.queue.add, bound), sources.stop
            ),
            StepsRunnable(
                "worker event relay", on_start=lambda: self.worker_events.start(pool.workers),
                on_stop=self.worker_events.stop,
            ),
            StepsRunnable(
                "worker pool", on_start=pool.start,
                until_synced=lambda: pool.wait_connected(bound), on_stop=pool.stop,
            ),
        ]  # fmt: skip

    def _leader_only(self) -> list[Runnable]:
        """The leader's work, in start order: the start-up sweep, the reconcile workers
        (drained at a stop), the API registration (a standby's would be a write) and
        certificate, the resync, the copy janitor and the held pass. At a stop asked for (not a lost
        lease), the APIService goes once the workers have drained, then pending Events
        are written while the lease is still held."""
        api = bool(self.options.api.address) and self.options.api.register
        interval = self.options.gc_interval
        return [
            StepsRunnable("event flush", on_stop=self.events.aclose, stop_graceful_only=True),
            *([StepsRunnable("API deregistration", on_stop=self._deregister,
                             stop_graceful_only=True)] if api else []),
            StepsRunnable("start-up sweep", on_start=self._sweep),
            LoopRunnable("reconcile workers", self._reconcile, drain=self.queue.shutdown),
            *([LoopRunnable("API registration", self._register)] if api else []),
            *([LoopRunnable("API certificate", self._api.watch_over)] if self._api else []),
            LoopRunnable(
                "resync",
                lambda: resync(interval, self.kinds, self.pool, self.queue, self._mirror_kept),
            ),
            LoopRunnable(
                "copy janitor", CopyJanitor(self.pool, self.sources.referencing, self.kinds).run
            ),
            LoopRunnable(
                "held pass", lambda: place_held(self.capacity_changed, self.reconciler, self.queue)
            ),
        ]  # fmt: skip

    # The aggregated API's listener (--api-address; leader and standby alike).
    _api: ApiListener | None = None

    @property
    def api(self) -> relayapi.RunningApi | None:  # the aggregated API while it serves
        return self._api.running if self._api is not None else None

    def _mirror_kept(self, kind: WorkloadKind, obj: JsonObj) -> bool:
        """A finished workload's mirror kept for its logs: the resync leaves it be."""
        return mirror_still_kept(kind, obj, self.options.relay.finished_mirrors, utc_now())

    def _api_listener(self) -> list[Runnable]:
        settings = self.options.api
        if not settings.address:
            return []

        def handler(trust: FrontProxyTrust) -> RelayApi:
            return RelayApi(
                self.manager, self.pool, self.kinds, settings.limits,
                controller_name=self.options.controller_name, origin=self.options.origin,
                front_proxy=lambda: trust.current, queues=self.queues.objects,
                admission=self.queue_admission, unrecorded=self._unrecorded,
                reviewer=self.review_client, finished_mirrors=self.options.relay.finished_mirrors,
                defaults=self._defaults(),
            )  # fmt: skip

        self._api = ApiListener(self.manager, settings, handler, self.options.workers.namespace)
        return [self._api]

    async def _fence(self) -> None:
        # An idempotent start-up write every replica makes: the namespace the Lease
        # lives in. From here on, writes are fenced.
        await workerclusters.ensure_namespace(self.manager, self.options.workers.namespace)
        self.manager.write_fence = self.may_write

    def _synced(self) -> None:
        self.synced = True
        if self.startup.went_on_without():
            return
        workers = [f"{w.name}({'connected' if w.connected else 'not connected'})"
                   for w in self.pool.workers()]  # fmt: skip
        _log.info("caches synced: %s; workers: %s",
                  ", ".join(f"{len(r.objects)} {r.kind.ref.kind}" for r in self.kinds.values()),
                  ", ".join(workers) or "none registered", extra={"event": "synced"})  # fmt: skip

    def _sweep(self) -> None:
        """Leading: every known key is reconciled once, in the BACKGROUND lane (the watch
        events that filled the queue meanwhile keep their lanes: a key never moves down)."""
        for key in known_keys(self.kinds, self.pool):
            self.queue.add(key, Lane.BACKGROUND)
        _log.info(
            "jobrelay ready: %s%d keys queued",
            "leading; " if self.elector is not None else "",
            len(self.queue),
            extra={"event": "ready"},
        )

    async def _reconcile(self) -> None:
        reconcile = self.instruments.reconcile(self.reconciler.reconcile)
        await run_workers(self.queue, self.options.concurrency, reconcile, name="relay")

    def _defaults(self) -> list[ManagedByDefault]:
        """Each kind's managedBy default (the value it claims), for the webhook."""
        claimed = self.options.kinds.claimed
        name = self.options.controller_name
        return [managed_by_default(r.kind, claimed(r.kind.name, name)) for r in self.kinds.values()]

    async def _register(self) -> None:
        if self.api is not None:
            await relayapi.register(
                self.manager, self.options.workers.namespace, self.api, self._defaults(),
                self.options.api.webhook_failure_policy,
            )  # fmt: skip

    async def _deregister(self) -> None:
        if self.api is not None:
            await relayapi.deregister(self.manager, self.api)

    def _stopped_leading(self) -> None:
        # Lost (or released, when nothing is pending any more): what is still
        # queued must not be written.
        self.events.abandon()


async def run(
    manager: ApiClient,
    options: ControllerOptions,
    *,
    election_client: ApiClient | None = None,
    review_client: ApiClient | None = None,
) -> None:
    """Run until SIGTERM or SIGINT; raises LeadershipLost when the lease could not be renewed.

    ``election_client`` (a second client of the manager) carries the Lease
    requests, so that renewals never wait behind the controller's own;
    ``review_client`` (a third) the API's SubjectAccessReviews, so that a crowd of
    viewers never queues the informers' and the status writes' requests.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(loop_exception_handler)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await crd_checks.check_manager(manager, options)
        kinds = await resolve_kinds(manager, options)
        options = await with_settled_origin(manager, options)
        _log.info("origin %s: only mirrors labelled %s=%s are ours", options.origin,
                  ORIGIN_LABEL, options.origin, extra={"event": "origin"})  # fmt: skip
        controller = Controller(
            manager, options, kinds, election_client=election_client, review_client=review_client
        )
        await controller.run(stop)
    except LeadershipLost as lost:
        _log.error(
            "leadership lost: %s; stopped acting and exiting, so that a restart comes back "
            "as a standby",
            lost,
            extra={"event": "leadership-lost"},
        )
        raise
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)
        await manager.aclose()
        if election_client is not None:
            await election_client.aclose()
        if review_client is not None:
            await review_client.aclose()
        _log.info("stopped")
