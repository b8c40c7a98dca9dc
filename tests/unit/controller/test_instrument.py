"""The controller's metric hooks (controller/instrument.py): what each write counts."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.unit.controller.builders import COMPLETE, FAILED, JOB, RUNNING, job, key_of

from jobrelay.controller.instrument import Instruments
from jobrelay.kube.requesting import RequestRecord, WatchRestart
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.vocabulary.outcome import Done, Lane, QueueOutcome, RequeueAfter, Retry, Terminal
from jobrelay.vocabulary.outcome import result as counted_as

KEY = key_of()


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def value(instruments: Instruments, name: str, **labels: str) -> float | None:
    text = instruments.metrics.render().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def seen(obj: dict[str, object] | None, old: dict[str, object] | None = None) -> InformerEvent:
    change = Change.DELETED if obj is None else Change.ADDED if old is None else Change.UPDATED
    return InformerEvent(change, KEY.key, old, obj)  # type: ignore[arg-type]


def test_the_wait_for_capacity_and_the_mirror_creation_are_timed_apart() -> None:
    """Held for capacity 0.5 s, then placed, mirror created 0.25 s later: the alertable
    mirror creation time says 0.25 s; the dispatch latency (kept) the whole 0.75 s."""
    clock = Clock()
    instruments = Instruments(clock=clock)
    handler = instruments.object_seen(JOB)
    handler(seen(job()))
    clock.now += 0.5
    instruments.placed(KEY, job(), "worker-1", ("worker-1",))
    handler(seen(job(placed="worker-1", history=("worker-1",)), job()))
    clock.now += 0.25
    instruments.mirror_created(KEY, "worker-1")
    assert value(instruments, "jobrelay_dispatched_total", worker="worker-1", kind=JOB.name) == 1
    assert value(instruments, "jobrelay_capacity_wait_seconds_count", kind=JOB.name) == 1
    assert value(instruments, "jobrelay_capacity_wait_seconds_sum", kind=JOB.name) == 0.5
    assert value(instruments, "jobrelay_mirror_creation_seconds_count", kind=JOB.name) == 1
    assert value(instruments, "jobrelay_mirror_creation_seconds_sum", kind=JOB.name) == 0.25
    assert value(instruments, "jobrelay_dispatch_latency_seconds_count") == 1
    assert value(instruments, "jobrelay_dispatch_latency_seconds_sum") == 0.75
    # A second mirror (a re-dispatch) is dispatched again, but its latency is not a dispatch's.
    instruments.mirror_created(KEY, "worker-2")
    assert value(instruments, "jobrelay_dispatched_total", worker="worker-2", kind=JOB.name) == 1
    assert value(instruments, "jobrelay_dispatch_latency_seconds_count") == 1
    assert value(instruments, "jobrelay_mirror_creation_seconds_count", kind=JOB.name) == 1


def test_a_redispatch_times_its_mirror_creation_from_its_placement() -> None:
    clock = Clock()
    instruments = Instruments(clock=clock)
    running = job(placed="worker-1", history=("worker-1",), status=RUNNING)
    instruments.object_seen(JOB)(seen(running))
    instruments.placed(KEY, running, "worker-2", ("worker-1", "worker-2"))
    clock.now += 2.0
    instruments.mirror_created(KEY, "worker-2")
    assert value(instruments, "jobrelay_mirror_creation_seconds_sum", kind=JOB.name) == 2.0
    assert value(instruments, "jobrelay_capacity_wait_seconds_count", kind=JOB.name) is None
    assert value(instruments, "jobrelay_redispatched_total", from_worker="worker-1",
                 kind=JOB.name) == 1  # fmt: skip


def test_a_workload_gone_before_its_mirror_forgets_its_placement_clock() -> None:
    instruments = Instruments()
    instruments.placed(KEY, job(), "worker-1", ("worker-1",))
    instruments.object_seen(JOB)(seen(None, job()))
    assert len(instruments.placing) == 0


@pytest.mark.parametrize(
    "obj",
    [job(suspend=True), job(placed="worker-1", history=("worker-1",))],
    ids=["suspended", "already placed (a restart)"],
)
def test_objects_suspended_or_already_placed_start_no_dispatch_clock(
    obj: dict[str, object],
) -> None:
    instruments = Instruments()
    instruments.object_seen(JOB)(seen(obj))
    assert len(instruments.unplaced) == 0


def test_a_deleted_object_forgets_its_clock() -> None:
    instruments = Instruments()
    handler = instruments.object_seen(JOB)
    handler(seen(job()))
    handler(seen(None, job()))
    assert len(instruments.unplaced) == 0


@pytest.mark.parametrize(
    ("before", "history", "redispatched_from"),
    [
        ((), ("worker-1",), None),  # a first placement
        (("worker-1",), ("worker-1", "worker-2"), "worker-1"),  # moved
        (("worker-1", "worker-2"), ("worker-1", "worker-2"), None),  # restored
        (("worker-1", "worker-2"), ("worker-1", "worker-3"), None),  # conflict fixed
    ],
)
def test_only_a_longer_history_is_a_redispatch(
    before: tuple[str, ...], history: tuple[str, ...], redispatched_from: str | None
) -> None:
    instruments = Instruments()
    obj = job(placed=before[-1] if before else None, history=before)
    instruments.placed(KEY, obj, history[-1], history)
    for cluster in ("worker-1", "worker-2"):
        count = value(
            instruments, "jobrelay_redispatched_total", from_worker=cluster, kind=JOB.name
        )
        assert count == (1 if cluster == redispatched_from else None)


@pytest.mark.parametrize(
    ("before", "after", "outcome"),
    [
        (RUNNING, COMPLETE, "succeeded"),
        (RUNNING, FAILED, "failed"),
        (RUNNING, RUNNING, None),
        (COMPLETE, COMPLETE, None),  # already finished: counted once
    ],
)
def test_a_status_that_finishes_the_workload_counts_it_by_cluster_and_outcome(
    before: dict[str, object], after: dict[str, object], outcome: str | None
) -> None:
    instruments = Instruments()
    obj = job(placed="worker-1", history=("worker-1",), status=before)
    instruments.status_written(KEY, JOB, obj, after)
    for each in ("succeeded", "failed"):
        count = value(
            instruments, "jobrelay_finished_total", worker="worker-1", kind=JOB.name, outcome=each
        )
        assert count == (1 if each == outcome else None)


async def test_reconciles_are_timed_by_result_and_status_copies_from_the_change() -> None:
    clock = Clock()
    instruments = Instruments(clock=clock)
    answers: list[QueueOutcome | Exception] = [Retry("conflict"), Done(), RequeueAfter(5.0)]

    async def reconcile(key: object) -> QueueOutcome:
        clock.now += 1
        answer = answers.pop(0)
        if answer == Done():
            instruments.status_written(KEY, JOB, job(status=RUNNING), RUNNING)
        if isinstance(answer, Exception):
            raise answer
        return answer

    timed = instruments.reconcile(reconcile)
    instruments.mirror_changed(KEY)
    assert isinstance(await timed(KEY), Retry)  # retried: the change still waits
    assert await timed(KEY) == Done()  # copied: 2 s after the change
    assert await timed(KEY) == RequeueAfter(5.0)
    answers.append(RuntimeError("boom"))
    with pytest.raises(RuntimeError):
        await timed(KEY)
    assert value(instruments, "jobrelay_status_update_latency_seconds_count") == 1
    assert value(instruments, "jobrelay_status_update_latency_seconds_sum") == 2
    # Running is not finished: no finishing copy yet.
    assert value(instruments, "jobrelay_status_copy_latency_seconds_count") == 0
    for result in ("retry", "done", "requeue", "error"):  # and none terminal
        count = value(
            instruments, "jobrelay_reconcile_duration_seconds_count", kind=JOB.name, result=result
        )
        assert count == 1, result
    assert value(instruments, "jobrelay_reconcile_errors_total", kind=JOB.name) == 1
    assert (
        value(instruments, "jobrelay_reconcile_duration_seconds_count", kind=JOB.name,
              result="terminal")
        is None
    )  # fmt: skip


async def test_a_terminal_outcome_is_counted_as_terminal() -> None:
    """A problem only the user can fix (a mirror a worker rejects) shows in the reconcile
    metrics as what it is, whether it is retried later or not."""
    instruments = Instruments(clock=Clock())
    answers: list[QueueOutcome] = [
        Terminal("MirrorRejected", "worker cluster w1 rejected the mirror", retry_after=30.0),
        Terminal("StatusNotCopied", "a jobrelay bug"),
    ]

    async def reconcile(key: object) -> QueueOutcome:
        return answers.pop(0)

    timed = instruments.reconcile(reconcile)
    assert isinstance(await timed(KEY), Terminal)
    assert isinstance(await timed(KEY), Terminal)
    count = value(
        instruments, "jobrelay_reconcile_duration_seconds_count", kind=JOB.name, result="terminal"
    )
    assert count == 2
    for other in ("done", "requeue", "retry", "error"):
        assert value(
            instruments, "jobrelay_reconcile_duration_seconds_count", kind=JOB.name, result=other
        ) is None, other  # fmt: skip


async def test_a_cancelled_reconcile_keeps_the_change_to_copy() -> None:
    instruments = Instruments()

    async def reconcile(key: object) -> None:
        raise asyncio.CancelledError

    instruments.mirror_changed(KEY)
    with pytest.raises(asyncio.CancelledError):
        await instruments.reconcile(reconcile)(KEY)
    assert len(instruments.status_copy) == 1


def test_requests_are_labelled_by_worker_and_the_managers_with_an_empty_worker() -> None:
    instruments = Instruments()
    instruments.manager_hook()(RequestRecord("manager", "patch", "jobs", 200, 0.01))
    instruments.request_hook()(RequestRecord("worker-1", "create", "jobs", 0, 5.0))
    assert value(
        instruments, "jobrelay_apiserver_requests_total", worker="", verb="patch", code="200"
    ) == 1  # fmt: skip
    assert value(
        instruments, "jobrelay_apiserver_request_errors_total", worker="worker-1", verb="create"
    ) == 1  # fmt: skip


def test_watch_restarts_are_counted_by_worker_kind_and_reason() -> None:
    instruments = Instruments()
    instruments.watch_hook("")(WatchRestart("manager", "Job", "relist"))
    instruments.watch_hook()(WatchRestart("worker-1", "Pod", "rewatch"))
    instruments.watch_hook()(WatchRestart("worker-1", "Pod", "rewatch"))
    assert value(instruments, "jobrelay_watch_restarts_total", worker="", kind="Job",
                 reason="relist") == 1  # fmt: skip
    assert value(instruments, "jobrelay_watch_restarts_total", worker="worker-1", kind="Pod",
                 reason="rewatch") == 2  # fmt: skip


def test_worker_events_relayed_and_suppressed_are_counted_by_worker() -> None:
    instruments = Instruments()
    instruments.worker_events("worker-1", relayed=3, suppressed=0)
    instruments.worker_events("worker-1", relayed=0, suppressed=7)
    assert value(instruments, "jobrelay_worker_events_relayed_total", worker="worker-1") == 3
    assert value(instruments, "jobrelay_worker_events_suppressed_total", worker="worker-1") == 7


@pytest.mark.parametrize(
    ("result", "label"),
    [
        (Done(), "done"),
        (Retry("x"), "retry"),
        (RequeueAfter(3.0), "requeue"),
        (RequeueAfter(3.0, Lane.BACKGROUND), "requeue"),
        (Terminal("MirrorRejected", "m", retry_after=30.0), "terminal"),
        (Terminal("StatusNotCopied", "m"), "terminal"),
    ],
)
def test_reconcile_result_labels(result: QueueOutcome, label: str) -> None:
    assert counted_as(result) == label


def test_an_object_another_replica_dispatched_forgets_its_clock() -> None:
    instruments = Instruments()
    handler = instruments.object_seen(JOB)
    handler(seen(job()))
    handler(seen(job(placed="worker-1", history=("worker-1",), status=RUNNING), job()))
    assert len(instruments.unplaced) == 0
    # Its re-dispatch later, by this replica, is not a dispatch latency.
    instruments.mirror_created(KEY, "worker-2")
    assert value(instruments, "jobrelay_dispatch_latency_seconds_count") == 0
