"""The controller's hooks into its metrics (observe/metrics.py): thin, and never I/O.

- informer handlers start the clocks: a management object seen unplaced and not
  suspended starts its capacity wait (and the whole dispatch latency); a mirror
  change starts a status copy;
- the executor reports its writes (:class:`~jobrelay.controller.relay.executor.RelayObserver`):
  a placement stops the capacity wait and starts the mirror creation clock, a
  mirror created stops it (and the dispatch clock), a status written stops the
  copy clock, a placement that extends the history counts a re-dispatch, a
  status that finishes the workload counts it by worker, kind and outcome;
- :meth:`Instruments.reconcile` wraps the queue's handler: duration and result (the
  outcome's: done, requeue, retry, terminal; or error);
- every apiserver client reports its requests (``ApiClient.on_request``) and its
  informers' restarts (``ApiClient.on_watch_restart``);
- the worker Event relay reports what it relayed and what its rate limit held back.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.requesting import RequestRecord, WatchRestart
from jobrelay.kube.watching import InformerEvent
from jobrelay.observe.metrics import (
    MANAGER,
    ControllerState,
    Metrics,
    StatusCopyClock,
    Stopwatches,
)
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.outcome import QueueOutcome, Retry, result
from jobrelay.vocabulary.placement import placement_of, placements_of

__all__ = ["Instruments"]

Handler = Callable[[WorkloadKey], Awaitable[QueueOutcome]]


class Instruments:
    """One controller's metrics and the clocks behind its latencies."""

    def __init__(
        self,
        state: Callable[[], ControllerState] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = Metrics(state)
        self._clock = clock
        # Management objects seen unplaced and not suspended, until their mirror exists.
        self.unplaced: Stopwatches[WorkloadKey] = Stopwatches(clock)
        # The same, until a placement is decided (the wait for a worker with room).
        self.waiting: Stopwatches[WorkloadKey] = Stopwatches(clock)
        # Placed, until the mirror is created (lost on a restart: the next leader
        # observes nothing for a placement it did not make).
        self.placing: Stopwatches[WorkloadKey] = Stopwatches(clock)
        self.status_copy: StatusCopyClock[WorkloadKey] = StatusCopyClock(clock)

    # -- informers -------------------------------------------------------------------

    def object_seen(self, kind: WorkloadKind) -> Callable[[InformerEvent], None]:
        """A handler of ``kind``'s management informer."""

        def handler(event: InformerEvent) -> None:
            key = WorkloadKey(kind.name, event.key)
            obj = event.new
            finished = obj is None or kind.is_finished(obj)
            if finished:
                self.placing.discard(key)
            if obj is None or finished or kind.has_run(obj):
                # Gone, or dispatched (by another replica, say): a later mirror is a re-dispatch.
                self.unplaced.discard(key)
                self.waiting.discard(key)
            elif not placement_of(obj) and not kind.is_suspended(obj):
                self.unplaced.start(key)
                self.waiting.start(key)

        return handler

    def mirror_changed(self, key: WorkloadKey) -> None:
        self.status_copy.changed(key)

    # -- apiservers ------------------------------------------------------------------

    def request_hook(self, worker: str | None = None) -> Callable[[RequestRecord], None]:
        """An ``on_request`` hook labelling requests ``worker`` (default: the client's)."""

        def hook(record: RequestRecord) -> None:
            self.metrics.api_request(record.cluster if worker is None else worker, record.verb,
                                     record.code, record.seconds)  # fmt: skip

        return hook

    def manager_hook(self) -> Callable[[RequestRecord], None]:
        return self.request_hook(MANAGER)

    def watch_hook(self, worker: str | None = None) -> Callable[[WatchRestart], None]:
        """An ``on_watch_restart`` hook labelling restarts ``worker`` (default: the client's)."""

        def hook(restart: WatchRestart) -> None:
            where = restart.cluster if worker is None else worker
            self.metrics.watch_restarts.labels(where, restart.kind, restart.reason).inc()

        return hook

    # -- the worker Event relay --------------------------------------------------------

    def worker_events(self, worker: str, *, relayed: int, suppressed: int) -> None:
        if relayed:
            self.metrics.worker_events_relayed.labels(worker).inc(relayed)
        if suppressed:
            self.metrics.worker_events_suppressed.labels(worker).inc(suppressed)

    # -- the executor (RelayObserver) -------------------------------------------------

    def placed(
        self, key: WorkloadKey, obj: JsonObj | None, cluster: str, history: tuple[str, ...]
    ) -> None:
        before = placements_of(obj)
        if before and len(history) > len(before):
            self.metrics.redispatched.labels(before[-1], key.kind).inc()
        waited = self.waiting.stop(key)
        if waited is not None:
            self.metrics.capacity_wait.labels(key.kind).observe(waited)
        self.placing.start(key)

    def dependency_copied(self, cluster: str, action: str) -> None:
        self.metrics.dependency_copies.labels(cluster, action).inc()

    def mirror_created(self, key: WorkloadKey, cluster: str) -> None:
        self.metrics.dispatched.labels(cluster, key.kind).inc()
        creating = self.placing.stop(key)
        if creating is not None:
            self.metrics.mirror_creation.labels(key.kind).observe(creating)
        waited = self.unplaced.stop(key)
        if waited is not None:
            self.metrics.dispatch_latency.observe(waited)

    def status_written(
        self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None, status: JsonObj
    ) -> None:
        copied = self.status_copy.written(key)
        if copied is not None:
            self.metrics.status_update_latency.observe(copied)
        if obj is None or kind.finish(obj) is not None:
            return
        finish = kind.finish({**obj, "status": status})
        if finish is not None:
            if copied is not None:
                # The copy users wait for: the workload shows it has finished.
                self.metrics.status_copy_latency.observe(copied)
            cluster = placement_of(obj)
            outcome = "succeeded" if finish.succeeded else "failed"
            self.metrics.finished.labels(cluster, key.kind, outcome).inc()
            # Finished without a mirror: never dispatched now.
            self.unplaced.discard(key)
            self.waiting.discard(key)
            self.placing.discard(key)

    # -- the work queue ---------------------------------------------------------------

    def reconcile(self, handler: Handler) -> Handler:
        """``handler`` timed and counted, with the status-copy clock around it."""

        async def timed(key: WorkloadKey) -> QueueOutcome:
            started = self._clock()
            self.status_copy.begin(key)
            try:
                outcome = await handler(key)
            except BaseException as error:
                # Failed or cancelled: the change is still to be copied.
                self.status_copy.end(key, retry=True)
                if isinstance(error, Exception):
                    self.metrics.reconciled(key.kind, "error", self._clock() - started)
                raise
            self.status_copy.end(key, retry=isinstance(outcome, Retry))
            self.metrics.reconciled(key.kind, result(outcome), self._clock() - started)
            return outcome

        return timed
