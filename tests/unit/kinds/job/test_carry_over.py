"""Carry-over: a Job whose run ends without finishing (worker lost, mirror deleted)
runs again with only what remains, and its status adds both runs up, legally.

The first run's history comes from the built-in controller model (jobsim) and
is cut at any point; the second run is the model running the mirror jobrelay
builds for what remains. The judge of every write is contract.status_violations.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from tests.unit.kinds.job.jobsim import BuiltinJobController, JobShape, management_job, ts
from tests.unit.kinds.job.strategies import shapes
from tests.unit.kinds.job.test_status_properties import assert_not_backwards, shown_indexes

from jobrelay.kinds.job import JsonObj
from jobrelay.kinds.job.carry import Carry, carry_of, remaining_spec
from jobrelay.kinds.job.conditions import COMPLETE, FAILED, finished_condition
from jobrelay.kinds.job.contract import status_violations
from jobrelay.kinds.job.mirror import build_mirror
from jobrelay.kinds.job.status import failed_status, is_finished, next_status
from jobrelay.vocabulary.names import CARRIED_OVER_ANNOTATION, RUN_ANNOTATION

CONTROLLER = "jobrelay.dev/relay"


def write(job: JsonObj, status: JsonObj | None) -> JsonObj:
    """Apply a status write, failing on one the apiserver would reject."""
    if status is None:
        return job
    updated = {**job, "status": status}
    violations = status_violations(job, updated)
    assert violations == [], (violations, job.get("status"), status)
    return updated


def second_run_shape(shape: JobShape, spec: JsonObj) -> JobShape:
    """The shape of the mirror built for what remains."""
    return JobShape(
        indexed=shape.indexed,
        completions=spec.get("completions"),
        parallelism=spec["parallelism"],
        backoff_limit=spec["backoffLimit"],
        backoff_limit_per_index=shape.backoff_limit_per_index,
        success_policy_count=shape.success_policy_count,
        fail_job_on_exit_42=shape.fail_job_on_exit_42,
    )


@settings(max_examples=200, deadline=None)
@given(
    shapes(),
    st.lists(st.integers(0, 999), min_size=5, max_size=40),
    st.lists(st.integers(0, 999), min_size=10, max_size=60),
    st.data(),
)
def test_a_second_run_adds_up_and_every_write_is_legal(
    shape: JobShape, first_choices: list[int], second_choices: list[int], data: st.DataObject
) -> None:
    first = BuiltinJobController(shape).run(first_choices)
    cut = data.draw(st.integers(0, len(first) - 1), label="first run lost after mirror")
    job = management_job(shape)
    step = 0
    for mirror in first[: cut + 1]:
        step += 1
        job = write(job, next_status(job, mirror, now=ts(5_000 + step)))
    if is_finished(job):
        return
    # The run is over: nothing of it runs now, and it may have decided the outcome.
    before, job = job, write(job, next_status(job, None, now=ts(9_000)))
    assert_not_backwards(before, job)
    assert not (job.get("status") or {}).get("active")
    if is_finished(job):
        return
    event("a second run")
    carry = carry_of(job, now=ts(9_000))
    body = build_mirror(job, controller_name=CONTROLLER, origin="m", run=2, now=ts(9_000))
    assert body["metadata"]["annotations"][RUN_ANNOTATION] == "2"
    assert json.loads(body["metadata"]["annotations"].get(CARRIED_OVER_ANNOTATION, "{}")) == (
        carry.to_json()
    )
    controller = BuiltinJobController(second_run_shape(shape, body["spec"]), clock=10_000)
    second = controller.run(second_choices)
    for mirror in second:
        mirror["metadata"] = body["metadata"]
        step += 1
        before, job = job, write(job, next_status(job, mirror, now=ts(20_000 + step)))
        assert_second_run_not_backwards(before, job)
    final = second[-1]
    status, theirs = job.get("status") or {}, final.get("status") or {}
    assert status.get("startTime") == (before.get("status") or {}).get("startTime") or not status
    assert status.get("failed", 0) == carry.failed + theirs.get("failed", 0)
    if not shape.indexed:
        assert status.get("succeeded", 0) == carry.succeeded + theirs.get("succeeded", 0)
    else:
        assert shown_indexes(job, "completedIndexes") >= shown_indexes(final, "completedIndexes")
    if is_finished(final):
        mine, theirs_final = finished_condition(job), finished_condition(final)
        assert mine is not None and theirs_final is not None
        assert mine["type"] == theirs_final["type"]
    complete = (finished_condition(job) or {}).get("type") == COMPLETE
    if not shape.indexed and shape.completions is not None and complete:
        assert status["succeeded"] >= shape.completions


def assert_second_run_not_backwards(before: JsonObj, after: JsonObj) -> None:
    """As within one run, except that an index an earlier run failed for good and the
    new run (which runs every index again) completes counts as completed from then on."""
    for field in ("succeeded", "failed"):
        assert after.get("status", {}).get(field, 0) >= before.get("status", {}).get(field, 0)
    completed = shown_indexes(after, "completedIndexes")
    assert completed >= shown_indexes(before, "completedIndexes")
    assert shown_indexes(after, "failedIndexes") | completed >= shown_indexes(
        before, "failedIndexes"
    )


SPEC = {"completions": 6, "parallelism": 4, "backoffLimit": 3, "activeDeadlineSeconds": 600}


@pytest.mark.parametrize(
    ("spec", "carry", "expected"),
    [
        (SPEC, Carry(), SPEC),
        (
            SPEC,
            Carry(succeeded=4, failed=1, elapsedSeconds=100),
            {"completions": 2, "parallelism": 2, "backoffLimit": 2, "activeDeadlineSeconds": 500},
        ),
        (  # a deadline already passed still gives the new mirror a second to fail by itself
            SPEC,
            Carry(failed=9, elapsedSeconds=900),
            {"completions": 6, "parallelism": 4, "backoffLimit": 0, "activeDeadlineSeconds": 1},
        ),
        (  # Indexed: every index runs again; only retries and time are reduced
            {"completionMode": "Indexed", "completions": 4, "parallelism": 4, "backoffLimit": 3},
            Carry(succeeded=2, failed=1, completedIndexes="0-1"),
            {"completionMode": "Indexed", "completions": 4, "parallelism": 4, "backoffLimit": 2},
        ),
        (  # no completions: a work queue, left as it is
            {"parallelism": 3, "backoffLimit": 6},
            Carry(failed=2),
            {"parallelism": 3, "backoffLimit": 4},
        ),
    ],
)
def test_remaining_spec(spec: JsonObj, carry: Carry, expected: JsonObj) -> None:
    assert remaining_spec(spec, carry) == expected


def test_the_record_reads_back_leniently() -> None:
    carry = Carry(succeeded=2, failed=1, completedIndexes="0,2", elapsedSeconds=30)
    assert Carry.from_json(carry.to_json()) == carry
    assert Carry.from_json({"succeeded": "many", "failed": 3, "other": 1}) == Carry(failed=3)
    assert not Carry()


def test_a_job_failed_for_a_lost_worker_is_legal_and_says_why() -> None:
    shape = JobShape(completions=3, parallelism=2)
    running = {"startTime": ts(1), "active": 2, "ready": 1, "succeeded": 1}
    job = management_job(shape, status=running)
    status = failed_status(job, "WorkerLost", "worker w1 was lost", now=ts(100))
    assert status is not None
    failed = write(job, status)
    condition = finished_condition(failed)
    assert condition is not None and condition["type"] == FAILED
    assert (condition["reason"], condition["message"]) == ("WorkerLost", "worker w1 was lost")
    assert failed["status"]["active"] == 0 and failed["status"]["succeeded"] == 1
    assert failed_status(failed, "WorkerLost", "again", now=ts(200)) is None


@pytest.mark.parametrize("indexed", [False, True])
def test_pods_ended_but_not_counted_count_when_the_run_ends(indexed: bool) -> None:
    """The worker met the success criteria while its last pods were still uncounted; then
    it was lost. Those pods succeeded: the Job completes with every completion, as the
    built-in controller would have ended it (seen in the chaos test)."""
    shape = JobShape(indexed=indexed, completions=4, parallelism=2)
    interim = {
        "type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
        "message": "Reached expected number of succeeded pods",
        "lastProbeTime": ts(5), "lastTransitionTime": ts(5),
    }  # fmt: skip
    shown = {
        "startTime": ts(1),
        "active": 0,
        "succeeded": 2,
        "uncountedTerminatedPods": {"succeeded": ["u3", "u4"]},
        "conditions": [interim],
        **({"completedIndexes": "0-1"} if indexed else {}),
    }
    job = management_job(shape, status=shown)
    ended = write(job, next_status(job, None, now=ts(100)))
    assert (finished_condition(ended) or {}).get("type") == COMPLETE
    assert ended["status"]["succeeded"] == 4
    assert "uncountedTerminatedPods" not in ended["status"]
    if indexed:
        assert ended["status"]["completedIndexes"] == "0-3"
