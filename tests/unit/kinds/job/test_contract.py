"""The contract checker: it accepts what the built-in controller writes and flags known-bad writes."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.kinds.job.jobsim import JobShape, management_job, ts
from tests.unit.kinds.job.strategies import histories

from jobrelay.kinds.job import JsonObj
from jobrelay.kinds.job.contract import status_violations

T1, T2, T3 = ts(1), ts(60), ts(120)


def true(kind: str) -> JsonObj:
    return {"type": kind, "status": "True", "reason": "R", "message": "m", "lastTransitionTime": T2}


def job(status: JsonObj, **spec: object) -> JsonObj:
    shape = JobShape(indexed=spec.pop("indexed", False) is True, completions=4, parallelism=2)
    result = management_job(shape, status=status)
    result["spec"].update(spec)
    return result


def rules(old: JsonObj, new: JsonObj) -> set[int]:
    """The numbers of the rules a write breaks."""
    return {int(v.rsplit("[rule ", 1)[1].rstrip("]")) for v in status_violations(old, new)}


RUNNING = {"startTime": T1, "active": 2, "ready": 1, "terminating": 0, "succeeded": 1, "failed": 1}
COMPLETE = {
    "startTime": T1,
    "completionTime": T3,
    "succeeded": 4,
    "failed": 1,
    "conditions": [true("SuccessCriteriaMet"), true("Complete")],
}
FAILED = {
    "startTime": T1,
    "succeeded": 1,
    "failed": 3,
    "conditions": [true("FailureTarget"), true("Failed")],
}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({}, RUNNING),
        (RUNNING, COMPLETE),
        (RUNNING, FAILED),
        (RUNNING, {**RUNNING, "succeeded": 2, "active": 1, "ready": 1}),
        (RUNNING, {**RUNNING, "uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["b"]}}),
    ],
)
def test_legal_writes_pass(old: JsonObj, new: JsonObj) -> None:
    assert status_violations(job(old), job(new)) == []


@pytest.mark.parametrize(
    ("old", "new", "spec", "rule"),
    [
        (RUNNING, {**RUNNING, "ready": -1}, {}, 1),
        (RUNNING, {**RUNNING, "uncountedTerminatedPods": {"failed": [""]}}, {}, 2),
        (
            RUNNING,
            {**RUNNING, "uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["a"]}},
            {},
            2,
        ),
        (RUNNING, {**RUNNING, "uncountedTerminatedPods": {"failed": ["a", "a"]}}, {}, 2),
        (COMPLETE, {**COMPLETE, "conditions": [true("SuccessCriteriaMet")]}, {}, 3),
        ({**RUNNING, "conditions": [true("FailureTarget")]}, RUNNING, {}, 3),
        (
            {**COMPLETE, "conditions": [true("Complete")]},
            {**COMPLETE, "conditions": [true("Complete"), true("SuccessCriteriaMet")]},
            {},
            4,
        ),
        (
            RUNNING,
            {**RUNNING, "conditions": [true("FailureTarget"), true("SuccessCriteriaMet")]},
            {},
            4,
        ),
        (
            RUNNING,
            {**COMPLETE, "conditions": [true("Complete")]},
            {"successPolicy": {"rules": []}},
            5,
        ),
        (RUNNING, {**RUNNING, "failed": 0}, {}, 6),
        (RUNNING, {**RUNNING, "succeeded": 0}, {}, 6),
        (COMPLETE, {**COMPLETE, "completionTime": ts(121)}, {}, 7),
        (
            RUNNING,
            {**COMPLETE, "conditions": [*COMPLETE["conditions"], true("FailureTarget")]},
            {},
            8,
        ),
        (RUNNING, {**RUNNING, "completionTime": T3}, {}, 9),
        (RUNNING, {**COMPLETE, "completionTime": None}, {}, 9),
        (RUNNING, {**COMPLETE, "completionTime": ts(0)}, {}, 9),
        (RUNNING, {**FAILED, "active": 1, "ready": 0}, {}, 10),
        (RUNNING, {**FAILED, "terminating": 1}, {}, 10),
        (RUNNING, {**FAILED, "uncountedTerminatedPods": {"failed": ["x"]}}, {}, 10),
        ({}, {**FAILED, "startTime": None}, {}, 10),
        (RUNNING, {**RUNNING, "ready": 3}, {}, 11),
        (RUNNING, {**FAILED, "conditions": [true("Failed")]}, {}, 12),
        (RUNNING, {**COMPLETE, "conditions": [true("Complete")]}, {}, 12),
        (RUNNING, {**RUNNING, "completedIndexes": "0"}, {}, 13),
        (RUNNING, {**RUNNING, "completedIndexes": "2,1"}, {"indexed": True}, 13),
        (RUNNING, {**RUNNING, "completedIndexes": "3-1"}, {"indexed": True}, 13),
        (RUNNING, {**RUNNING, "completedIndexes": "0-4"}, {"indexed": True}, 13),
        (RUNNING, {**RUNNING, "failedIndexes": "1"}, {"indexed": True}, 13),
        (
            RUNNING,
            {**RUNNING, "completedIndexes": "0-2", "failedIndexes": "2"},
            {"indexed": True, "backoffLimitPerIndex": 1},
            13,
        ),
        (RUNNING, {**RUNNING, "startTime": T2}, {}, 14),
        (RUNNING, {**RUNNING, "startTime": None}, {}, 14),
    ],
)
def test_known_bad_writes_are_flagged(
    old: JsonObj, new: JsonObj, spec: dict[str, object], rule: int
) -> None:
    assert rule in rules(job(old, **spec), job(new, **spec))


def test_elastic_indexed_job_may_lose_succeeded() -> None:
    spec = {"indexed": True, "completions": 2, "parallelism": 2}
    old = {**RUNNING, "succeeded": 3, "completedIndexes": "0-2"}
    new = {**RUNNING, "succeeded": 2, "completedIndexes": "0-1"}
    assert status_violations(job(old, **spec), job(new, **spec)) == []


def test_suspended_job_may_change_start_time() -> None:
    restarted = {**RUNNING, "startTime": T2}
    cleared = {k: v for k, v in RUNNING.items() if k != "startTime"}
    for new in (restarted, cleared):
        assert status_violations(job(RUNNING, suspend=True), job(new, suspend=True)) == []


def test_unchanged_fields_are_not_judged_again() -> None:
    """Like the apiserver: a write that leaves an inconsistent field alone is not blocked by it."""
    inconsistent = {**RUNNING, "ready": 3, "completionTime": T3}
    assert status_violations(job(inconsistent), job({**inconsistent, "succeeded": 2})) == []


# Property tests: histories from the built-in controller model are legal, and
# each known-bad change to one of their writes is flagged.


@settings(max_examples=150, deadline=None)
@given(histories(suspend_styles=("none", "clear")))
def test_builtin_controller_histories_pass(history: tuple[JobShape, list[JsonObj]]) -> None:
    _, mirrors = history
    for old, new in itertools.pairwise(mirrors):
        assert status_violations(old, new) == [], (old.get("status"), new.get("status"))


Corruption = Callable[[JsonObj, JsonObj], JsonObj | None]


def _status(job: JsonObj) -> JsonObj:
    status: JsonObj = job.setdefault("status", {})
    return status


def _is_true(job: JsonObj, kind: str) -> bool:
    conditions = job.get("status", {}).get("conditions", [])
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def negative_counter(_: JsonObj, new: JsonObj) -> JsonObj:
    _status(new)["failed"] = -1
    return new


def uid_both_succeeded_and_failed(_: JsonObj, new: JsonObj) -> JsonObj:
    _status(new)["uncountedTerminatedPods"] = {"succeeded": ["u"], "failed": ["u"]}
    return new


def more_ready_than_active(_: JsonObj, new: JsonObj) -> JsonObj:
    _status(new)["ready"] = _status(new).get("active", 0) + 1
    return new


def drop_a_terminal_condition(old: JsonObj, new: JsonObj) -> JsonObj | None:
    for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"):
        if _is_true(old, kind):
            conditions = _status(new)["conditions"]
            _status(new)["conditions"] = [c for c in conditions if c["type"] != kind]
            return new
    return None


def decrease_failed(old: JsonObj, new: JsonObj) -> JsonObj | None:
    if old.get("status", {}).get("failed", 0) == 0:
        return None
    _status(new)["failed"] = old["status"]["failed"] - 1
    return new


def decrease_succeeded(old: JsonObj, new: JsonObj) -> JsonObj | None:
    spec = new["spec"]
    elastic = spec["completionMode"] == "Indexed" and spec.get("completions") == spec["parallelism"]
    if elastic or old.get("status", {}).get("succeeded", 0) == 0:
        return None
    _status(new)["succeeded"] = old["status"]["succeeded"] - 1
    return new


def complete_without_completion_time(old: JsonObj, new: JsonObj) -> JsonObj | None:
    if not _is_true(new, "Complete") or _is_true(old, "Complete"):
        return None
    del _status(new)["completionTime"]
    return new


def completion_time_without_complete(_: JsonObj, new: JsonObj) -> JsonObj | None:
    if _is_true(new, "Complete"):
        return None
    _status(new)["completionTime"] = ts(10_000)
    return new


def finished_with_active_pods(old: JsonObj, new: JsonObj) -> JsonObj | None:
    finished = ("Complete", "Failed")
    if not any(_is_true(new, k) for k in finished) or any(_is_true(old, k) for k in finished):
        return None
    _status(new)["active"] = 1
    return new


def failed_without_failure_target(old: JsonObj, new: JsonObj) -> JsonObj | None:
    if not _is_true(new, "Failed") or _is_true(old, "Failed"):
        return None
    _status(new)["conditions"] = [
        c for c in new["status"]["conditions"] if c["type"] != "FailureTarget"
    ]
    return new


def complete_and_failed(old: JsonObj, new: JsonObj) -> JsonObj | None:
    if not _is_true(new, "Complete") or _is_true(old, "Complete"):
        return None
    _status(new)["conditions"].append(true("Failed"))
    return new


def move_start_time(old: JsonObj, new: JsonObj) -> JsonObj | None:
    if old.get("status", {}).get("startTime") is None or new["spec"]["suspend"]:
        return None
    _status(new)["startTime"] = ts(5_000)
    return new


def index_beyond_completions(_: JsonObj, new: JsonObj) -> JsonObj | None:
    if new["spec"]["completionMode"] != "Indexed":
        return None
    _status(new)["completedIndexes"] = str(new["spec"]["completions"])
    return new


def failed_index_also_completed(_: JsonObj, new: JsonObj) -> JsonObj | None:
    completed = new.get("status", {}).get("completedIndexes")
    if "backoffLimitPerIndex" not in new["spec"] or not completed:
        return None
    _status(new)["failedIndexes"] = completed
    return new


CORRUPTIONS: list[tuple[Corruption, int]] = [
    (negative_counter, 1),
    (uid_both_succeeded_and_failed, 2),
    (drop_a_terminal_condition, 3),
    (decrease_failed, 6),
    (decrease_succeeded, 6),
    (complete_and_failed, 8),
    (complete_without_completion_time, 9),
    (completion_time_without_complete, 9),
    (finished_with_active_pods, 10),
    (more_ready_than_active, 11),
    (failed_without_failure_target, 12),
    (index_beyond_completions, 13),
    (failed_index_also_completed, 13),
    (move_start_time, 14),
]


@settings(max_examples=300, deadline=None)
@given(histories(), st.data())
def test_known_bad_changes_to_legal_writes_are_flagged(
    history: tuple[JobShape, list[JsonObj]], data: st.DataObject
) -> None:
    _, mirrors = history
    step = data.draw(st.integers(1, len(mirrors) - 1), label="write") if len(mirrors) > 1 else 0
    old, new = mirrors[max(step - 1, 0)], mirrors[step]
    applicable = [
        (corrupted, rule)
        for corruption, rule in CORRUPTIONS
        if (corrupted := corruption(old, copy.deepcopy(new))) is not None
    ]
    corrupted, rule = data.draw(st.sampled_from(applicable), label="corruption")
    assert rule in rules(old, corrupted)
