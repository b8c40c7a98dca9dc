"""The metric definitions, the scrape-time gauges and the latency clocks (observe/metrics.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from jobrelay.observe.metrics import (
    ControllerState,
    Metrics,
    QueueGaugeFigures,
    QueueState,
    StatusCopyClock,
    Stopwatches,
    WorkerCapacityFigures,
    WorkerLiveness,
    exposed_names,
    jobrelay_version,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.render().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_each_controller_has_a_registry_of_its_own() -> None:
    one, two = Metrics(), Metrics()
    one.dispatched.labels("worker-1", "Job.v1.batch").inc()
    labels = (("kind", "Job.v1.batch"), ("worker", "worker-1"))
    assert samples(one)[("jobrelay_dispatched_total", labels)] == 1
    assert ("jobrelay_dispatched_total", labels) not in samples(two)


def test_process_python_and_build_info_are_exposed_and_no_created_series() -> None:
    metrics = Metrics()
    metrics.dispatched.labels("worker-1", "Job.v1.batch").inc()
    metrics.api_request("worker-1", "create", 201, 0.02)
    seen = samples(metrics)
    names = {name for name, _ in seen}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "python_info"} <= names
    assert seen[("jobrelay_build_info", (("version", jobrelay_version()),))] == 1
    assert not [name for name in names if name.endswith("_created")]
    assert not [name for name in exposed_names(metrics.registry) if name.endswith("_created")]


@pytest.mark.parametrize(
    ("code", "error"),
    [(200, False), (201, False), (404, False), (409, False), (422, False), (0, True),
     (429, True), (500, True), (503, True)],
)  # fmt: skip
def test_apiserver_errors_are_no_answer_throttling_and_server_faults(
    code: int, error: bool
) -> None:
    metrics = Metrics()
    metrics.api_request("worker-1", "create", code, 0.02)
    seen = samples(metrics)
    labels = (("code", str(code)), ("verb", "create"), ("worker", "worker-1"))
    assert seen[("jobrelay_apiserver_requests_total", labels)] == 1
    errors = seen.get(
        ("jobrelay_apiserver_request_errors_total", (("verb", "create"), ("worker", "worker-1")))
    )
    assert errors == (1 if error else None)
    count = (("verb", "create"), ("worker", "worker-1"))
    assert seen[("jobrelay_apiserver_request_duration_seconds_count", count)] == 1


def test_reconcile_errors_are_counted_apart() -> None:
    metrics = Metrics()
    metrics.reconciled("Job.v1.batch", "done", 0.01)
    metrics.reconciled("Job.v1.batch", "error", 0.01)
    seen = samples(metrics)
    assert seen[("jobrelay_reconcile_errors_total", (("kind", "Job.v1.batch"),))] == 1
    done = (("kind", "Job.v1.batch"), ("result", "done"))
    assert seen[("jobrelay_reconcile_duration_seconds_count", done)] == 1


def test_state_gauges_are_read_at_each_scrape() -> None:
    state = ControllerState(
        leader=True, ready=True, queue=QueueState(3, 2, 1, 4.5),
        held={("Job.v1.batch", "NotPlaced"): 7, ("Job.v1.batch", "NeverFits"): 0},
        workloads={("Job.v1.batch", "Running"): 4, ("Job.v1.batch", "Complete"): 9},
        workers=(WorkerLiveness("worker-1", True, False), WorkerLiveness("worker-2", False, True)),
        capacity=(WorkerCapacityFigures("worker-1", {"cpu": 8.0, "memory": 2.0**34},
                                        {"cpu": 1.5}),),
    )  # fmt: skip
    current = [state]
    metrics = Metrics(lambda: current[0])
    seen = samples(metrics)
    assert seen[("jobrelay_leader", ())] == 1
    assert seen[("jobrelay_ready", ())] == 1
    assert seen[("jobrelay_workqueue_depth", ())] == 3
    assert seen[("jobrelay_workqueue_delayed", ())] == 2
    assert seen[("jobrelay_workqueue_in_progress", ())] == 1
    assert seen[("jobrelay_workqueue_oldest_item_age_seconds", ())] == 4.5
    assert (
        seen[("jobrelay_held_workloads", (("kind", "Job.v1.batch"), ("reason", "NotPlaced")))] == 7
    )
    assert seen[("jobrelay_workloads", (("kind", "Job.v1.batch"), ("state", "Running")))] == 4
    assert seen[("jobrelay_worker_connected", (("worker", "worker-1"),))] == 1
    assert seen[("jobrelay_worker_connected", (("worker", "worker-2"),))] == 0
    assert seen[("jobrelay_worker_lost", (("worker", "worker-2"),))] == 1
    assert seen[("jobrelay_worker_allocatable", (("resource", "cpu"), ("worker", "worker-1")))] == 8
    assert seen[("jobrelay_worker_requested", (("resource", "cpu"), ("worker", "worker-1")))] == 1.5
    current[0] = ControllerState(leader=True, ready=True, queue=QueueState(0, 0, 0, 0.0))
    seen = samples(metrics)
    assert ("jobrelay_worker_connected", (("worker", "worker-1"),)) not in seen


def test_a_standby_exposes_no_queue_nor_held_workloads() -> None:
    """Issue 22: a standby fills its queue from informer events and never drains it; its
    queue gauges made JobrelayQueueBackingUp (max over replicas) fire for ever. A standby
    says it is one (jobrelay_leader 0) and reports no queue: the leader's is the queue."""
    standby = ControllerState(
        leader=False, ready=True, workloads={("Job.v1.batch", "Pending"): 1},
        workers=(WorkerLiveness("worker-1", True, False),),
    )  # fmt: skip
    seen = samples(Metrics(lambda: standby))
    assert seen[("jobrelay_leader", ())] == 0
    names = {name for name, _ in seen}
    assert not [name for name in names if name.startswith("jobrelay_workqueue_")]
    assert "jobrelay_held_workloads" not in names
    # What its caches say is true on a standby too.
    assert seen[("jobrelay_worker_connected", (("worker", "worker-1"),))] == 1
    assert seen[("jobrelay_workloads", (("kind", "Job.v1.batch"), ("state", "Pending")))] == 1


