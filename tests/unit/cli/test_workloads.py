"""What `jobrelay get` says of a workload: state and reason, completions, ages (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.cli import workloads
from jobrelay.cli.workloads import Standing, State, human_duration, standing
from jobrelay.kinds.catalog import DEDICATED

JOB = DEDICATED["Job.v1.batch"]
JOBSET = DEDICATED["JobSet.v1alpha2.jobset.x-k8s.io"]
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PLACED = {"jobrelay.dev/cluster": "worker-1", "jobrelay.dev/placements": "worker-1"}
HELD = {"jobrelay.dev/not-placed": "NotPlaced: worker-1: no node has 4 nvidia.com/gpu free"}
BLOCKED = {**PLACED, "jobrelay.dev/blocked": "worker-1: FailedCreate: exceeded quota: pods=0"}
RESTORED = {**PLACED, "jobrelay.dev/restored-held": "restored with a new UID ...: kubectl annotate"}


def job(
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "hello", "namespace": "team-a", "annotations": annotations or {},
            "creationTimestamp": "2026-01-02T03:00:00Z",
        },
        "spec": {"managedBy": "jobrelay.dev/relay", **spec},
        "status": status or {},
    }  # fmt: skip


def condition(kind: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


COMPLETE = {
    "succeeded": 1,
    "startTime": "2026-01-02T03:00:10Z",
    "completionTime": "2026-01-02T03:01:10Z",
    "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
}
FAILED = {
    "failed": 2,
    "startTime": "2026-01-02T03:00:10Z",
    "conditions": [
        condition("FailureTarget", "BackoffLimitExceeded"),
        condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
    ],
}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (job(), Standing(State.PENDING)),
        (job(HELD), Standing(State.HELD, HELD["jobrelay.dev/not-placed"])),
        (job(PLACED), Standing(State.DISPATCHED)),
        (job(PLACED, {"active": 1, "startTime": "2026-01-02T03:00:10Z"}), Standing(State.RUNNING)),
        # It ran (now between runs, say): still Running, not Dispatched.
        (job(PLACED, {"startTime": "2026-01-02T03:00:10Z"}), Standing(State.RUNNING)),
        (job(BLOCKED), Standing(State.BLOCKED, BLOCKED["jobrelay.dev/blocked"])),
        # Restored from a backup, its running mirror not adopted yet: the note says how.
        (
            job(RESTORED, {"active": 1}),
            Standing(State.BLOCKED, RESTORED["jobrelay.dev/restored-held"]),
        ),
        # Blocked wins over Running: some pods run, the rest cannot be created.
        (job(BLOCKED, {"active": 1}), Standing(State.BLOCKED, BLOCKED["jobrelay.dev/blocked"])),
        (job(HELD, suspend=True), Standing(State.SUSPENDED)),
        (job(PLACED, {"active": 0}, suspend=True), Standing(State.SUSPENDED)),
        (job(PLACED, COMPLETE), Standing(State.COMPLETE)),
        (
            job(BLOCKED, COMPLETE),
            Standing(State.COMPLETE),
        ),  # a stale annotation never hides the end
        (
            job(PLACED, FAILED),
            Standing(
                State.FAILED,
                "BackoffLimitExceeded: Job has reached the specified backoff limit",
            ),
        ),
        # The cluster annotation decides "placed"; a leftover reason does not hold it back.
        (job({**PLACED, **HELD}), Standing(State.DISPATCHED)),
    ],
)
def test_the_state_of_a_job(obj: dict[str, Any], expected: Standing) -> None:
    assert standing(JOB, obj) == expected


def jobset(annotations: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "team-a", "annotations": annotations,
                     "creationTimestamp": "2026-01-02T03:00:00Z"},
        "spec": {"replicatedJobs": [{"name": "a", "replicas": 2}, {"name": "b"}]},
        "status": status,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("status", "state", "shown"),
    [
        ({}, State.DISPATCHED, "0/3"),
        ({"replicatedJobsStatus": [{"name": "a", "active": 2}]}, State.RUNNING, "0/3"),
        (
            {
                "replicatedJobsStatus": [
                    {"name": "a", "succeeded": 2},
                    {"name": "b", "succeeded": 1},
                ],
                "conditions": [
                    {**condition("Completed"), "lastTransitionTime": "2026-01-02T03:02:00Z"}
                ],
            },
            State.COMPLETE,
            "3/3",
        ),
    ],
)
def test_the_state_and_completions_of_a_jobset(
    status: dict[str, Any], state: State, shown: str
) -> None:
    obj = jobset(PLACED, status)
    assert standing(JOBSET, obj).state is state
    assert workloads.completions(obj) == shown


def test_a_finished_jobset_lasted_from_creation_to_its_condition() -> None:
    obj = jobset(PLACED, {"conditions": [{**condition("Completed"),
                                          "lastTransitionTime": "2026-01-02T03:02:00Z"}]})  # fmt: skip
    assert workloads.duration(obj, NOW) == "2m"


@pytest.mark.parametrize(
    ("spec", "succeeded", "shown"),
    [
        ({"completions": 3}, 1, "1/3"),
        ({}, 0, "0/1"),
        ({"parallelism": 4}, 2, "2/1 of 4"),  # a work queue: kubectl's words
        ({"parallelism": 1}, 1, "1/1"),
    ],
)
def test_completions_as_kubectl_prints_them(
    spec: dict[str, Any], succeeded: int, shown: str
) -> None:
    assert workloads.completions(job(status={"succeeded": succeeded}, **spec)) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"), (-0.5, "0s"), (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"),
        (125, "2m5s"), (599, "9m59s"), (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"), (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"),
        (50 * 3600, "2d2h"), (8 * 86400, "8d"), (2 * 365 * 86400, "2y"),
        (2 * 365 * 86400 + 86400, "2y1d"), (9 * 365 * 86400, "9y"),
    ],
)  # fmt: skip
def test_human_duration_is_kubectls(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


@given(st.floats(min_value=0, max_value=20 * 365 * 86400))
def test_human_duration_is_short_and_never_invalid_for_real_ages(seconds: float) -> None:
    shown = human_duration(seconds)
    assert shown != "<invalid>"
    assert len(shown) <= 7
    assert shown[-1] in "smhdy"


def test_a_row_has_every_column() -> None:
    obj = job(PLACED, COMPLETE, completions=1)
    row = workloads.row(JOB, obj, NOW)
    assert row.cells() == (
        "team-a", "hello", "Job", "worker-1", "Complete", "1/1", "4m5s", "60s"
    )  # fmt: skip
    assert row.cells(wide=True)[-4:] == ("worker-1", "-", "-", "-")  # ESTIMATED START last
    running = workloads.row(
        JOB, job(PLACED, {"active": 1, "startTime": "2026-01-02T03:00:05Z"}), NOW
    )
    assert running.duration == "4m"  # up to now while it runs
    assert workloads.row(JOB, job(), NOW).duration == "-"


def test_a_watch_sees_no_change_when_only_time_passed() -> None:
    obj = job(PLACED, {"active": 1, "startTime": "2026-01-02T03:00:05Z"})
    later = workloads.row(JOB, obj, NOW + timedelta(hours=1))
    assert workloads.row(JOB, obj, NOW).identity() == later.identity()


def test_the_table_pads_every_column_but_the_reason() -> None:
    lines = workloads.table(
        [("a", "Held", "a long reason"), ("bbbb", "Running", "")], ("NAME", "STATE", "REASON")
    )
    assert lines == [
        "NAME   STATE     REASON",
        "a      Held      a long reason",
        "bbbb   Running",
    ]
