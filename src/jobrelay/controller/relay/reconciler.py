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
from collections.abc import Callable, Mapping

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.executor import Collided, Executor
from jobrelay.controller.relay.plan import (
    Done,
    Outcome,
    ReadFresh,
    RequeueAfter,
    Retry,
    Terminal,
)
from jobrelay.controller.relay.snapshot import Settings, Snapshot, WorkerState
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kinds.admission import ALLOWED, Verdict, probe_pods, verdict_of_refusal
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.mirrors import is_mirror_of
from jobrelay.kinds.types import JsonObj
from jobrelay.kube.api import PODS, ApiError, Resource
from jobrelay.kube.queueing import Backoff
from jobrelay.kube.watching import Informer

_log = logging.getLogger(__name__)

# A decision settles in at most: read fresh, admission, probe, act. More means a bug.
_MAX_ROUNDS = 6
# Allowed (uid, generation) pairs kept: enough for a burst of new workloads.
_ADMITTED_REMEMBERED = 10_000


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
    ) -> None:
        self._kinds = kinds
        self._pool = pool
        self._executor = executor
        self._settings = settings
        self._clock = clock
        # (uid, generation) of workloads whose pods the manager's admission allowed,
        # oldest first: placement retries do not ask again.
        self._admitted: dict[tuple[str, object], None] = {}

    async def reconcile(self, key: WorkloadKey) -> float | Backoff | None:
        """Bring one management object and its mirrors in line; the queue's next step."""
        runtime = self._kinds.get(key.kind)
        if runtime is None:
            return None  # a kind no longer configured
        outcome = await self._settle(key, runtime)
        match outcome:
            case Done():
                return None
            case RequeueAfter(seconds=seconds):
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

    # -- the snapshot -----------------------------------------------------------

    def snapshot(
        self, key: WorkloadKey, runtime: KindRuntime, *, like: Snapshot | None = None
    ) -> Snapshot:
        """What the caches say now; ``like`` carries over fresh reads made this reconcile."""
        obj = like.obj if like is not None and like.fresh else runtime.objects.get(key.key)
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
                    drain=view.drain,
                    load=(worker.active_mirrors() if worker is not None else 0)
                    + self._executor.reservations.count(view.name),
                    labels=view.labels,
                    mirror=mirror,
                    read=previous.read if previous is not None else None,
                    read_done=previous.read_done if previous is not None else False,
                    create_pending=self._executor.created.pending((view.name, key, uid)),
                    vanished=worker.vanished.get(key) if worker is not None else None,
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
        )

    @staticmethod
    def _with_reads(snapshot: Snapshot, reads: Mapping[str, JsonObj | None]) -> Snapshot:
        workers = tuple(
            dataclasses.replace(w, read=reads[w.name], read_done=True) if w.name in reads else w
            for w in snapshot.workers
        )
        return dataclasses.replace(snapshot, workers=workers)

    async def _admission(self, kind: WorkloadKind, obj: JsonObj) -> Verdict:
        """The manager's admission's verdict on the workload's pods: a dry-run create of a
        Pod from each pod template in its namespace. An allowed generation is remembered;
        a refusal is asked again on the next placement attempt."""
        metadata = obj.get("metadata") or {}
        remembered = (str(metadata.get("uid")), metadata.get("generation"))
        if remembered in self._admitted:
            return ALLOWED
        for pod in probe_pods(kind.pod_templates(obj), str(metadata.get("namespace"))):
            try:
                await self._executor.manager.create(PODS, pod, dry_run=True)
            except ApiError as error:
                verdict = verdict_of_refusal(error.code, error.reason, error.message)
                if verdict is None:
                    raise  # not an answer about admission (a time-out, a 5xx): retried
                if not verdict.allowed:
                    return verdict
        self._admitted[remembered] = None
        while len(self._admitted) > _ADMITTED_REMEMBERED:
            self._admitted.pop(next(iter(self._admitted)))
        return ALLOWED

    async def _read_local(self, runtime: KindRuntime, key: WorkloadKey) -> JsonObj | None:
        try:
            obj = await self._executor.manager.get(
                Resource.of(runtime.kind.ref), key.name, namespace=key.namespace
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
            return await worker.client.get(Resource.of(kind.ref), key.name, namespace=key.namespace)
        except ApiError as error:
            if error.is_not_found:
                return None
            raise