def test_a_stopwatch_counts_from_its_first_start_until_stopped() -> None:
    clock = Clock()
    watches: Stopwatches[str] = Stopwatches(clock)
    watches.start("a")
    clock.now += 2
    watches.start("a")  # seen again: still from the first time
    clock.now += 1
    assert watches.stop("a") == 3
    assert watches.stop("a") is None
    watches.start("b")
    watches.discard("b")
    assert watches.stop("b") is None and len(watches) == 0


def test_status_copy_times_the_earliest_change_to_the_first_write() -> None:
    clock = Clock()
    copy: StatusCopyClock[str] = StatusCopyClock(clock)
    copy.changed("a")
    clock.now += 1
    copy.changed("a")  # a second change before the reconcile: the first one counts
    clock.now += 1
    copy.begin("a")
    clock.now += 0.5
    assert copy.written("a") == 2.5
    assert copy.written("a") is None  # a second write in one reconcile is not a copy
    copy.end("a", retry=False)
    assert len(copy) == 0


def test_status_copy_without_a_write_is_dropped_unless_retried() -> None:
    clock = Clock()
    copy: StatusCopyClock[str] = StatusCopyClock(clock)
    copy.changed("a")
    copy.begin("a")
    copy.end("a", retry=False)  # nothing to copy (our own create, say)
    copy.begin("a")
    assert copy.written("a") is None
    copy.end("a", retry=False)

    copy.changed("b")
    copy.begin("b")
    clock.now += 1
    copy.changed("b")  # seen while the reconcile runs: waits for the next one
    copy.end("b", retry=True)  # a conflict: the first change is still to be copied
    copy.begin("b")
    clock.now += 1
    assert copy.written("b") == 2


@given(
    st.lists(
        st.tuples(st.sampled_from(["change", "begin", "write", "end", "retry"]),
                  st.floats(0, 10)),
        max_size=40,
    )
)  # fmt: skip
def test_status_copy_latencies_are_never_negative_nor_older_than_the_first_change(
    steps: list[tuple[str, float]],
) -> None:
    clock = Clock()
    copy: StatusCopyClock[str] = StatusCopyClock(clock)
    first_change: float | None = None
    running = False
    for step, advance in steps:
        clock.now += advance
        if step == "change":
            copy.changed("k")
            first_change = clock.now if first_change is None else first_change
        elif step == "begin" and not running:
            copy.begin("k")
            running = True
        elif step == "write" and running:
            latency = copy.written("k")
            if latency is not None:
                assert first_change is not None
                assert 0 <= latency <= clock.now - first_change
        elif step in ("end", "retry") and running:
            copy.end("k", retry=step == "retry")
            running = False
    assert len(copy) <= 2


def test_queue_gauges_show_the_last_fair_share_pass_on_the_leader_only() -> None:
    team_a = QueueGaugeFigures(
        "team-a", fair_share=0.25, actual_share=0.3, pending=4, admitted=10,
        demand={"cpu": 14.0}, usage={"cpu": 10.0, "memory": 2.0**33},
    )  # fmt: skip
    leader = ControllerState(leader=True, ready=True, queues=(team_a,), fairness_error=0.05)
    seen = samples(Metrics(lambda: leader))
    queue = (("queue", "team-a"),)
    assert seen[("jobrelay_queue_fair_share", queue)] == 0.25
    assert seen[("jobrelay_queue_actual_share", queue)] == 0.3
    assert seen[("jobrelay_queue_pending", queue)] == 4
    assert seen[("jobrelay_queue_admitted", queue)] == 10
    assert seen[("jobrelay_queue_demand", (("queue", "team-a"), ("resource", "cpu")))] == 14
    assert seen[("jobrelay_queue_usage", (("queue", "team-a"), ("resource", "memory")))] == 2**33
    assert seen[("jobrelay_fairness_error", ())] == 0.05
    # A standby, or a leader before its first pass: no queue gauges at all.
    names = {name for name, _ in samples(Metrics(lambda: ControllerState(False, True)))}
    assert not {n for n in names if n.startswith(("jobrelay_queue_", "jobrelay_fairness"))}


def test_the_api_gauges_show_the_served_certificate_and_the_leaders_reading() -> None:
    leader = ControllerState(
        leader=True, ready=True, api_certificate_expiry=1.9e9, api_service_available=False
    )
    seen = samples(Metrics(lambda: leader))
    assert seen[("jobrelay_api_certificate_expiry_timestamp_seconds", ())] == 1.9e9
    assert seen[("jobrelay_api_service_available", ())] == 0.0
    # No API served, or a standby (which reads no APIService): no such series.
    names = {name for name, _ in samples(Metrics(lambda: ControllerState(False, True)))}
    assert not {n for n in names if n.startswith("jobrelay_api_")}
