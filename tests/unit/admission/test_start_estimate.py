"""The estimated start of waiting workloads: the simulation over ends of runs (issue 34)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.admission.queue_model import QueueingStrategy, QueueSpec
from jobrelay.admission.start_estimate import (
    RunningWork,
    RunTime,
    RunTimeBasis,
    WaitingWork,
    WorkerFigures,
    declared_run_time,
    estimate_starts,
    median,
    parse_go_duration,
)

CPU = "cpu"
ONE = {CPU: 1000}
QUEUE = QueueSpec("q", nominal={CPU: 4000}, borrowing_limit={CPU: 0})
STRICT = QueueSpec("q", nominal={CPU: 4000}, borrowing_limit={CPU: 0},
                   strategy=QueueingStrategy.STRICT_FIFO)  # fmt: skip
BIG = (WorkerFigures("w1", {CPU: 100_000}, {}),)


def declared(seconds: float) -> RunTime:
    return RunTime(seconds, RunTimeBasis.DECLARED)


def running(name: str, seconds: float | None, *, started: float = 0.0, cpu: int = 1000,
            worker: str = "w1") -> RunningWork:  # fmt: skip
    run_time = declared(seconds) if seconds is not None else RunTime()
    return RunningWork(name, "q", {CPU: cpu}, worker, started, run_time)


def waiting(name: str, seconds: float | None = 60, cpu: int = 1000) -> WaitingWork:
    run_time = declared(seconds) if seconds is not None else RunTime()
    return WaitingWork(name, "q", {CPU: cpu}, run_time)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60s", 60.0), ("5m", 300.0), ("1h", 3600.0), ("1h30m", 5400.0), ("1.5h", 5400.0),
        ("500ms", 0.5), ("0", 0.0), ("+2m", 120.0), ("", None), ("60", None), ("-5s", None),
        ("5 m", None), ("1d", None), (60, None), (None, None), ("9" * 80 + "s", None),
    ],
)  # fmt: skip
def test_go_durations(text: object, seconds: float | None) -> None:
    assert parse_go_duration(text) == seconds


def test_the_annotation_comes_before_the_deadline() -> None:
    assert declared_run_time("2m", 600) == declared(120.0)
    assert declared_run_time(None, 600) == declared(600.0)
    assert declared_run_time("soon", None) is None
    assert declared_run_time(None, True) is None


def test_median() -> None:
    assert median([]) is None
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 4.0]) == 2.5


def test_the_fifth_starts_when_the_first_of_four_ends() -> None:
    ahead = [running(f"r{i}", 60, started=10.0) for i in range(4)]
    found = estimate_starts({"q": QUEUE}, ahead, [waiting("fifth")], BIG, now=20.0)
    assert found["fifth"].start == 70.0
    assert found["fifth"].worker == "w1"
    assert found["fifth"].basis == "declared run times of 4 running ahead"


def test_queue_order_is_kept_and_each_takes_the_room_that_frees() -> None:
    ahead = [running("r0", 10), running("r1", 20), running("r2", 30), running("r3", 40)]
    behind = [waiting(f"w{i}", 100) for i in range(6)]
    found = estimate_starts({"q": QUEUE}, ahead, behind, BIG, now=0.0)
    assert [found[f"w{i}"].start for i in range(6)] == [10.0, 20.0, 30.0, 40.0, 110.0, 120.0]


def test_room_free_now_starts_now() -> None:
    found = estimate_starts({"q": QUEUE}, [running("r0", 60)], [waiting("w")], BIG, now=5.0)
    assert found["w"].start == 5.0
    assert found["w"].basis == "room is free now"


def test_an_unknown_run_time_ahead_makes_it_unknown() -> None:
    ahead = [running(f"r{i}", None) for i in range(4)]
    found = estimate_starts({"q": QUEUE}, ahead, [waiting("w")], BIG, now=0.0)
    assert found["w"].start is None
    assert "no run time declared or observed" in found["w"].basis


def test_observed_durations_are_named_as_the_basis() -> None:
    observed = RunTime(30.0, RunTimeBasis.OBSERVED, "team-a/q")
    ahead = [RunningWork(f"r{i}", "q", ONE, "w1", 0.0, observed) for i in range(4)]
    found = estimate_starts({"q": QUEUE}, ahead, [waiting("w")], BIG, now=0.0)
    assert found["w"].start == 30.0
    assert found["w"].basis == "observed durations in team-a/q"


def test_worker_room_frees_too() -> None:
    small = (WorkerFigures("w1", {CPU: 2000}, {CPU: 2000}),)
    ahead = [running("r0", 50, cpu=2000)]
    found = estimate_starts({}, ahead, [WaitingWork("w", "", {CPU: 2000}, declared(5))],
                            small, now=0.0)  # fmt: skip
    assert (found["w"].start, found["w"].worker) == (50.0, "w1")


def test_the_worker_left_with_most_room_is_chosen() -> None:
    workers = (WorkerFigures("a", {CPU: 4000}, {CPU: 3000}), WorkerFigures("b", {CPU: 4000}, {}))
    found = estimate_starts({}, [], [WaitingWork("w", "", ONE)], workers, now=0.0)
    assert found["w"].worker == "b"


def test_never_fits_says_why() -> None:
    huge = waiting("huge", cpu=10_000_000)
    found = estimate_starts({"q": QUEUE}, [], [huge], BIG, now=0.0)
    assert found["huge"].start is None
    assert found["huge"].basis.startswith("it never fits")
    unqueued = WaitingWork("u", "", {CPU: 10_000_000})
    assert "allocatable" in estimate_starts({}, [], [unqueued], BIG, now=0.0)["u"].basis


def test_a_strict_queue_waits_for_its_head() -> None:
    ahead = [running("r0", 10, cpu=3000)]
    behind = [waiting("head", 100, cpu=2000), waiting("small", 100, cpu=1000)]
    strict = estimate_starts({"q": STRICT}, ahead, behind, BIG, now=0.0)
    best = estimate_starts({"q": QUEUE}, ahead, behind, BIG, now=0.0)
    assert strict["small"].start == 10.0  # behind its head, admitted with it
    assert best["small"].start == 0.0


def test_the_work_is_bounded() -> None:
    ahead = [running(f"r{i}", float(i + 1)) for i in range(4)]
    behind = [waiting(f"w{i}", 1) for i in range(50)]
    found = estimate_starts({"q": QUEUE}, ahead, behind, BIG, now=0.0, max_events=5)
    assert found["w49"].start is None
    assert found["w49"].basis == "beyond the simulation's bound"


@settings(max_examples=60, deadline=None)
@given(
    ends=st.lists(st.floats(min_value=1, max_value=1e4), min_size=1, max_size=6),
    durations=st.lists(st.floats(min_value=1, max_value=1e4), min_size=1, max_size=30),
    strict=st.booleans(),
)
def test_a_later_position_never_starts_earlier(
    ends: list[float], durations: list[float], strict: bool
) -> None:
    """All the same size: the one behind never gets an earlier start."""
    ahead = [running(f"r{i}", end) for i, end in enumerate(ends)]
    behind = [waiting(f"w{i:03}", d) for i, d in enumerate(durations)]
    spec = STRICT if strict else QUEUE
    found = estimate_starts({"q": spec}, ahead, behind, BIG, now=0.0)
    starts = [found[w.key].start for w in behind]
    assert all(start is not None for start in starts)
    known = [start for start in starts if start is not None]
    assert known == sorted(known)
    assert len(found) == len(behind)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=20),
    capacity=st.integers(min_value=1, max_value=16),
)
def test_every_waiting_one_gets_an_answer_and_never_before_now(
    sizes: list[int], capacity: int
) -> None:
    workers = (WorkerFigures("w1", {CPU: capacity * 1000}, {}),)
    behind = [waiting(f"w{i:03}", 30, cpu=size * 1000) for i, size in enumerate(sizes)]
    found = estimate_starts({}, [], [WaitingWork(w.key, "", w.requests, w.run_time)
                                     for w in behind], workers, now=100.0)  # fmt: skip
    for work in behind:
        estimate = found[work.key]
        if work.requests[CPU] > capacity * 1000:
            assert estimate.start is None
        else:
            assert estimate.start is not None and estimate.start >= 100.0


def test_without_the_workers_room_only_the_queue_quota_counts() -> None:
    ahead = [running(f"r{i}", 60) for i in range(4)]
    found = estimate_starts({"q": QUEUE}, ahead, [waiting("w"), waiting("x")], None, now=0.0)
    assert found["w"].start == 60.0 and found["w"].worker == ""
    free = estimate_starts({"q": QUEUE}, [], [waiting("w")], None, now=0.0)
    assert free["w"].start is None and "room is not known" in free["w"].basis


def test_a_declared_run_time_past_a_year_or_out_of_range_is_none() -> None:
    """A tenant's annotation (up to 64 characters) or an int64 deadline never yields a
    time no calendar holds: the API's rows and `jobrelay get` would fail on it."""
    from jobrelay.admission.start_estimate import MAX_DECLARED_RUN_TIME, StartEstimate
    from jobrelay.readmodel.estimate_reads import estimated_time

    assert declared_run_time("9" * 62 + "h", None) is None
    assert declared_run_time(None, 2**63 - 1) is None
    assert declared_run_time(f"{int(MAX_DECLARED_RUN_TIME)}s", None) is not None
    assert estimated_time(StartEstimate(1e66, "worker-1", "declared")) is None
