"""One reconcile: snapshot → decide → act, until the decision settles.

The only code between the caches and the pure decision. Each round it first
forgets what the caches now confirm (the relay's memory: creates they show,
reservations no longer needed), then builds a read-only snapshot (caches,
memory, the time), decides, applies the plan through the executor and
remembers what it said; it reads afresh when the decision asks for it (the
object, a namesake on every worker, the manager's admission: its own small
collaborator, controller/relay/admission.py). Fleet-wide queues and the manager's
ResourceQuotas are read from the last admission plan (controller/relay/
queue_admission.py): the snapshot only reads it; a decision to place a workload
they bound marks it being placed, and one that waits for a pass wakes the pass. The
outcome goes to the work queue as it stands (jobrelay.vocabulary.outcome); a terminal
problem reaches the user as a Warning Event on the object, not only as a log line.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from typing import Any

from jobrelay.admission.planner import ClustersFor
from jobrelay.admission.workload_reads import fleet_of, preset_placement
from jobrelay.controller.relay.admission import Admission
from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.dependency_sources import DependencySources
from jobrelay.controller.relay.executor import Collided, Executor
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.plan import CreateMirror, Outcome, Place, Plan, ReadFresh, Retry
from jobrelay.controller.relay.provisioning_view import provisioning_fields
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.controller.relay.snapshot import (
    Needed,
    QueueHold,
    Settings,
    Snapshot,
    WorkerSnapshot,
    placement_cluster,
)
from jobrelay.controller.relay.steps.mirror_record import awaiting_record
from jobrelay.dependencies.copy_rules import Copy, copy_of
from jobrelay.fleet.workers import Worker, WorkerPool, WorkerView
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.finish_times import finished_for
from jobrelay.kinds.mirrors import is_mirror_of
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import Informer
from jobrelay.placement.held import Room
from jobrelay.placement.workload import Invalid, Workload
from jobrelay.vocabulary.failure_ages import worker_failure_ages
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.outcome import Done, Lane, QueueOutcome, RequeueAfter, Terminal
from jobrelay.vocabulary.placement import placement_of
from jobrelay.vocabulary.timestamps import seconds_since, utc_now

_log = logging.getLogger(__name__)

# A decision settles in at most: read fresh, admission, probe, act. More means a bug.
_MAX_ROUNDS = 6


@dataclasses.dataclass(frozen=True)
class KindRuntime:
    """A configured kind with its management-cluster cache."""

    kind: WorkloadKind
    objects: Informer


class Reconciler:
    """Reconciles keys, each on its own (many run at once): see the module doc."""

    def __init__(
        self,
        kinds: Mapping[str, KindRuntime],
        pool: WorkerPool,
        executor: Executor,
        settings: Settings,
        *,
        manager: ApiClient,
        memory: RelayMemory,
        admission: Admission,
        clock: Callable[[], str] = utc_now,
        sources: DependencySources | None = None,
        queue_admission: QueueAdmission | None = None,
    ) -> None:
        self._kinds = kinds
        self._pool = pool
        self._executor = executor
        self._settings = settings
        self._manager = manager
        self._memory = memory
        self._admission = admission
        self._clock = clock
        # The manager's ConfigMaps, Secrets and ServiceAccounts (None: not judged).
        self._sources = sources
        # Fleet-wide queues and the manager's ResourceQuotas (None: every workload is
        # placed as it comes, as in tests of other rules).
        self.queue_admission = queue_admission

    # -- what the runner feeds in ------------------------------------------------------

    def held(self) -> list[WorkloadKey]:
        """The workloads waiting unplaced, the longest-waiting first."""
        return self._memory.held_keys()

    def policy_changed(self, namespace: str, annotations: Mapping[str, str] | None) -> None:
        """A namespace's annotations changed (None: it is gone)."""
        self._admission.namespace_changed(namespace)
        self._memory.policy_changed(namespace, annotations)

    async def reconcile(self, key: WorkloadKey) -> QueueOutcome:
        """Bring one management object and its mirrors in line; the queue's next step."""
        runtime = self._kinds.get(key.kind)
        if runtime is None:
            return Done()  # a kind no longer configured
        outcome = await self._settle(key, runtime)
        if self.queue_admission is not None and self._memory.held(key) is not None:
            self.queue_admission.not_placed(key)  # it takes no quota while it waits
        match outcome:
            case ReadFresh():
                return Retry("the decision asked for fresh reads without end")
            case RequeueAfter(seconds=seconds) if self._memory.held(key) is not None:
                # Held unplaced: capacity changes bring it back at once when it fits
                # (the runner's held passes); the periodic retry is only a backstop.
                return RequeueAfter(seconds, Lane.BACKGROUND)
            case Terminal():
                self._executor.report(key, runtime.objects.get(key.key), outcome)
        return outcome

    async def _settle(self, key: WorkloadKey, runtime: KindRuntime) -> Outcome:
        """Decide and act until the decision settles: an outcome for the queue, not one
        that asks for fresher input first."""
        snapshot = self._look(key, runtime)
        for _ in range(_MAX_ROUNDS):
            plan = decide(snapshot)
            changed = self._admit(key, runtime.kind, snapshot, plan)
            if changed is not None:
                # Another reconcile took what it was admitted to meanwhile: decide again.
                snapshot = dataclasses.replace(snapshot, queue_hold=changed)
                continue
            self._memory.remember(key, plan)
            stopped = await self._executor.apply(key, runtime.kind, snapshot.obj, plan)
            if isinstance(stopped, Collided):
                read = await self._read_remote(runtime.kind, key, stopped.cluster)
                snapshot = self._with_reads(
                    self._look(key, runtime, like=snapshot), {stopped.cluster: read}
                )
                # The object as it now stands: neither the cache nor an earlier read
                # shows the placement this plan may have just written.
                snapshot = dataclasses.replace(
                    snapshot, obj=await self._read_local(runtime, key), fresh=True
                )
                continue
            if stopped is not None:
                return stopped
            outcome = plan.outcome
            if not isinstance(outcome, ReadFresh):
                return outcome
            if outcome.admission and snapshot.obj is not None:
                verdict = await self._admission.verdict(runtime.kind, snapshot.obj)
                snapshot = dataclasses.replace(snapshot, admission=verdict)
            # Taken after any wait above: concurrent placements made meanwhile count in
            # the workers' loads (their reservations), so a burst spreads.
            snapshot = self._look(key, runtime, like=snapshot)
            if outcome.obj:
                snapshot = dataclasses.replace(
                    snapshot, obj=await self._read_local(runtime, key), fresh=True
                )
            if outcome.probe:
                reads = {}
                for worker in snapshot.workers:
                    if not worker.connected:
                        continue
                    try:
                        reads[worker.name] = await self._read_remote(runtime.kind, key, worker.name)
                    except ApiError as error:
                        # Unknown is not foreign: that worker stays a candidate, and a create
                        # there that collides starts this again.
                        _log.info("%s: cannot read it on %s: %s", key, worker.name, error)
                snapshot = dataclasses.replace(self._with_reads(snapshot, reads), probed=True)
        return Retry("the decision did not settle")

    def unschedulable(self) -> list[WorkloadKey]:
        """The workloads whose mirror has a pod its worker will not schedule or run."""
        keys = []
        for worker in self._pool.workers():
            for namespace, name, uid in worker.tracker.unschedulable():
                for kind in self._kinds:
                    key = WorkloadKey(kind, f"{namespace}/{name}")
                    mirror = worker.mirror(key)
                    if mirror is not None and Meta(mirror).uid == uid:  # its pods, by UID
                        keys.append(key)
        return keys

    def placeable_held(self) -> list[WorkloadKey]:
        """The held workloads that would be placed now, in the order to place them.

        One admission pass (controller/relay/queue_admission.py): the queued workloads
        across queues in their fair order, then the unqueued held ones oldest first; each fits
        only if placement would place it now, taking its room before the next is judged
        (:class:`placement.held.Room`). The workers are seen as a reconcile's decision
        sees them (a worker is connected for a kind once that kind's mirror cache has
        listed), so one room per kind."""
        held = self._memory.held_keys()
        views = self._pool.views()
        self._memory.forget_confirmed((), self._with_capacity(v.worker for v in views))
        capacities = [self._capacity_of(view.worker, None) for view in views]
        rooms: dict[str, Room] = {}

        def room_of(kind: str) -> Room:
            room = rooms.get(kind)
            if room is None:
                room = rooms[kind] = Room(
                    [
                        placement_cluster(self._worker_snapshot(view, kind, capacity))
                        for view, capacity in zip(views, capacities, strict=True)
                    ]
                )
            return room

        def fits(key: WorkloadKey, workload: Workload) -> bool:
            policy = self._memory.policy(key.namespace)
            if isinstance(policy, Invalid):
                return False
            return room_of(key.kind).take(key, workload, policy)

        def could_take(key: WorkloadKey, workload: Workload) -> Collection[str]:
            policy = self._memory.policy(key.namespace)
            return (
                ()
                if isinstance(policy, Invalid)
                else room_of(key.kind).could_take(workload, policy)
            )

        def room() -> tuple[Mapping[str, Mapping[str, int]], ClustersFor]:
            """The clusters' room after this pass's takings (the least of any kind's)."""
            free: dict[str, dict[str, int]] = {}
            for each in list(rooms.values()) or [room_of(next(iter(self._kinds)))]:
                for cluster, values in each.free().items():
                    mine = free.setdefault(cluster, dict(values))
                    for resource, value in values.items():
                        mine[resource] = min(mine.get(resource, value), value)
            return free, could_take

        if self.queue_admission is None or self.queue_admission.idle():
            return [key for key, workload in self._held_workloads(held) if fits(key, workload)]
        fleet = fleet_of(
            capacity["capacity"]
            for view, capacity in zip(views, capacities, strict=True)
            if view.connected and not view.cordoned and not view.lost and "capacity" in capacity
        )
        caches = ((name, runtime.kind, runtime.objects) for name, runtime in self._kinds.items())
        still_held = self._pool.pods_counted  # a requeued victim's room: not free yet
        return self.queue_admission.run_pass(caches, held, fits, fleet, room, still_held)

    def _held_workloads(self, held: list[WorkloadKey]) -> list[tuple[WorkloadKey, Workload]]:
        """The held workloads placement can read, as it reads them."""
        found = []
        for key in held:
            runtime = self._kinds.get(key.kind)
            obj = runtime.objects.get(key.key) if runtime is not None else None
            if runtime is None or obj is None:
                continue
            workload = self._memory.held_workload(key, runtime.kind, obj)
            if workload is not None:
                found.append((key, workload))
        return found

    def _bound(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None) -> bool:
        """Whether admission judges the workload: before its first placement only (a
        preset placement is none: judged before its first mirror is created)."""
        if obj is None or (placement_of(obj) and not preset_placement(obj)) or Meta(obj).deleting:
            return False
        finished = kind.is_finished(obj) or kind.is_suspended(obj)
        return not finished and not self._pool.has_mirror(key)

    def _queue_hold(
        self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None
    ) -> QueueHold | None:
        """What fleet-wide queues and the namespace's quotas say of a workload before its
        first placement, from the last admission plan (None for any other)."""
        if self.queue_admission is None or obj is None or not self._bound(key, kind, obj):
            return None
        return self.queue_admission.verdict(key, kind, obj)

    def _admit(
        self, key: WorkloadKey, kind: WorkloadKind, snapshot: Snapshot, plan: Plan
    ) -> QueueHold | None:
        """Act on admission's part of ``plan``: a workload that waits for a pass wakes it;
        one the plan places is marked being placed, its verdict checked again in the
        same step (None: go on; a hold: it may not be placed after all)."""
        gate, obj = self.queue_admission, snapshot.obj
        if gate is None or obj is None:
            return None
        hold = snapshot.queue_hold
        if hold is not None and not hold.settled:
            gate.needed()
        if not any(isinstance(action, Place | CreateMirror) for action in plan.actions):
            return None
        if not self._bound(key, kind, obj):
            return None
        return gate.admit(key, kind, obj)

    # -- the snapshot -----------------------------------------------------------

    def _look(
        self, key: WorkloadKey, runtime: KindRuntime, *, like: Snapshot | None = None
    ) -> Snapshot:
        """Forget what the caches now confirm, then take a snapshot."""
        obj = like.obj if like is not None and like.fresh else runtime.objects.get(key.key)
        uid = str(((obj or {}).get("metadata") or {}).get("uid"))
        creates_seen: list[Hashable] = []
        workers = self._pool.workers()
        if obj is not None:
            for worker in workers:
                mirror = worker.mirror(key)
                if mirror is not None and is_mirror_of(
                    mirror, obj, self._settings.controller_name, self._settings.origin
                ):
                    creates_seen.append((worker.name, key, uid))
        self._memory.forget_confirmed(creates_seen, self._with_capacity(workers))
        if self._memory.has_unrecorded(key):  # most keys have none: nothing parsed then
            self._memory.forget_unrecorded(key, awaiting_record(runtime.kind, obj))
        return self.snapshot(key, runtime, like=like)

    @staticmethod
    def _with_capacity(workers: Iterable[Worker | None]) -> list[Worker]:
        """The workers whose capacity is known: only their reservations take room."""
        return [w for w in workers if w is not None and w.capacity() is not None]

    def snapshot(
        self, key: WorkloadKey, runtime: KindRuntime, *, like: Snapshot | None = None
    ) -> Snapshot:
        """What the caches and the memory say now (changing neither); ``like`` carries
        over fresh reads made this reconcile."""
        obj = like.obj if like is not None and like.fresh else runtime.objects.get(key.key)
        memory, now = self._memory, self._clock()
        namespace = key.namespace  # a partition of the key each time it is asked
        uid = str(((obj or {}).get("metadata") or {}).get("uid"))
        workers = []
        deleting = set()
        needed = self._needed(runtime.kind, obj)
        for view in self._pool.views():
            worker = view.worker
            mirror = worker.mirror(key) if worker is not None else None
            if mirror is not None:
                mirror_uid = str((mirror.get("metadata") or {}).get("uid"))
                if memory.deleted.pending(mirror_uid):
                    deleting.add(mirror_uid)
            previous = like.worker(view.name) if like is not None else None
            workers.append(
                self._worker_snapshot(
                    view,
                    key.kind,
                    self._capacity_of(worker, key) | provisioning_fields(view, key),
                    mirror=mirror,
                    read=previous.read if previous is not None else None,
                    read_done=previous.read_done if previous is not None else False,
                    create_pending=memory.created.pending((view.name, key, uid)),
                    unrecorded=memory.unrecorded(view.name, key),
                    vanished=worker.vanished.get(key) if worker is not None else None,
                    **self._copies_on(view.name, worker, namespace, needed),
                )
            )
        return Snapshot(
            key=key,
            kind=runtime.kind,
            settings=self._settings,
            obj=obj,
            workers=tuple(workers),
            now=now,
            finished_for=finished_for(runtime.kind, obj, now),
            failure_ages=worker_failure_ages(obj, now),
            fresh=like.fresh if like is not None else False,
            deleting=frozenset(deleting),
            probed=like.probed if like is not None else False,
            admission=like.admission if like is not None else None,
            policy=memory.policy(namespace),
            held=memory.held(key),
            leaving=memory.leaving(key),
            batching_for=memory.batching_for(key),
            dependencies=needed,
            dependencies_listed=not needed or self._sources is None or self._sources.listed,
            queue_hold=self._queue_hold(key, runtime.kind, obj),
            preempt=self.queue_admission.preemption(key) if self.queue_admission else None,
            told_preempted=memory.told_preempted(key),
        )

    def _needed(self, kind: WorkloadKind, obj: JsonObj | None) -> tuple[Needed, ...] | None:
        """What the workload's pods need in their namespace, as the manager has it."""
        if obj is None or self._sources is None:
            return None
        try:
            return self._sources.needed(kind, obj)
        except (TypeError, ValueError, AttributeError, KeyError):
            return ()  # templates it cannot read: placement says why (InvalidQuantity ...)

    def _copies_on(
        self, cluster: str, worker: Worker | None, namespace: str, needed: tuple[Needed, ...] | None
    ) -> dict[str, Any]:
        """A worker snapshot's fields of the workload's dependencies: our copies there, and
        the names held there by objects jobrelay did not make."""
        if not needed:
            return {}
        names = [str(n.dependency) for n in needed]
        copies: dict[str, Copy] = {}
        if worker is not None:
            for n in needed:
                copy = copy_of(
                    worker.dependency_feed.copy(n.dependency.kind, namespace, n.dependency.name)
                )
                if copy is not None:
                    copies[str(n.dependency)] = copy
        foreign = self._memory.foreign_copies(cluster, namespace, names)
        return {"copies": copies, "foreign_dependencies": foreign}

    def _worker_snapshot(
        self, view: WorkerView, kind: str, capacity: Mapping[str, Any], **of_key: Any
    ) -> WorkerSnapshot:
        """A worker as seen for one kind: its state, its load and ``capacity`` (its
        :meth:`_capacity_of` fields), plus ``of_key``: one key's mirror and reads there."""
        worker = view.worker
        return WorkerSnapshot(
            name=view.name,
            synced=worker is not None and worker.synced(kind),
            connected=view.connected,
            cordoned=view.cordoned,
            lost=view.lost,
            lost_in=None if view.lost_in is None else max(0.0, view.lost_in),
            drain=view.drain,
            load=(worker.active_mirrors() if worker is not None else 0)
            + self._memory.reservations.count(view.name),
            labels=view.labels,
            namespaces=worker.namespace_feed.view(
                self._settings.origin, create=self._settings.create_namespaces
            )
            if worker is not None
            else None,
            claims=worker.claim_feed.view() if worker is not None else None,
            **capacity,
            **of_key,
        )

    def _capacity_of(self, worker: Worker | None, key: WorkloadKey | None) -> dict[str, Any]:
        """The capacity fields of a worker's snapshot: its nodes with what jobrelay placed
        there and the worker has not made pods for yet, and this key's pods there."""
        if worker is None:
            return {}
        pods = worker.pods_of(key.namespace, key.name) if key is not None else None
        capacity = worker.capacity()
        fields: dict[str, Any] = {
            "blind": capacity is None and worker.capacity_forbidden,
            "pods_started": pods is not None and pods.started,
            "unschedulable_for": seconds_since(pods.unschedulable_since)
            if pods is not None and pods.unschedulable_since
            else None,
            "worker_fault": pods.worker_fault if pods is not None else None,
        }
        if capacity is not None:
            fields["capacity"] = self._memory.with_reservations(worker, capacity)
        return fields

    @staticmethod
    def _with_reads(snapshot: Snapshot, reads: Mapping[str, JsonObj | None]) -> Snapshot:
        workers = tuple(
            dataclasses.replace(w, read=reads[w.name], read_done=True) if w.name in reads else w
            for w in snapshot.workers
        )
        return dataclasses.replace(snapshot, workers=workers)

    async def _read_local(self, runtime: KindRuntime, key: WorkloadKey) -> JsonObj | None:
        try:
            obj = await self._manager.get(runtime.kind.ref, key.name, namespace=key.namespace)
        except ApiError as error:
            if error.is_not_found:
                return None
            raise
        return runtime.kind.slim_local(obj)

    async def _read_remote(
        self, kind: WorkloadKind, key: WorkloadKey, cluster: str
    ) -> JsonObj | None:
        worker = self._pool.get(cluster)
        if worker is None:
            return None
        try:
            return await worker.client.get(kind.ref, key.name, namespace=key.namespace)
        except ApiError as error:
            if error.is_not_found:
                return None
            raise
