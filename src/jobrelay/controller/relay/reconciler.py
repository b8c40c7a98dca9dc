"""One reconcile: snapshot → decide → act, until the decision settles.

The only code between the caches and the pure decision: it builds the
snapshot (caches, expectations, reservations, the time), applies the plan
through the executor, reads afresh when the decision asks for it, and turns
the outcome into what the work queue understands. A terminal problem reaches
the user as a Warning Event on the object, not only as a log line.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.executor import Collided, Executor
from jobrelay.controller.relay.plan import (
    Done,
    Outcome,
    Place,
    Plan,
    ReadFresh,
    RequeueAfter,
    Retry,
    Terminal,
)
from jobrelay.controller.relay.snapshot import Settings, Snapshot, WorkerState
from jobrelay.fleet.workers import Worker, WorkerPool
from jobrelay.kinds.admission import ALLOWED, AdmissionVerdict, probe_pods, verdict_of_refusal
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.mirrors import is_mirror_of
from jobrelay.kinds.types import JsonObj
from jobrelay.kube.errors import ApiError
from jobrelay.kube.queueing import Backoff, Lane, Requeue
from jobrelay.kube.resources import PODS
from jobrelay.kube.watching import Informer
from jobrelay.placement.capacity import Reservation, WorkerCapacity
from jobrelay.placement.held import placeable
from jobrelay.placement.model import Cluster
from jobrelay.placement.workload import (
    Choice,
    Invalid,
    PodGroup,
    Workload,
    read_choice,
    read_workload,
)
from jobrelay.vocabulary.workercluster import drain_mode

_log = logging.getLogger(__name__)

# A decision settles in at most: read fresh, admission, probe, act. More means a bug.
_MAX_ROUNDS = 6
# Allowed (uid, generation) pairs kept: enough for a burst of new workloads.
_ADMITTED_REMEMBERED = 10_000
# How long an allowed probe pod answers for identical ones in its namespace (seconds):
# a change of the namespace's labels asks again at once; a new LimitRange, quota or
# webhook is seen within this bound.
_ALIKE_ALLOWED_FOR = 10.0
_ALIKE_REMEMBERED = 1024


# A placement whose pods a worker has not bound after this long takes no room: they
# are Pending there (the pending timeout's business), not on their way.
_RESERVATION_MAX_AGE = 120.0
# A namespace without annotations: any cluster, the default score.
NO_POLICY = Choice()


def _less(groups: tuple[PodGroup, ...], pods: int) -> tuple[PodGroup, ...]:
    """``groups`` without their first ``pods`` pods (those the worker has bound)."""
    left = []
    for group in groups:
        taken = min(group.count, pods)
        pods -= taken
        if group.count > taken:
            left.append(dataclasses.replace(group, count=group.count - taken))
    return tuple(left)


def _seconds_since(timestamp: str) -> float | None:
    try:
        then = datetime.datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return (datetime.datetime.now(datetime.UTC) - then).total_seconds()


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True)
class KindRuntime:
    """A configured kind with its management-cluster cache."""

    kind: WorkloadKind
    objects: Informer


class Reconciler:
    def __init__(
        self,
        kinds: Mapping[str, KindRuntime],
        pool: WorkerPool,
        executor: Executor,
        settings: Settings,
        *,
        clock: Callable[[], str] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kinds = kinds
        self._pool = pool
        self._executor = executor
        self._settings = settings
        self._clock = clock
        # (uid, generation) of workloads whose pods the manager's admission allowed,
        # oldest first: placement retries do not ask again.
        self._admitted: dict[tuple[str, object], None] = {}
        # Probe pods the manager allowed, by namespace and their bytes, with when (monotonic):
        # a burst of workloads from one template is asked about once per
        # _ALIKE_ALLOWED_FOR, not once each. A refusal is never remembered.
        self._allowed_alike: dict[tuple[str, bytes], float] = {}
        self._monotonic = monotonic
        # Workloads whose transitional status step waits to be copied, since when (monotonic).
        self._settling_since: dict[WorkloadKey, float] = {}
        # Each worker's capacity with reservations laid on, and what it was computed from.
        self._overlays: dict[str, tuple[WorkerCapacity, tuple[int, int], WorkerCapacity]] = {}
        # Workloads waiting unplaced, oldest first, with the signature of why (told to
        # the user again only when it changes); retried as soon as capacity changes.
        self._held: dict[WorkloadKey, str] = {}
        # Moves begun (their mirror is being deleted): from which worker, and why.
        self._leaving: dict[WorkloadKey, tuple[str, str]] = {}
        # Held workloads as placement reads them, by key: (resourceVersion, workload).
        self._workloads: dict[WorkloadKey, tuple[str, Workload | None]] = {}
        # Each namespace's placement policy, from its annotations (see ``policy_changed``).
        self._policies: dict[str, Choice | Invalid] = {}

    # -- what the runner feeds in ------------------------------------------------------

    def held(self) -> list[WorkloadKey]:
        """The workloads waiting unplaced, the longest-waiting first."""
        return list(self._held)

    def policy_changed(self, namespace: str, annotations: Mapping[str, str] | None) -> None:
        """A namespace's annotations changed (None: it is gone)."""
        # Its labels (Pod Security levels) may have changed: its pods are asked about anew.
        for alike in [a for a in self._allowed_alike if a[0] == namespace]:
            del self._allowed_alike[alike]
        if annotations is None:
            self._policies.pop(namespace, None)
        else:
            self._policies[namespace] = read_choice(annotations)

    async def reconcile(self, key: WorkloadKey) -> float | Backoff | Requeue | None:
        """Bring one management object and its mirrors in line; the queue's next step."""
        runtime = self._kinds.get(key.kind)
        if runtime is None:
            return None  # a kind no longer configured
        outcome = await self._settle(key, runtime)
        match outcome:
            case Done():
                return None
            case RequeueAfter(seconds=seconds):
                if key in self._held:
                    # Held unplaced: capacity changes bring it back at once when it fits
                    # (the runner's held passes); the periodic retry is only a backstop.
                    return Requeue(seconds, Lane.BACKGROUND)
                return seconds
            case Retry(why=why):
                return Backoff(why)
            case Terminal(reason=reason, message=message, retry_after=retry_after, detail=detail):
                obj = runtime.objects.get(key.key)
                if obj is not None:
                    self._executor.events.record(obj, "Warning", reason, message)
                _log.warning(
                    "%s: %s%s", key, message, f" (it answered: {detail})" if detail else "",
                    extra={"job": key.key, "reason": reason},
                )  # fmt: skip
                return retry_after
            case ReadFresh():
                return Backoff("the decision asked for fresh reads without end")
        return None

    async def _settle(self, key: WorkloadKey, runtime: KindRuntime) -> Outcome:
        snapshot = self.snapshot(key, runtime)
        for _ in range(_MAX_ROUNDS):
            plan = decide(snapshot)
            self._remember(key, plan)
            stopped = await self._executor.apply(key, runtime.kind, snapshot.obj, plan)
            if isinstance(stopped, Collided):
                read = await self._read_remote(runtime.kind, key, stopped.cluster)
                snapshot = self._with_reads(
                    self.snapshot(key, runtime, like=snapshot), {stopped.cluster: read}
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
                verdict = await self._admission(runtime.kind, snapshot.obj)
                snapshot = dataclasses.replace(snapshot, admission=verdict)
            # Taken after any wait above: concurrent placements made meanwhile count in
            # the workers' loads (their reservations), so a burst spreads.
            snapshot = self.snapshot(key, runtime, like=snapshot)
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
        """The workloads whose mirror has a pod its worker will not schedule: each is looked
        at, and looks again when its pending timeout runs out."""
        keys = []
        for worker in self._pool.workers():
            for namespace, name in worker.tracker.unschedulable():
                for kind in self._kinds:
                    key = WorkloadKey(kind, f"{namespace}/{name}")
                    if worker.mirror(key) is not None:
                        keys.append(key)
        return keys

    def placeable_held(self) -> list[WorkloadKey]:
        """The held workloads that would be placed now (see :func:`placement.held.placeable`)."""
        waiting = []
        for key in self._held:
            runtime = self._kinds.get(key.kind)
            obj = runtime.objects.get(key.key) if runtime is not None else None
            policy = self._policies.get(key.namespace, NO_POLICY)
            if runtime is None or obj is None or isinstance(policy, Invalid):
                continue
            workload = self._workload_of(key, runtime.kind, obj)
            if workload is not None:
                waiting.append((key, workload, policy))
        clusters = []
        for view in self._pool.views():
            fields = self._capacity_of(view.worker, None)
            clusters.append(
                Cluster(
                    name=view.name,
                    labels=view.labels,
                    connected=view.connected and not view.lost,
                    lost=view.lost,
                    cordoned=view.cordoned,
                    draining=bool(view.drain),
                    capacity=fields.get("capacity"),
                    blind=fields.get("blind", False),
                )
            )
        return [k for k in placeable(waiting, clusters) if isinstance(k, WorkloadKey)]

    def _workload_of(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj) -> Workload | None:
        """The held workload as placement reads it, parsed once per version."""
        version = str((obj.get("metadata") or {}).get("resourceVersion"))
        cached = self._workloads.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        workload = read_workload(kind, obj)
        parsed = None if isinstance(workload, Invalid) else workload
        self._workloads[key] = (version, parsed)
        return parsed

    def _remember(self, key: WorkloadKey, plan: Plan) -> None:
        if plan.held is not None:
            self._held[key] = plan.held
        elif not isinstance(plan.outcome, (ReadFresh, Retry)) or any(
            isinstance(a, Place) for a in plan.actions
        ):
            self._held.pop(key, None)
            self._workloads.pop(key, None)
        if plan.settling:
            self._settling_since.setdefault(key, self._monotonic())
        elif not isinstance(plan.outcome, (ReadFresh, Retry)):
            self._settling_since.pop(key, None)
        if plan.leaving is not None:
            self._leaving[key] = plan.leaving
        elif any(isinstance(a, Place) for a in plan.actions) or isinstance(plan.outcome, Done):
            self._leaving.pop(key, None)

    # -- the snapshot -----------------------------------------------------------

    def snapshot(
        self, key: WorkloadKey, runtime: KindRuntime, *, like: Snapshot | None = None
    ) -> Snapshot:
        """What the caches say now; ``like`` carries over fresh reads made this reconcile."""
        obj = like.obj if like is not None and like.fresh else runtime.objects.get(key.key)
        settling = self._settling_since.get(key)
        uid = str(((obj or {}).get("metadata") or {}).get("uid"))
        workers = []
        deleting = set()
        for view in self._pool.views():
            worker = view.worker
            mirror = worker.mirror(key) if worker is not None else None
            if mirror is not None:
                mirror_uid = str((mirror.get("metadata") or {}).get("uid"))
                if self._executor.deleted.pending(mirror_uid):
                    deleting.add(mirror_uid)
                if obj is not None and is_mirror_of(
                    mirror, obj, self._settings.controller_name, self._settings.origin
                ):
                    self._executor.created.observed((view.name, key, uid))
            previous = like.worker(view.name) if like is not None else None
            workers.append(
                WorkerState(
                    name=view.name,
                    synced=worker is not None and worker.synced(key.kind),
                    connected=view.connected,
                    cordoned=view.cordoned,
                    lost=view.lost,
                    lost_in=None if view.lost_in is None else max(0.0, view.lost_in),
                    drain=drain_mode(view.drain),
                    load=(worker.active_mirrors() if worker is not None else 0)
                    + self._executor.reservations.count(view.name),
                    labels=view.labels,
                    mirror=mirror,
                    read=previous.read if previous is not None else None,
                    read_done=previous.read_done if previous is not None else False,
                    create_pending=self._executor.created.pending((view.name, key, uid)),
                    vanished=worker.vanished.get(key) if worker is not None else None,
                    **self._capacity_of(worker, key),
                )
            )
        return Snapshot(
            key=key,
            kind=runtime.kind,
            settings=self._settings,
            obj=obj,
            workers=tuple(workers),
            now=self._clock(),
            fresh=like.fresh if like is not None else False,
            deleting=frozenset(deleting),
            probed=like.probed if like is not None else False,
            admission=like.admission if like is not None else None,
            policy=self._policies.get(key.namespace, NO_POLICY),
            held=self._held.get(key),
            leaving=self._leaving.get(key),
            settling_for=None if settling is None else self._monotonic() - settling,
        )

    def _capacity_of(self, worker: Worker | None, key: WorkloadKey | None) -> dict[str, Any]:
        """The capacity fields of a worker's state: its nodes with what jobrelay placed
        there and the worker has not made pods for yet, and this key's pods there."""
        if worker is None:
            return {}
        pods = worker.pods_of(key.namespace, key.name) if key is not None else None
        capacity = worker.capacity()
        fields: dict[str, Any] = {
            "blind": capacity is None and worker.capacity_forbidden,
            "pods_started": pods is not None and pods.started,
            "unschedulable_for": _seconds_since(pods.unschedulable_since)
            if pods is not None and pods.unschedulable_since
            else None,
        }
        if capacity is not None:
            fields["capacity"] = self._with_reservations(worker, capacity)
        return fields

    def _with_reservations(self, worker: Worker, capacity: WorkerCapacity) -> WorkerCapacity:
        """``capacity`` with what jobrelay placed on ``worker`` laid on it: computed again
        when the worker's capacity or its reservations change, and at least once a second
        (reservations age out), not for every snapshot."""
        stamp = (self._executor.reservations.version(worker.name), int(self._monotonic()))
        cached = self._overlays.get(worker.name)
        if cached is not None and cached[0] is capacity and cached[1] == stamp:
            return cached[2]
        overlaid = capacity.with_reservations(self._reserved_on(worker))
        # Releasing expired reservations above moved the version on: stamp the result.
        stamp = (self._executor.reservations.version(worker.name), stamp[1])
        self._overlays[worker.name] = (capacity, stamp, overlaid)
        return overlaid

    def _reserved_on(self, worker: Worker) -> tuple[Reservation, ...]:
        """What jobrelay placed on ``worker`` beyond the pods it has bound to nodes: each
        placement's pods less those bound, until all are, its mirror finished or went,
        or it has waited for longer than the worker could take to make them."""
        reserved = []
        reservations = self._executor.reservations
        for key, entry in reservations.on(worker.name):
            assert isinstance(key, WorkloadKey)
            if entry.mirror_visible and key not in worker.unfinished:
                reservations.release(key)  # finished, or gone
                continue
            if reservations.age(entry) > _RESERVATION_MAX_AGE:
                reservations.release(key)
                continue
            pods = worker.pods_of(key.namespace, key.name)
            bound = pods.bound if pods is not None else 0
            left = _less(entry.demand, bound)
            if not left:
                reservations.release(key)
                continue
            reserved.append(Reservation(key.key, left))
        return tuple(reserved)

    @staticmethod
    def _with_reads(snapshot: Snapshot, reads: Mapping[str, JsonObj | None]) -> Snapshot:
        workers = tuple(
            dataclasses.replace(w, read=reads[w.name], read_done=True) if w.name in reads else w
            for w in snapshot.workers
        )
        return dataclasses.replace(snapshot, workers=workers)

    async def _admission(self, kind: WorkloadKind, obj: JsonObj) -> AdmissionVerdict:
        """The manager's admission's verdict on the workload's pods: a dry-run create of a
        Pod from each pod template in its namespace. An allowed generation is remembered;
        a refusal is asked again on the next placement attempt."""
        metadata = obj.get("metadata") or {}
        remembered = (str(metadata.get("uid")), metadata.get("generation"))
        if remembered in self._admitted:
            return ALLOWED
        namespace = str(metadata.get("namespace"))
        for pod in probe_pods(kind.pod_templates(obj), namespace):
            alike = (namespace, msgspec.json.encode(pod))
            allowed_at = self._allowed_alike.get(alike)
            if allowed_at is not None and self._monotonic() - allowed_at < _ALIKE_ALLOWED_FOR:
                continue
            try:
                await self._executor.manager.create(PODS, pod, dry_run=True)
            except ApiError as error:
                verdict = verdict_of_refusal(error.code, error.reason, error.message)
                if verdict is None:
                    raise  # not an answer about admission (a time-out, a 5xx): retried
                if not verdict.allowed:
                    return verdict
            self._allowed_alike.pop(alike, None)
            self._allowed_alike[alike] = self._monotonic()
            while len(self._allowed_alike) > _ALIKE_REMEMBERED:
                self._allowed_alike.pop(next(iter(self._allowed_alike)))
        self._admitted[remembered] = None
        while len(self._admitted) > _ADMITTED_REMEMBERED:
            self._admitted.pop(next(iter(self._admitted)))
        return ALLOWED

    async def _read_local(self, runtime: KindRuntime, key: WorkloadKey) -> JsonObj | None:
        try:
            obj = await self._executor.manager.get(
                runtime.kind.ref, key.name, namespace=key.namespace
            )
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
