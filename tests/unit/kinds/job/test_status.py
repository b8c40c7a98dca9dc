"""Status translation on concrete statuses, as a worker's built-in controller writes them."""

from __future__ import annotations

import copy

import pytest
from tests.unit.kinds.job.jobsim import comparable

from jobrelay.kinds.job import JsonObj
from jobrelay.kinds.job.contract import status_violations
from jobrelay.kinds.job.status import (
    condition,
    finished_condition,
    is_finished,
    is_transitional,
    next_status,
)

T1 = "2026-03-01T12:00:01Z"
T2 = "2026-03-01T12:05:00Z"
T3 = "2026-03-01T12:09:30Z"
NOW = "2026-03-01T12:10:00Z"


def management(spec: JsonObj | None = None, status: JsonObj | None = None) -> JsonObj:
    job: JsonObj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "uid-1"},
        "spec": {
            "managedBy": "jobrelay.dev/relay",
            "parallelism": 1,
            "completions": 1,
            "completionMode": "NonIndexed",
            "backoffLimit": 6,
            "suspend": False,
            **(spec or {}),
        },
    }
    if status is not None:
        job["status"] = status
    return job


def mirror_of(job: JsonObj, status: JsonObj | None, *, suspend: bool = False) -> JsonObj:
    spec = {k: v for k, v in job["spec"].items() if k != "managedBy"}
    mirror: JsonObj = {"metadata": {"name": "train"}, "spec": {**spec, "suspend": suspend}}
    if status is not None:
        mirror["status"] = status
    return mirror


def cond(
    kind: str, reason: str = "", message: str = "", status: str = "True", at: str = T2
) -> JsonObj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": at,
        "lastTransitionTime": at,
    }


def sync(job: JsonObj, mirror: JsonObj | None, now: str = NOW) -> JsonObj:
    """Run one translation; check the write would be accepted and apply it."""
    status = next_status(job, mirror, now=now)
    if status is None:
        return job
    updated = {**job, "status": status}
    assert status_violations(job, updated) == []
    assert next_status(updated, mirror, now=now) is None, "a second sync must write nothing"
    return updated


def follow(job: JsonObj, statuses: list[JsonObj]) -> JsonObj:
    """Feed the mirror statuses in order; the Job must show each one exactly."""
    for status in statuses:
        job = sync(job, mirror_of(job, status))
        assert comparable(job["status"]) == comparable(status)
    return job


SCM_COMPLETIONS = ("CompletionsReached", "Reached expected number of succeeded pods")


def test_plain_success() -> None:
    job = follow(
        management(),
        [
            {"startTime": T1, "active": 1, "ready": 0, "terminating": 0},
            {"startTime": T1, "active": 1, "ready": 1, "terminating": 0},
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 0,
                "uncountedTerminatedPods": {"succeeded": ["p1"]},
                "conditions": [cond("SuccessCriteriaMet", *SCM_COMPLETIONS)],
            },
            {
                "startTime": T1,
                "completionTime": T3,
                "succeeded": 1,
                "ready": 0,
                "terminating": 0,
                "uncountedTerminatedPods": {},
                "conditions": [
                    cond("SuccessCriteriaMet", *SCM_COMPLETIONS),
                    cond("Complete", *SCM_COMPLETIONS, at=T3),
                ],
            },
        ],
    )
    assert is_finished(job)
    assert finished_condition(job) == cond("Complete", *SCM_COMPLETIONS, at=T3)
    assert next_status(job, mirror_of(job, {"active": 3}), now=NOW) is None


def test_parallel_job_shows_counters_as_they_come() -> None:
    job = follow(
        management({"parallelism": 3, "completions": 5}),
        [
            {"startTime": T1, "active": 3, "ready": 2, "terminating": 0},
            {
                "startTime": T1,
                "active": 3,
                "ready": 3,
                "terminating": 0,
                "succeeded": 2,
                "failed": 1,
            },
            {
                "startTime": T1,
                "active": 2,
                "ready": 1,
                "terminating": 1,
                "succeeded": 3,
                "failed": 1,
            },
        ],
    )
    assert job["status"]["succeeded"] == 3


