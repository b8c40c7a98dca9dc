"""Translating a mirror's status into the status of its management Job.

The worker's built-in controller writes the mirror's status; a verbatim copy of
it passes every rule the management apiserver enforces (job-api-contract.md),
as long as the copies arrive in order. They need not: informer caches, resyncs
and retries can hand us an older mirror status after a newer one. So the copy
is a merge that never goes backwards (counters, completed and failed indexes,
terminal conditions only grow), and the Job's own ``spec.suspend`` (not the
mirror's) decides the ``Suspended`` condition and when ``startTime`` may be
shown.

startTime around suspend and resume. The built-in controller (v1.35,
pkg/controller/job/job_controller.go) sets ``startTime`` on the first sync of a
Job that is not suspended, keeps it while suspended, and resets it to the
resume time when the ``Suspended`` condition turns False. The apiserver forbids
changing a set ``startTime`` while ``spec.suspend`` is false (contract rule 14;
the reset on resume broke that rule until a v1.35 fix, kubernetes#134521), and
upstream is moving to clearing ``startTime`` on suspend instead (KEP-5440). We
take that road, which needs no exception from the apiserver: a suspended Job
shows no ``startTime`` (allowed while suspended), and once resumed it takes the
mirror's fresh one (nil to set is always allowed) as soon as the mirror itself
runs again. The observable result equals the built-in controller's: after a
resume, ``startTime`` is the time the Job resumed.
"""

from __future__ import annotations

import copy

from jobrelay.kinds.job import indexes
from jobrelay.kinds.job.conditions import (
    COMPLETE,
    FAILED,
    FALSE,
    STICKY_CONDITIONS,
    SUSPENDED,
    TRUE,
    condition,
    conditions_of,
    finished_condition,
    is_finished,
    is_true,
    status_of,
)
from jobrelay.kinds.job.spec import is_elastic_indexed, is_indexed, is_suspended
from jobrelay.kinds.types import JsonObj

__all__ = [
    "RESUMED_MESSAGE",
    "RESUMED_REASON",
    "SUSPENDED_MESSAGE",
    "SUSPENDED_REASON",
    "condition",
    "finished_condition",
    "is_finished",
    "next_status",
]

# The built-in controller's words for the Suspended condition.
SUSPENDED_REASON = "JobSuspended"
SUSPENDED_MESSAGE = "Job suspended"
RESUMED_REASON = "JobResumed"
RESUMED_MESSAGE = "Job resumed"

# Fields taken from the mirror as they are: they describe the Pods running
# now, so the newest mirror status is the truth, and the contract only asks
# them to be consistent with each other, which one status of one mirror is.
_COPIED_VERBATIM = ("active", "ready", "terminating", "uncountedTerminatedPods")

# Non-pointer fields the apiserver omits when zero or empty; absent and zero
# must compare equal or every sync would write the same status again.
_OMITTED_WHEN_EMPTY = ("active", "succeeded", "failed", "completedIndexes", "conditions")


def next_status(job: JsonObj, mirror: JsonObj | None, *, now: str) -> JsonObj | None:
    """The full status the management Job should have, or None if it already has it.

    ``mirror`` is the mirror as last seen on the worker, None when there is
    none (not yet placed). ``now`` (RFC 3339) stamps conditions this function
    changes. A finished Job's status is frozen: None.
    """
    if is_finished(job):
        return None
    if mirror is None:
        desired = _status_without_mirror(job, now)
    else:
        desired = _status_from_mirror(job, mirror, now)
    if _comparable(desired) == _comparable(status_of(job)):
        return None
    return copy.deepcopy(desired)


def _status_without_mirror(job: JsonObj, now: str) -> JsonObj:
    """Nothing runs for the Job: keep what it has, only follow its own suspend."""
    status = dict(status_of(job))
    if is_suspended(job):
        # Not placed, or its mirror is gone: no Pods run on its behalf.
        status.pop("startTime", None)
        status["active"] = 0
        status.update({gauge: 0 for gauge in ("ready", "terminating") if gauge in status})
    _set_conditions(status, job, conditions_of(status_of(job)), now)
    return status


def _status_from_mirror(job: JsonObj, mirror: JsonObj, now: str) -> JsonObj:
    current = status_of(job)
    theirs = status_of(mirror)
    status: JsonObj = {field: theirs[field] for field in _COPIED_VERBATIM if field in theirs}
    status["failed"] = max(current.get("failed", 0), theirs.get("failed", 0))
    status.update(_completions(job.get("spec") or {}, current, theirs))
    conditions = _merged_conditions(conditions_of(current), conditions_of(theirs))
    finished = is_true(conditions, COMPLETE) or is_true(conditions, FAILED)
    start_time = _start_time(job, mirror, finished=finished)
    if start_time is not None:
        status["startTime"] = start_time
    if is_true(conditions, COMPLETE) and theirs.get("completionTime") is not None:
        status["completionTime"] = theirs["completionTime"]
    _set_conditions(status, job, conditions, now, finished=finished)
    return status


