"""The controller's hooks into its metrics (observe/metrics.py): thin, and never I/O.

- informer handlers start the clocks: a management object seen unplaced and not
  suspended starts its dispatch latency; a mirror change starts a status copy;
- the executor reports its writes (:class:`~jobrelay.controller.relay.executor.RelayObserver`):
  a mirror created stops the dispatch clock, a status written stops the copy
  clock, a placement that extends the history counts a re-dispatch, a status
  that finishes the workload counts it by cluster and outcome;
- :meth:`Instruments.reconcile` wraps the queue's handler: duration and result (the
  outcome's: done, requeue, retry, terminal; or error);
- every apiserver client reports its requests (``ApiClient.on_request``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.types import JsonObj
from jobrelay.kube.requesting import RequestRecord
from jobrelay.kube.watching import InformerEvent
from jobrelay.observe.metrics import (
    MANAGER,
    ControllerState,
    Metrics,
    StatusCopyClock,
    Stopwatches,
)
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
        self.status_copy: StatusCopyClock[WorkloadKey] = StatusCopyClock(clock)

    # -- informers -------------------------------------------------------------------

    def object_seen(self, kind: WorkloadKind) -> Callable[[InformerEvent], None]:
        """A handler of ``kind``'s management informer."""

        def handler(event: InformerEvent) -> None:
            key = WorkloadKey(kind.name, event.key)
            obj = event.new
            if obj is None or kind.has_run(obj) or kind.finish(obj) is not None:
                # Gone, or dispatched (by another replica, say): a later mirror is a re-dispatch.
                self.unplaced.discard(key)
            elif not placement_of(obj) and not kind.is_suspended(obj):
                self.unplaced.start(key)

        return handler

    def mirror_changed(self, key: WorkloadKey) -> None:
        self.status_copy.changed(key)

    # -- apiservers ------------------------------------------------------------------

    def request_hook(self, cluster: str | None = None) -> Callable[[RequestRecord], None]:
        """An ``on_request`` hook labelling requests ``cluster`` (default: the client's)."""

        def hook(record: RequestRecord) -> None:
            self.metrics.api_request(cluster or record.cluster, record.verb, record.code,
                                     record.seconds)  # fmt: skip

        return hook

    def manager_hook(self) -> Callable[[RequestRecord], None]:
        return self.request_hook(MANAGER)

    # -- the executor (RelayObserver) -------------------------------------------------

    def placed(
        self, key: WorkloadKey, obj: JsonObj | None, cluster: str, history: tuple[str, ...]
    ) -> None:
        before = placements_of(obj)
        if before and len(history) > len(before):
            self.metrics.redispatched.labels(before[-1]).inc()

    def mirror_created(self, key: WorkloadKey, cluster: str) -> None:
        self.metrics.dispatched.labels(cluster).inc()
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
            self.metrics.finished.labels(cluster, outcome).inc()
            self.unplaced.discard(key)  # finished without a mirror: never dispatched now

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