def test_backoff_limit_exceeded_fails_via_failure_target() -> None:
    target = cond(
        "FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    )
    failed = cond("Failed", target["reason"], target["message"], at=T3)
    job = follow(
        management({"backoffLimit": 2, "parallelism": 2, "completions": 2}),
        [
            {"startTime": T1, "active": 2, "ready": 2, "terminating": 0},
            {"startTime": T1, "active": 2, "ready": 1, "terminating": 0, "failed": 2},
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 2,
                "failed": 2,
                "uncountedTerminatedPods": {"failed": ["p3", "p4"]},
                "conditions": [target],
            },
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 0,
                "failed": 4,
                "uncountedTerminatedPods": {},
                "conditions": [target, failed],
            },
        ],
    )
    assert finished_condition(job) == failed
    assert "completionTime" not in job["status"]


def test_stale_mirror_status_never_takes_back_failures_or_terminal_conditions() -> None:
    target = cond(
        "FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    )
    fresh = {
        "startTime": T1,
        "ready": 0,
        "terminating": 1,
        "failed": 3,
        "conditions": [target],
    }
    stale = {"startTime": T1, "active": 1, "ready": 1, "terminating": 0, "failed": 1}
    job = follow(management({"backoffLimit": 2}), [fresh])
    job = sync(job, mirror_of(job, stale))
    assert job["status"]["failed"] == 3
    assert condition(job, "FailureTarget") == target
    assert job["status"]["startTime"] == T1


def test_indexed_job_shows_completed_indexes() -> None:
    job = follow(
        management({"completionMode": "Indexed", "completions": 6, "parallelism": 3}),
        [
            {"startTime": T1, "active": 3, "ready": 3, "terminating": 0},
            {
                "startTime": T1,
                "active": 3,
                "ready": 2,
                "terminating": 0,
                "succeeded": 4,
                "completedIndexes": "0-2,4",
            },
        ],
    )
    stale = {"startTime": T1, "active": 3, "ready": 3, "terminating": 0, "completedIndexes": "1"}
    job = sync(job, mirror_of(job, stale))
    assert job["status"]["completedIndexes"] == "0-2,4"
    assert job["status"]["succeeded"] == 4


def test_backoff_limit_per_index_shows_failed_indexes() -> None:
    spec = {
        "completionMode": "Indexed",
        "completions": 4,
        "parallelism": 2,
        "backoffLimit": 2147483647,
        "backoffLimitPerIndex": 0,
    }
    target = cond("FailureTarget", "FailedIndexes", "Job has failed indexes")
    job = follow(
        management(spec),
        [
            {"startTime": T1, "active": 2, "ready": 0, "terminating": 0, "failedIndexes": ""},
            {
                "startTime": T1,
                "active": 2,
                "ready": 2,
                "terminating": 0,
                "failed": 1,
                "succeeded": 1,
                "completedIndexes": "0",
                "failedIndexes": "1",
            },
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 0,
                "failed": 1,
                "succeeded": 3,
                "completedIndexes": "0,2-3",
                "failedIndexes": "1",
                "uncountedTerminatedPods": {},
                "conditions": [target],
            },
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 0,
                "failed": 1,
                "succeeded": 3,
                "completedIndexes": "0,2-3",
                "failedIndexes": "1",
                "uncountedTerminatedPods": {},
                "conditions": [target, cond("Failed", target["reason"], target["message"], at=T3)],
            },
        ],
    )
    assert is_finished(job)


def test_success_policy_completes_via_success_criteria_met() -> None:
    spec = {
        "completionMode": "Indexed",
        "completions": 5,
        "parallelism": 5,
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
    }
    met = cond("SuccessCriteriaMet", "SuccessPolicy", "Matched rules at index 0")
    job = follow(
        management(spec),
        [
            {"startTime": T1, "active": 5, "ready": 5, "terminating": 0},
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 4,
                "succeeded": 1,
                "completedIndexes": "0",
                "conditions": [met],
            },
            {
                "startTime": T1,
                "completionTime": T3,
                "ready": 0,
                "terminating": 0,
                "succeeded": 1,
                "completedIndexes": "0",
                "conditions": [met, cond("Complete", met["reason"], met["message"], at=T3)],
            },
        ],
    )
    assert job["status"]["completionTime"] == T3


