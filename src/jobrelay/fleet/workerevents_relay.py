"""Worker Events onto the management objects: the thin I/O side of fleet/workerevents_rules.py.

The worker pool hands every worker Event (its Warning Event informer) and every
mirror change here. Which workload an Event concerns is decided by the pure
:mod:`jobrelay.fleet.workerevents_targets`, what to relay and what is blocked by
:mod:`jobrelay.fleet.workerevents_rules`; this writes it: relayed Events through the
controller's :class:`~jobrelay.kube.events.EventRecorder` (which folds repeats into
one Event's count), summaries when due, and the ``jobrelay.dev/blocked`` annotation
as a merge patch of the management object's metadata, only when it changes. A
standby replica (the write fence shut) records and patches nothing; it keeps
following, so that it does not replay what the leader relayed once it takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from jobrelay.fleet.workerevents_rules import (
    BlockedTracker,
    Outgoing,
    RelayLimits,
    WorkerEventRelay,
)
from jobrelay.fleet.workerevents_targets import speaks_for, target_of
from jobrelay.fleet.workers import Worker
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.mirror_pods import pod_owners
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.queueing import WorkQueue, run_workers
from jobrelay.kube.watching import InformerEvent
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import BLOCKED_ANNOTATION
from jobrelay.vocabulary.outcome import Done, QueueOutcome, RequeueAfter

__all__ = ["EventRelay"]

_log = logging.getLogger(__name__)

# While a worker's Events have not listed, a blocked annotation is not removed yet:
# the FailedCreate that keeps it may still be in that list. Seen again after this.
_UNLISTED_RETRY = 1.0


class EventRelay:
    """Relays worker Events onto management objects and keeps ``jobrelay.dev/blocked``."""

    def __init__(
        self,
        manager: ApiClient,
        recorder: EventRecorder,
        kinds: Sequence[WorkloadKind],
        *,
        local: Callable[[WorkloadKey], Mapping[str, Any] | None],
        may_write: Callable[[], bool],
        limits: RelayLimits | None = None,
    ) -> None:
        self._manager = manager
        self._recorder = recorder
        self._kinds = {kind.name: kind for kind in kinds}
        self._local = local
        self._may_write = may_write
        self.relay = WorkerEventRelay(limits)
        self.blocked = BlockedTracker()
        # Workers whose Events have listed once in this process: a later relist of
        # theirs is news, not history.
        self._listed: set[str] = set()
        self._queue: WorkQueue[WorkloadKey] = WorkQueue()
        self._workers: Callable[[], Iterable[Worker]] = list
        self._task: asyncio.Task[None] | None = None
        self._summary_call: asyncio.TimerHandle | None = None
        # Told, per worker, how many occurrences were relayed and how many the rate limit
        # held back (metrics); only while this replica may write: a standby relays nothing.
        self.on_relayed: Callable[[str, int, int], None] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, workers: Callable[[], Iterable[Worker]]) -> None:
        """Start writing the blocked annotation; ``workers``: the pool's current workers."""
        self._workers = workers
        self._task = asyncio.get_running_loop().create_task(
            run_workers(self._queue, 2, self._sync_blocked, name="blocked"), name="blocked"
        )

    async def stop(self) -> None:
        self._queue.shutdown()
        if self._summary_call is not None:
            self._summary_call.cancel()
            self._summary_call = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- what the pool hands in (WorkerEventSink) ------------------------------------------

    def worker_event(self, worker: Worker, event: InformerEvent) -> None:
        if event.new is None:
            return  # an Event expired or deleted: nothing happened
        informer = worker.events
        listing = informer is not None and not informer.has_synced
        if not listing:
            self._listed.add(worker.name)
        target = target_of(event.new, self._kinds, _mirrors(worker), _pod_owners(worker))
        if target is not None and not speaks_for(target, self._local(target.key)):
            # Not the object that mirror was made for (a made-up "mirror", a namesake):
            # nothing lands on it, and nothing is remembered.
            target = None
        history = listing and worker.name not in self._listed
        now = asyncio.get_running_loop().time()
        suppressed = self.relay.suppressed[worker.name]
        relayed = 0
        for outgoing in self.relay.observe(
            worker.name, event.new, target, history=history, now=now
        ):
            relayed += outgoing.count if self._record(outgoing) else 0
        suppressed = self.relay.suppressed[worker.name] - suppressed
        if self.on_relayed is not None and (relayed or suppressed) and self._may_write():
            self.on_relayed(worker.name, relayed, suppressed)
        self._schedule_summaries()
        if target is not None:
            mirror = worker.mirror(target.key)
            running = mirror is not None and self._running_or_finished(target.key.kind, mirror)
            if self.blocked.event(worker.name, event.new, target, mirror_running=running):
                self._queue.add(target.key)

    def mirror_changed(self, worker: Worker, kind: WorkloadKind, event: InformerEvent) -> None:
        key = WorkloadKey(kind.name, event.key)
        mirror = event.new
        uid = None if mirror is None else Meta(mirror).uid
        running = mirror is not None and self._running_or_finished(kind.name, mirror)
        self.blocked.mirror(worker.name, key, uid, running_or_finished=running)
        obj = self._local(key)
        wanted = None if obj is None else self.blocked.wanted(key, Meta(obj).uid)
        if self._annotation(key) != wanted:
            self._queue.add(key)

    # -- writing ---------------------------------------------------------------------------

    def _record(self, outgoing: Outgoing) -> bool:
        """Record ``outgoing``; whether it was (a standby writes nothing)."""
        if not self._may_write():
            return False
        obj = self._local(outgoing.key)
        if obj is None:
            return False
        event_type = cast(Literal["Normal", "Warning"], outgoing.type)
        self._recorder.record(
            obj, event_type, outgoing.reason, outgoing.message, count=outgoing.count
        )
        return True

    def _schedule_summaries(self) -> None:
        due = self.relay.next_due()
        if due is None or self._summary_call is not None:
            return
        loop = asyncio.get_running_loop()
        self._summary_call = loop.call_at(due, self._summaries)

    def _summaries(self) -> None:
        self._summary_call = None
        for outgoing in self.relay.due(asyncio.get_running_loop().time()):
            self._record(outgoing)
        self._schedule_summaries()

    async def _sync_blocked(self, key: WorkloadKey) -> QueueOutcome:
        """Make the management object's annotation say what the tracker wants."""
        obj = self._local(key)
        if obj is None:
            return Done()
        uid = Meta(obj).uid
        # Only on the object whose UID the blocked mirror names (not a later namesake).
        wanted = self.blocked.wanted(key, uid)
        if _annotation_of(obj) == wanted:
            return Done()
        if wanted is None and any(
            w.events is not None and not w.events.has_synced for w in self._workers()
        ):
            return RequeueAfter(_UNLISTED_RETRY)
        if not self._may_write():
            return Done()  # a standby writes nothing; the leader keeps it
        kind = self._kinds.get(key.kind)
        if kind is None:
            return Done()
        try:
            # The UID is a precondition: a namesake made since the read is left alone.
            await self._manager.patch(
                kind.ref,
                key.name,
                {"metadata": {"uid": uid, "annotations": {BLOCKED_ANNOTATION: wanted}}},
                namespace=key.namespace,
            )
        except ApiError as error:
            if not (error.is_not_found or error.is_conflict):
                raise
            return Done()
        _log.info(
            "%s: %s", key, f"blocked: {wanted}" if wanted is not None else "no longer blocked"
        )
        return Done()

    # -- reading ---------------------------------------------------------------------------

    def _annotation(self, key: WorkloadKey) -> str | None:
        obj = self._local(key)
        return None if obj is None else _annotation_of(obj)

    def _running_or_finished(self, kind_name: str, mirror: Mapping[str, Any]) -> bool:
        """Whether the mirror's kind shows pods of it at work, or its end."""
        kind = self._kinds.get(kind_name)
        try:
            return kind is not None and (
                kind.pods_at_work(dict(mirror)) or kind.is_finished(dict(mirror))
            )
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            return False  # a status it cannot read: the reconcile says so


def _annotation_of(obj: Mapping[str, Any]) -> str | None:
    return Meta(obj).annotation(BLOCKED_ANNOTATION)


def _mirrors(worker: Worker) -> Callable[[tuple[str, str]], Mapping[str, Any] | None]:
    """Its cached mirrors, and those just deleted: a finished mirror is deleted as soon
    as its status is copied, often before its last Events (BackoffLimitExceeded) arrive."""

    def mirror(key: tuple[str, str]) -> Mapping[str, Any] | None:
        found = worker.mirror(key)
        return found if found is not None else worker.vanished.get(WorkloadKey(*key))

    return mirror


def _pod_owners(
    worker: Worker,
) -> Callable[[str, str], tuple[str, frozenset[tuple[str, str]]] | None]:
    """A pod's UID and whom it speaks for (kinds.mirror_pods.pod_owners), from the pod
    cache or the pods that finished lately (None: not known)."""

    def owners(namespace: str, name: str) -> tuple[str, frozenset[tuple[str, str]]] | None:
        pod = worker.capacity_feed.pod(f"{namespace}/{name}")
        if pod is None:
            return None
        return Meta(pod).uid, pod_owners(pod)

    return owners
