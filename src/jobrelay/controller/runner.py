"""Wires the controller together and runs it until told to stop.

Start-up order matters for safety: each kind's management cache must be
synced before any key is reconciled (an unsynced cache would make every
mirror look orphaned), and workers get a bounded chance to list their mirrors
first (so that nothing is placed on the strength of an empty cache).

With leader election (the default) every replica starts its caches and the
worker pool, then campaigns for the Lease; only the leader runs the reconcile
workers and the resync, and every write of any replica passes a fence that
opens only while it holds the lease (controller-runtime's order: caches,
then election, then the leader-only runnables).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable, Mapping
from typing import Any, Literal

import jobrelay
from jobrelay.admission.workload_reads import slim_namespace
from jobrelay.controller.copy_sweep import sweep_orphan_copies
from jobrelay.controller.instrument import Instruments
from jobrelay.controller.kind_resolution import ConfigurationError as ConfigurationError
from jobrelay.controller.kind_resolution import managed_by as managed_by
from jobrelay.controller.kind_resolution import resolve_kinds as resolve_kinds
from jobrelay.controller.lanes import lane_of_change, resync_keys
from jobrelay.controller.options import ControllerOptions
from jobrelay.controller.relay.admission import Admission
from jobrelay.controller.relay.dependency_sources import DependencySources
from jobrelay.controller.relay.executor import Executor
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.controller.relay.reconciler import KindRuntime, Reconciler
from jobrelay.controller.state_gauges import StateGauges
from jobrelay.fleet import relayqueues, workerclusters
from jobrelay.fleet.relayqueues import RelayQueueCache
from jobrelay.fleet.workerevents_relay import EventRelay
from jobrelay.fleet.workers import WorkerPool, client_from_kubeconfig
from jobrelay.kinds import WorkloadKey, WorkloadKind
from jobrelay.kinds.claims import lease_entry
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.election.elector import Elector, LeadershipLost, new_identity
from jobrelay.kube.election.rules import ElectionTiming
from jobrelay.kube.errors import ApiError
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.queueing import Lane, WorkQueue, run_workers
from jobrelay.kube.resources import NAMESPACES, RELAY_QUEUES
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.observe.logging import loop_exception_handler
from jobrelay.observe.metrics import CONTENT_TYPE, MANAGER, ControllerState
from jobrelay.relayapi import serving as relayapi
from jobrelay.relayapi.handler import RelayApi
from jobrelay.relayapi.trust import FrontProxyTrust
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    KINDS_ANNOTATION,
    ORIGIN_LABEL,
    VERSION_ANNOTATION,
    origin_problem,
)
from jobrelay.web.probe_server import Health, HealthServer, parse_address

_log = logging.getLogger(__name__)


# The least time between two passes over the held workloads.
_HELD_PASS_INTERVAL = 1.0
# Connections of a worker's pool of users' streams beyond its stream bound: the pod LISTs
# that start requests (brief; the stream bound already counts each follow's watch).
_STREAM_LIST_ROOM = 16


# What one HTTP server serves: its flag, address, whether /metrics, the events it logs.
Listener = tuple[str, str, bool, tuple[str, ...]]


def listeners(metrics_address: str, health_address: str) -> list[Listener]:
    """The servers to start: probes and /metrics on the metrics address, probes on the
    health address; one address twice is one server, port 0 twice is two free ports."""
    shared = (
        bool(metrics_address)
        and health_address == metrics_address
        and parse_address(metrics_address)[1] != 0
    )
    wanted: list[Listener] = []
    if metrics_address:
        also = ("health-listening",) if shared else ()
        wanted.append(("--metrics-address", metrics_address, True, ("metrics-listening", *also)))
    if health_address and not shared:
        wanted.append(("--health-address", health_address, False, ("health-listening",)))
    return wanted


def election_timing(options: ControllerOptions) -> ElectionTiming:
    election = options.leader_election
    return ElectionTiming(election.lease_duration, election.renew_deadline, election.retry_period)


class Controller:
    """One running jobrelay: caches, queue, reconcilers; with an elector, leader or standby."""

    def __init__(
        self,
        manager: ApiClient,
        options: ControllerOptions,
        kinds: list[WorkloadKind],
        *,
        election_client: ApiClient | None = None,
        identity: str | None = None,
    ) -> None:
        if problem := origin_problem(options.origin):
            raise ConfigurationError(f"--origin: {problem}")
        self.options = options
        self.manager = manager
        self.identity = identity or new_identity()
        self.elector: Elector | None = None
        if options.leader_election.enabled:
            if election_client is None or election_client is manager:
                # The manager's client is fenced; the elector's must not be.
                raise ValueError("leader election needs a client of its own (election_client)")
            self.elector = Elector(
                election_client,
                namespace=options.workers.namespace,
                name=options.lease_name,
                identity=self.identity,
                timing=election_timing(options),
                annotations={
                    VERSION_ANNOTATION: jobrelay.__version__,
                    KINDS_ANNOTATION: ",".join(
                        lease_entry(
                            kind.name,
                            dict(options.kinds.managed_by).get(kind.name),
                            kind.managed_by_field,
                        )
                        for kind in kinds
                    ),
                },
            )
        self.synced = False
        # Metrics: the manager's requests counted as "manager", each worker's by its name.
        self.instruments = Instruments(self.metrics_state)
        manager.on_request = self.instruments.manager_hook()
        manager.on_watch_restart = self.instruments.watch_hook(MANAGER)
        if election_client is not None:
            election_client.on_request = self.instruments.manager_hook()
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
        self.sources = DependencySources(manager)
        # Set when a worker's capacity changes: held workloads are looked at again.
        self.capacity_changed = asyncio.Event()
        # The fleet's queues (RelayQueues): a change may admit held workloads.
        self.queues = RelayQueueCache(
            manager, may_write=self.may_write, on_change=self._queues_changed,
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
            self._mirror_changed,
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
            on_copy_change=self.sources.copy_changed,
        )
        relay = options.relay
        # What one reconcile leaves for the next (expectations, reservations, held ...).
        self.memory = memory = RelayMemory()
        # Admission before placement: fleet-wide queues, the manager's ResourceQuotas.
        self.queue_admission = QueueAdmission.watching(
            manager, queues=self.queues, mirrored=self.pool.has_mirror, memory=memory.queues
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

    def _enqueue(self, kind: str) -> Callable[[InformerEvent], None]:
        def enqueue(event: InformerEvent) -> None:
            key = WorkloadKey(kind, event.key)
            self.sources.workload_changed(key, self.kinds[kind].kind, event.new)
            if event.new is None:
                self.queue_admission.forget(key)
            if event.old is not None and self.queue_admission.released(
                self.kinds[kind].kind, event.old, event.new
            ):
                self.capacity_changed.set()  # its queue's usage and its namespace's quota freed
            mirrored = self.pool.has_mirror(key)
            lane = lane_of_change(self.kinds[kind].kind, event.old, event.new, mirrored=mirrored)
            self.queue.add(key, lane)

        return enqueue

    def _local(self, key: WorkloadKey) -> dict[str, Any] | None:
        runtime = self.kinds.get(key.kind)
        return runtime.objects.get(key.key) if runtime is not None else None

    def _mirror_changed(self, key: WorkloadKey) -> None:
        if self.may_write():  # a standby copies nothing: its clocks would only go stale
            self.instruments.mirror_changed(key)
        self.queue.add(key, Lane.STATUS)

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
                ready=lambda: self.synced,
            )  # fmt: skip
        return self._state_gauges()

    _state_gauges: StateGauges | None = None

    def may_write(self) -> bool:
        """The write fence: always without election, else only while holding the lease."""
        return self.elector is None or self.elector.holds_lease()

    def health(self) -> Health:
        if self.elector is None:
            return Health("leader", self.synced, self.identity, self.identity)
        role: Literal["leader", "standby"] = "leader" if self.elector.is_leader else "standby"
        return Health(role, self.synced, self.elector.leader, self.identity)

    async def run(self, stop: asyncio.Event) -> None:
        servers = await self._serve_http()
        try:
            await self._serve_api()
            await self._run(stop)
        finally:
            for server in servers:
                await server.close()
            if self.api is not None:
                await self.api.close()

    # Set by _serve_api when --api-address is given (leader and standby alike).
    api: relayapi.RunningApi | None = None

    async def _serve_api(self) -> None:
        settings = self.options.api
        if not settings.address:
            return

        def handler(trust: FrontProxyTrust) -> RelayApi:
            return RelayApi(
                self.manager, self.pool, self.kinds, settings.limits,
                controller_name=self.options.controller_name, origin=self.options.origin,
                front_proxy=lambda: trust.current, queues=self.queues.objects,
                queue_of=self.queue_admission.queue_of,
            )  # fmt: skip

        try:
            self.api = await relayapi.start_api(
                self.manager, settings, handler, namespace=self.options.workers.namespace
            )
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"--api-address {settings.address}: {error}") from error
        host, port = self.api.bound
        url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        _log.info("serving the aggregated API on %s", url,
                  extra={"event": "api-listening", "url": url})  # fmt: skip

    async def _run(self, stop: asyncio.Event) -> None:
        # An idempotent start-up write every replica makes: the namespace the Lease
        # lives in. From here on, writes are fenced.
        await workerclusters.ensure_namespace(self.manager, self.options.workers.namespace)
        self.manager.write_fence = self.may_write
        for name, runtime in self.kinds.items():
            runtime.objects.add_handler(self._enqueue(name))
            runtime.objects.add_handler(self.instruments.object_seen(runtime.kind))
            runtime.objects.start()
        self.namespaces.add_handler(self._namespace_changed)
        self.namespaces.start()
        self.queue_admission.start()
        self.queues.start()
        self.worker_events.start(self.pool.workers)
        await self.pool.start()
        try:
            for runtime in self.kinds.values():
                await runtime.objects.wait_synced()
            await self.namespaces.wait_synced()
            await self.queue_admission.wait_synced()
            await self.queues.wait_synced()
            await self.sources.start(self.queue.add, self.options.workers.sync_timeout)
            await self.pool.wait_connected(self.options.workers.sync_timeout)
            self.synced = True
            _log.info(
                "caches synced: %s; workers: %s",
                ", ".join(f"{len(r.objects)} {r.kind.ref.kind}" for r in self.kinds.values()),
                ", ".join(
                    f"{w.name}({'connected' if w.connected else 'not connected'})"
                    for w in self.pool.workers()
                )
                or "none registered",
                extra={"event": "synced"},
            )
            if self.elector is None:
                await self._lead(stop)
            else:
                await self.elector.run(stop, lambda: self._lead(stop), self._stopped_leading)
        finally:
            for runtime in self.kinds.values():
                await runtime.objects.stop()
            await self.namespaces.stop()
            await self.queue_admission.stop()
            await self.queues.stop()
            await self.sources.stop()
            await self.pool.stop()
            await self.worker_events.stop()
            await self.events.aclose()

    async def _lead(self, stop: asyncio.Event) -> None:
        """The leader's work: reconcile every known key, then whatever changes, until ``stop``.

        The start-up sweep is BACKGROUND: the watch events that filled the queue
        meanwhile keep their lanes (a key is never moved down)."""
        for key in self._known_keys():
            self.queue.add(key, Lane.BACKGROUND)
        _log.info(
            "jobrelay ready: %s%d keys queued",
            "leading; " if self.elector is not None else "",
            len(self.queue),
            extra={"event": "ready"},
        )
        async with asyncio.TaskGroup() as group:
            workers = group.create_task(
                run_workers(
                    self.queue,
                    self.options.concurrency,
                    self.instruments.reconcile(self.reconciler.reconcile),
                    name="relay",
                )
            )
            resync = group.create_task(self._resync())
            # Only the leader registers the API (a standby's would be a write).
            registering = (
                group.create_task(
                    relayapi.register(self.manager, self.options.workers.namespace, self.api)
                )
                if self.api is not None and self.options.api.register
                else None
            )
            held = group.create_task(self._place_held())
            await stop.wait()
            _log.info("stopping")
            self.queue.shutdown()
            resync.cancel()
            held.cancel()
            if registering is not None:
                registering.cancel()
            await workers
        if self.api is not None and self.options.api.register:
            await relayapi.deregister(self.manager, self.api)
        # Pending Events are written while this replica still holds the lease.
        await self.events.aclose()

    def _stopped_leading(self) -> None:
        # Lost (or released, when nothing is pending any more): what is still
        # queued must not be written.
        self.events.abandon()

    async def _serve_http(self) -> list[HealthServer]:
        """Probes and /metrics on --metrics-address, the probes on --health-address (one
        server when both name the same port); each logs where it listens."""
        servers: list[HealthServer] = []
        try:
            for flag, address, with_metrics, events in listeners(
                self.options.metrics_address, self.options.health_address
            ):
                page = (self.instruments.metrics.render, CONTENT_TYPE) if with_metrics else None
                server = HealthServer(address, self.health, page)
                try:
                    bound = await server.start()
                except OSError as error:
                    raise ConfigurationError(f"{flag} {address}: cannot listen: {error}") from error
                servers.append(server)
                routes = "/healthz, /readyz and /metrics" if page else "/healthz and /readyz"
                for event in events:
                    _log.info("serving %s on %s", routes, ", ".join(bound),
                              extra={"event": event, "addresses": bound})  # fmt: skip
        except BaseException:
            for server in servers:
                await server.close()
            raise
        return servers

    def _known_keys(self) -> set[WorkloadKey]:
        keys = {
            WorkloadKey(name, key)
            for name, runtime in self.kinds.items()
            for key in runtime.objects.keys()  # noqa: SIM118 (an Informer, not a dict)
        }
        keys.update(self.pool.mirror_keys())
        return keys

    def _namespace_changed(self, event: InformerEvent) -> None:
        namespace = event.key.rpartition("/")[2]
        obj = event.new
        annotations = None if obj is None else Meta(obj).annotations
        self.reconciler.policy_changed(namespace, annotations)
        self.queue_admission.namespace_changed(namespace, None if obj is None else Meta(obj).labels)
        # Its held workloads may now go somewhere (or must go elsewhere than planned).
        for key in self.reconciler.held():
            if key.namespace == namespace:
                self.queue.add(key, Lane.FRESH)  # a placement

    def _queues_changed(self) -> None:
        """A RelayQueue changed: a pass, and those held on a queue that did not exist or
        did not take their namespace are looked at again."""
        self.capacity_changed.set()
        for key in self.reconciler.held():
            if (self.memory.held(key) or "").startswith(("QueueNotFound|", "QueueNotAllowed|")):
                self.queue.add(key, Lane.FRESH)

    async def _place_held(self) -> None:
        """When a worker's capacity changes, queue the held workloads that would now be
        placed (oldest first, each taking its room before the next is judged) and those
        whose mirror has a pod its worker will not schedule (pending timeout); at most
        once per ``_HELD_PASS_INTERVAL``, so a busy fleet's churn costs one pass a second."""
        while True:
            await self.capacity_changed.wait()
            self.capacity_changed.clear()
            for key in self.reconciler.placeable_held():
                self.queue.add(key, Lane.FRESH)  # a placement
            # Placed already: a look at their pending timeout, not a placement (yet).
            for key in self.reconciler.unschedulable():
                self.queue.add(key, Lane.STATUS)
            await asyncio.sleep(_HELD_PASS_INTERVAL)

    async def _resync(self) -> None:
        """Reconcile, now and then and in the BACKGROUND lane, every key that could need
        work without a watch event (see :func:`lanes.resync_keys`), from the caches alone.

        Events drive everything; this bounds what a lost event could cost,
        e.g. how long an orphaned mirror can outlive its management object.
        """
        while True:
            await asyncio.sleep(self.options.gc_interval)
            for key in self._resync_keys():
                self.queue.add(key, Lane.BACKGROUND)
            await sweep_orphan_copies(self.pool)

    def _resync_keys(self) -> set[WorkloadKey]:
        objects = (
            (WorkloadKey(name, key), runtime.kind, obj)
            for name, runtime in self.kinds.items()
            for key in runtime.objects.keys()  # noqa: SIM118 (an Informer, not a dict)
            if (obj := runtime.objects.get(key)) is not None
        )
        return resync_keys(objects, self.pool.mirror_keys())