def test_pod_failure_policy_fail_job() -> None:
    target = cond(
        "FailureTarget",
        "PodFailurePolicy",
        "Container main for pod team-a/train-x exited with code 42 matching FailJob rule at index 0",
    )
    spec = {
        "podReplacementPolicy": "Failed",
        "podFailurePolicy": {
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        },
    }
    job = follow(
        management(spec),
        [
            {"startTime": T1, "active": 1, "ready": 1, "terminating": 0},
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 0,
                "uncountedTerminatedPods": {"failed": ["p1"]},
                "conditions": [target],
            },
            {
                "startTime": T1,
                "ready": 0,
                "terminating": 0,
                "failed": 1,
                "conditions": [target, cond("Failed", target["reason"], target["message"], at=T3)],
            },
        ],
    )
    assert finished_condition(job)["reason"] == "PodFailurePolicy"  # type: ignore[index]


def test_created_suspended_and_not_placed_shows_only_suspended() -> None:
    job = management({"suspend": True})
    assert next_status(job, None, now=NOW) == {
        "active": 0,
        "conditions": [cond("Suspended", "JobSuspended", "Job suspended", at=NOW)],
    }


def test_resumed_before_placement_turns_suspended_false() -> None:
    job = sync(management({"suspend": True}), None, now=T1)
    job["spec"]["suspend"] = False
    job = sync(job, None, now=T2)
    assert job["status"]["conditions"] == [
        cond("Suspended", "JobResumed", "Job resumed", "False", T2)
    ]
    assert "startTime" not in job["status"]


def test_nothing_to_write_without_mirror_and_without_suspend() -> None:
    assert next_status(management(), None, now=NOW) is None


def test_suspend_and_resume_of_a_running_job() -> None:
    running = {"startTime": T1, "active": 2, "ready": 2, "terminating": 0, "succeeded": 1}
    job = follow(management({"parallelism": 2, "completions": 4}), [running])

    # The user suspends; the mirror still runs until its own suspend lands.
    job["spec"]["suspend"] = True
    job = sync(job, mirror_of(job, running))
    assert "startTime" not in job["status"]
    assert condition(job, "Suspended") == cond("Suspended", "JobSuspended", "Job suspended", at=NOW)
    assert job["status"]["active"] == 2

    # The mirror is suspended by the worker's controller: its Pods go away.
    paused_mirror = {
        "startTime": T1,
        "ready": 0,
        "terminating": 2,
        "succeeded": 1,
        "conditions": [cond("Suspended", "JobSuspended", "Job suspended", at=T2)],
    }
    job = sync(job, mirror_of(job, paused_mirror, suspend=True), now=T2)
    assert job["status"].get("active", 0) == 0
    assert "startTime" not in job["status"]

    # The user resumes; the mirror has not yet seen it and still shows its old start.
    job["spec"]["suspend"] = False
    job = sync(job, mirror_of(job, paused_mirror), now=T3)
    assert condition(job, "Suspended") == cond(
        "Suspended", "JobResumed", "Job resumed", "False", T3
    )
    assert "startTime" not in job["status"]

    # The worker resumes the mirror and resets its startTime; the Job takes it.
    resumed_at = "2026-03-01T12:09:31Z"
    resumed = {
        "startTime": resumed_at,
        "active": 2,
        "ready": 0,
        "terminating": 0,
        "succeeded": 1,
        "conditions": [cond("Suspended", "JobResumed", "Job resumed", "False", resumed_at)],
    }
    job = sync(job, mirror_of(job, resumed))
    assert job["status"]["startTime"] == resumed_at
    assert condition(job, "Suspended") == cond(
        "Suspended", "JobResumed", "Job resumed", "False", T3
    )


def test_resumed_before_the_mirrors_suspend_landed_waits_for_the_mirror() -> None:
    """Suspended and resumed quickly: the mirror's own suspend may still be pending.

    Its startTime may yet be cleared or reset by the worker, so the Job waits
    until the mirror runs unsuspended again before showing one.
    """
    running = {"startTime": T1, "active": 1, "ready": 1, "terminating": 0}
    job = follow(management(), [running])
    job["spec"]["suspend"] = True
    job = sync(job, mirror_of(job, running), now=T2)
    job["spec"]["suspend"] = False
    job = sync(job, mirror_of(job, running, suspend=True), now=T3)
    assert "startTime" not in job["status"]
    job = sync(job, mirror_of(job, running))
    assert job["status"]["startTime"] == T1


