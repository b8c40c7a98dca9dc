"""What the estimate reads of the objects: WorkerClusters' figures, run times declared or
observed, and the words it is said in (issue 34)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobrelay.admission.queue_model import LabelSelector, QueueSpec
from jobrelay.admission.queue_places import QueueKnowledge
from jobrelay.admission.start_estimate import StartEstimate
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.readmodel.estimate_reads import (
    estimate_line,
    estimate_words,
    estimated_starts,
    estimated_time,
    summed_clusters,
    worker_figures,
)

JOB = DEDICATED["Job.v1.batch"]
NOW = datetime(2026, 11, 28, 6, 0, 0, tzinfo=UTC)
QUEUE = QueueSpec("q", LabelSelector(), nominal={"cpu": 2000}, borrowing_limit={"cpu": 0})
KNOWN = QueueKnowledge({"q": QUEUE}, {"team-a": {}})


def worker(name: str, *, connected: str = "True", cordoned: bool = False,
           capacity: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    status: dict[str, Any] = {"conditions": [{"type": "Connected", "status": connected}]}
    if capacity is not None:
        status["capacity"] = capacity
    return {"metadata": {"name": name, "labels": {"zone": "a"}},
            "spec": {"cordoned": cordoned}, "status": status}  # fmt: skip


def job(name: str, *, placed: str = "", started: str = "", finished: str = "",
        expected: str = "", deadline: int | None = None, created: str = "") -> dict[str, Any]:  # fmt: skip
    annotations = {"jobrelay.dev/cluster": placed} if placed else {}
    if expected:
        annotations["jobrelay.dev/expected-duration"] = expected
    status: dict[str, Any] = {}
    if started:
        status["startTime"] = started
    if finished:
        status["completionTime"] = finished
        status["conditions"] = [{"type": "Complete", "status": "True"}]
    container = {"name": "c", "image": "b", "resources": {"requests": {"cpu": "1"}}}
    spec: dict[str, Any] = {"template": {"spec": {"containers": [container]}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"metadata": {"name": name, "namespace": "team-a", "annotations": annotations,
                         "creationTimestamp": created or "2026-11-28T05:00:00Z"},
            "spec": spec, "status": status}  # fmt: skip


def test_only_connected_workers_that_take_work_with_figures_count() -> None:
    figures = worker_figures([
        worker("ok", capacity={"allocatable": {"cpu": "8"}, "requested": {"cpu": "2"},
                               "reserved": {"cpu": "1"}}),
        worker("down", connected="False", capacity={"allocatable": {"cpu": "8"}}),
        worker("cordoned", cordoned=True, capacity={"allocatable": {"cpu": "8"}}),
        worker("blank"),
        worker("junk", capacity={"allocatable": {"cpu": "lots"}}),
    ])  # fmt: skip
    assert [(f.name, f.allocatable, f.used) for f in figures.figures] == [
        ("ok", {"cpu": 8000}, {"cpu": 3000})
    ]
    assert figures.labels == {"ok": {"zone": "a"}}


def test_summed_clusters_keep_every_worker_and_its_state() -> None:
    clusters = summed_clusters([
        worker("ok", capacity={"allocatable": {"cpu": "8"}, "requested": {"cpu": "2"}}),
        worker("down", connected="False"),
    ])  # fmt: skip
    ok, down = clusters
    assert ok.capacity is not None and ok.capacity.usable_totals == ({"cpu": 8000}, {"cpu": 2000})
    assert not down.connected and down.capacity is None


def test_declared_then_observed_run_times() -> None:
    workloads = [
        (JOB, job("a", placed="w", started="2026-11-28T05:59:00Z", expected="2m")),
        (JOB, job("b", placed="w", started="2026-11-28T05:59:30Z", deadline=600)),
        (JOB, job("c", created="2026-11-28T05:59:50Z")),
    ]
    found = estimated_starts(workloads, KNOWN, None, NOW)
    assert estimated_time(found["Job team-a/c"]) == "2026-11-28T06:01:00Z"  # a's 2m
    assert found["Job team-a/c"].basis == "declared run times of 1 running ahead"

    done = [
        (JOB, job(f"d{i}", placed="w", started="2026-11-28T04:00:00Z",
                  finished=f"2026-11-28T04:0{i}:00Z"))
        for i in (1, 2, 3)
    ]  # fmt: skip
    silent = [
        (JOB, job("a", placed="w", started="2026-11-28T05:59:00Z")),
        (JOB, job("b", placed="w", started="2026-11-28T05:59:00Z")),
        (JOB, job("c")),
    ]
    found = estimated_starts([*done, *silent], KNOWN, None, NOW)
    assert estimated_time(found["Job team-a/c"]) == "2026-11-28T06:01:00Z"  # median 2m
    assert found["Job team-a/c"].basis == "observed durations in team-a/q"
    unknown = estimated_starts(silent, KNOWN, None, NOW)["Job team-a/c"]
    assert unknown.start is None


def test_words() -> None:
    soon = StartEstimate(NOW.timestamp() + 240, "worker-2", "declared run times of 4 running ahead")
    assert estimate_words(soon, NOW) == "in about 4m"
    assert estimate_words(StartEstimate(NOW.timestamp() + 45, "", ""), NOW) == "in about 45s"
    assert estimate_words(StartEstimate(NOW.timestamp(), "", ""), NOW) == "now"
    assert estimate_words(StartEstimate(None, "", "x"), NOW) == "unknown"
    assert estimate_words(None, NOW) == "-"
    assert estimate_line(soon, NOW) == (
        "in about 4m, on worker-2; basis: declared run times of 4 running ahead"
    )