def _completions(spec: JsonObj, current: JsonObj, theirs: JsonObj) -> JsonObj:
    """``succeeded``, plus ``completedIndexes`` and ``failedIndexes`` for an Indexed Job.

    Indexes are merged as sets: an index once completed (or failed for good)
    stays so in the built-in controller, so the union of an old and a new
    mirror status is the new one, and a stale status adds nothing. Indexes at
    or above ``completions`` are dropped: the apiserver rejects them, and they
    only exist after an elastic Indexed Job (completions == parallelism) was
    scaled down, the one case where ``succeeded`` may drop.
    """
    succeeded = max(current.get("succeeded", 0), theirs.get("succeeded", 0))
    if not is_indexed(spec):
        return {"succeeded": succeeded}
    completions: int = spec["completions"]
    completed = indexes.below(_merged_indexes(current, theirs, "completedIndexes"), completions)
    if is_elastic_indexed(spec):
        succeeded = indexes.count(completed)
    else:
        succeeded = max(succeeded, indexes.count(completed))
    result: JsonObj = {
        "succeeded": succeeded,
        "completedIndexes": indexes.format_indexes(completed),
    }
    if spec.get("backoffLimitPerIndex") is not None and (
        "failedIndexes" in theirs or "failedIndexes" in current
    ):
        failed = indexes.below(_merged_indexes(current, theirs, "failedIndexes"), completions)
        result["failedIndexes"] = indexes.format_indexes(indexes.difference(failed, completed))
    return result


def _merged_indexes(current: JsonObj, theirs: JsonObj, field: str) -> list[indexes.Interval]:
    return indexes.union(
        indexes.parse_indexes(current.get(field) or ""),
        indexes.parse_indexes(theirs.get(field) or ""),
    )


def _merged_conditions(mine: list[JsonObj], theirs: list[JsonObj]) -> list[JsonObj]:
    """The mirror's conditions, plus any terminal condition the Job already shows True.

    The mirror's ``Suspended`` condition is left out: the Job's own one follows
    its own ``spec.suspend``.
    """
    merged = {c["type"]: c for c in theirs if c.get("type") != SUSPENDED}
    for kept in mine:
        kind = kept.get("type", "")
        if kind in STICKY_CONDITIONS and kept.get("status") == TRUE and not _true_in(merged, kind):
            merged[kind] = kept
    return list(merged.values())


def _true_in(by_type: dict[str, JsonObj], kind: str) -> bool:
    return kind in by_type and by_type[kind].get("status") == TRUE


def _start_time(job: JsonObj, mirror: JsonObj, *, finished: bool) -> str | None:
    """The ``startTime`` to show (see the module docstring for why).

    Suspended: none, unless the mirror finished before its own suspend landed
    (a finished Job needs one; changing it is allowed while suspended).
    Running: the one already shown (it may not change), else the mirror's once
    the mirror itself runs; while the mirror is still paused its startTime
    predates the resume and the worker is about to reset it.
    """
    mine: str | None = status_of(job).get("startTime")
    theirs: str | None = status_of(mirror).get("startTime")
    if is_suspended(job):
        return theirs if finished else None
    if mine is not None or (_is_paused(mirror) and not finished):
        return mine
    return theirs


def _set_conditions(
    status: JsonObj, job: JsonObj, conditions: list[JsonObj], now: str, *, finished: bool = False
) -> None:
    """Put the conditions, with the Job's own Suspended condition, in the order the Job has them."""
    others = [c for c in conditions if c.get("type") != SUSPENDED]
    suspended = _suspended_condition(job, now, finished=finished)
    ordered = _in_order_of(
        conditions_of(status_of(job)), others + ([suspended] if suspended else [])
    )
    if ordered:
        status["conditions"] = ordered
    else:
        status.pop("conditions", None)


def _suspended_condition(job: JsonObj, now: str, *, finished: bool) -> JsonObj | None:
    """``Suspended`` as the built-in controller keeps it, following the Job's own spec.

    True while suspended; turned False (never removed) once resumed; left
    alone on a Job that is finishing, as the built-in controller does.
    """
    existing = condition(job, SUSPENDED)
    if finished:
        return existing
    if is_suspended(job):
        return _ensured(existing, TRUE, SUSPENDED_REASON, SUSPENDED_MESSAGE, now)
    if existing is None:
        return None
    return _ensured(existing, FALSE, RESUMED_REASON, RESUMED_MESSAGE, now)


def _ensured(existing: JsonObj | None, status: str, reason: str, message: str, now: str) -> JsonObj:
    """The Suspended condition with these values; unchanged (times kept) if it has them."""
    if existing is not None and (
        existing.get("status"),
        existing.get("reason"),
        existing.get("message"),
    ) == (status, reason, message):
        return existing
    return {
        "type": SUSPENDED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def _in_order_of(existing: list[JsonObj], wanted: list[JsonObj]) -> list[JsonObj]:
    """``wanted``, with the types the Job already has first, in its order (fewer spurious diffs)."""
    by_type = {c.get("type"): c for c in wanted}
    ordered = [by_type.pop(c.get("type")) for c in existing if c.get("type") in by_type]
    return ordered + list(by_type.values())


def _comparable(status: JsonObj) -> JsonObj:
    """A status as the apiserver would store it, for deciding whether a write changes anything."""
    result: JsonObj = {}
    for field, value in status.items():
        if value is None or (field in _OMITTED_WHEN_EMPTY and not value):
            continue
        if field == "uncountedTerminatedPods":
            value = {kind: uids for kind, uids in value.items() if uids}
            if not value:
                continue
        if field == "conditions":
            value = sorted(value, key=lambda c: str(c.get("type")))
        result[field] = value
    return result


def _is_paused(mirror: JsonObj) -> bool:
    """Whether the mirror is suspended, or its controller has not yet seen it resumed."""
    return is_suspended(mirror) or is_true(conditions_of(status_of(mirror)), SUSPENDED)