def test_mirror_finishing_before_its_suspend_lands() -> None:
    running = {"startTime": T1, "active": 1, "ready": 1, "terminating": 0}
    job = follow(management(), [running])
    job["spec"]["suspend"] = True
    job = sync(job, mirror_of(job, running), now=T2)
    complete = {
        "startTime": T1,
        "completionTime": T3,
        "succeeded": 1,
        "ready": 0,
        "terminating": 0,
        "conditions": [
            cond("SuccessCriteriaMet", *SCM_COMPLETIONS),
            cond("Complete", *SCM_COMPLETIONS, at=T3),
        ],
    }
    job = sync(job, mirror_of(job, complete))
    assert is_finished(job)
    assert job["status"]["startTime"] == T1
    assert condition(job, "Suspended") == cond("Suspended", "JobSuspended", "Job suspended", at=T2)


def test_suspended_job_loses_a_mirror_shows_nothing_running() -> None:
    status = {"startTime": T1, "active": 2, "ready": 1, "terminating": 1, "failed": 2}
    job = management({"suspend": True}, status=status)
    new = next_status(job, None, now=NOW)
    assert new is not None
    assert new["active"] == new["ready"] == new["terminating"] == 0
    assert new["failed"] == 2
    assert "startTime" not in new


def test_elastic_indexed_job_scaled_down_drops_indexes_beyond_completions() -> None:
    spec = {"completionMode": "Indexed", "completions": 2, "parallelism": 2}
    status = {"startTime": T1, "active": 0, "succeeded": 4, "completedIndexes": "0-3"}
    job = management(spec, status=status)
    lagging_mirror = mirror_of(job, copy.deepcopy(status))
    job = sync(job, lagging_mirror)
    assert job["status"]["completedIndexes"] == "0-1"
    assert job["status"]["succeeded"] == 2


def test_finished_job_is_frozen() -> None:
    failed = {
        "startTime": T1,
        "failed": 1,
        "conditions": [
            cond(
                "FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline"
            ),
            cond("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"),
        ],
    }
    job = management(status=failed)
    assert next_status(job, mirror_of(job, {"startTime": T2, "active": 1}), now=NOW) is None
    assert next_status(job, None, now=NOW) is None


def test_input_objects_are_not_mutated() -> None:
    status = {"startTime": T1, "active": 1, "ready": 1, "terminating": 0}
    job = management({"suspend": True}, status={"startTime": T1, "conditions": []})
    mirror = mirror_of(job, status)
    before = copy.deepcopy((job, mirror))
    new = next_status(job, mirror, now=NOW)
    assert new is not None
    new["conditions"].append({"type": "x"})
    assert (job, mirror) == before


def test_condition_helpers() -> None:
    job = management(status={"conditions": [cond("Suspended", "JobSuspended", "Job suspended")]})
    assert condition(job, "Suspended") is not None
    assert condition(job, "Complete") is None
    assert finished_condition(job) is None
    assert not is_finished(management())


def _true(kind: str) -> dict[str, str]:
    return {"type": kind, "status": "True"}


@pytest.mark.parametrize(
    ("old", "new", "transitional"),
    [
        ({"active": 1, "ready": 0}, {"active": 1, "ready": 1}, True),
        ({"active": 1, "terminating": 0}, {"active": 0, "terminating": 1}, False),
        ({"active": 1, "terminating": 1}, {"active": 1, "terminating": 0}, True),
        ({"active": 1}, {"active": 1}, False),
        # A run's start waits for its next step (a short run's end: one write).
        ({}, {"startTime": T1, "active": 1}, True),
        ({}, {"startTime": T1, "active": 1, "ready": 1}, True),
        # Not a start: the run was shown started already, or more than a start changes.
        ({"startTime": T1}, {"startTime": T1, "active": 1}, False),
        ({}, {"startTime": T1, "active": 0, "failed": 1}, False),
        ({"active": 1}, {"succeeded": 1, "conditions": [_true("SuccessCriteriaMet")]}, True),
        ({"active": 1}, {"failed": 1, "conditions": [_true("FailureTarget")]}, True),
        (
            {"active": 1},
            {"succeeded": 1, "conditions": [_true("SuccessCriteriaMet"), _true("Complete")]},
            False,
        ),
        # The target is shown already: what changes besides is copied at once.
        (
            {"conditions": [_true("SuccessCriteriaMet")], "succeeded": 1},
            {"conditions": [_true("SuccessCriteriaMet")], "succeeded": 2},
            False,
        ),
    ],
)
def test_which_steps_may_wait_for_the_next(old: JsonObj, new: JsonObj, transitional: bool) -> None:
    assert is_transitional(old, new) is transitional