MISSING_QUEUE_CRD = (
    "the management cluster has no RelayQueue CRD (relayqueues.jobrelay.dev): install it "
    "with `kubectl apply --server-side -f charts/jobrelay/crds/` (the chart does), or run "
    "with --install-crds"
)
MISSING_CRD = (
    "the management cluster has no WorkerCluster CRD (workerclusters.jobrelay.dev): install "
    "it with `kubectl apply --server-side -f charts/jobrelay/crds/` (the chart does), or run "
    "with --install-crds"
)


async def ensure_crds(manager: ApiClient, options: ControllerOptions) -> None:
    """The CRDs the caches need (WorkerCluster, RelayQueue): applied with
    --install-crds, else checked."""
    try:
        if options.install_crds:
            await workerclusters.install_crd(manager)
            await workerclusters.install_crd(manager, manifest=relayqueues.crd_manifest())
        elif not await workerclusters.crd_served(manager):
            raise ConfigurationError(MISSING_CRD)
        elif not await workerclusters.crd_served(manager, RELAY_QUEUES):
            raise ConfigurationError(MISSING_QUEUE_CRD)
    except workerclusters.RegistryError as error:
        raise ConfigurationError(str(error)) from error
    except ApiError as error:
        if not (options.install_crds and error.code == 403):
            raise
        raise ConfigurationError(
            f"--install-crds: may not apply jobrelay's CRDs ({error.message}): apply "
            "charts/jobrelay/crds/ as a cluster admin and run without --install-crds"
        ) from error


async def run(
    manager: ApiClient, options: ControllerOptions, *, election_client: ApiClient | None = None
) -> None:
    """Run until SIGTERM or SIGINT; raises LeadershipLost when the lease could not be renewed.

    ``election_client`` (a second client of the manager) carries the Lease
    requests, so that renewals never wait behind the controller's own.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(loop_exception_handler)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await ensure_crds(manager, options)
        kinds = await resolve_kinds(manager, options)
        if not options.origin:
            try:
                origin = await workerclusters.default_origin(manager)
            except workerclusters.RegistryError as error:
                raise ConfigurationError(str(error)) from error
            options = dataclasses.replace(options, origin=origin)
        _log.info("origin %s: only mirrors labelled %s=%s are ours", options.origin,
                  ORIGIN_LABEL, options.origin, extra={"event": "origin"})  # fmt: skip
        controller = Controller(manager, options, kinds, election_client=election_client)
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
        _log.info("stopped")
