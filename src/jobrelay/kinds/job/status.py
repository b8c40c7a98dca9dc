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
from jobrelay.kinds.job.carry import Carry, elapsed_seconds, mirror_carry
from jobrelay.kinds.job.conditions import (
    COMPLETE,
    FAILED,
    FAILURE_TARGET,
    FALSE,
    STICKY_CONDITIONS,
    SUCCESS_CRITERIA_MET,
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
from jobrelay.vocabulary.json_types import JsonObj

__all__ = [
    "RESUMED_MESSAGE",
    "RESUMED_REASON",
    "SUSPENDED_MESSAGE",
    "SUSPENDED_REASON",
    "condition",
    "failed_status",
    "finished_condition",
    "is_finished",
    "is_transitional",
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

# What describes the Pods running now: all zero once no mirror runs.
_GAUGES = ("active", "ready", "terminating")

# The built-in controller's words for the ends jobrelay may have to write itself.
_COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
_BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
_DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
_FAILED_INDEXES = ("FailedIndexes", "Job has failed indexes")

# Non-pointer fields the apiserver omits when zero or empty; absent and zero
# must compare equal or every sync would write the same status again.
_OMITTED_WHEN_EMPTY = ("active", "succeeded", "failed", "completedIndexes", "conditions")


def next_status(
    job: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
) -> JsonObj | None:
    """The full status the management Job should have, or None if it already has it.

    ``mirror`` is the mirror as last seen on the worker, None when none runs
    (not yet placed, or moving). ``gone``: the mirror is the last state of one
    that no longer exists, whose work counts but whose Pods no longer run.
    ``now`` (RFC 3339) stamps conditions this function changes. A finished
    Job's status is frozen: None.

    While no mirror runs, the Job shows no running Pods, and a Job whose
    earlier runs already decided its outcome (``FailureTarget`` or
    ``SuccessCriteriaMet``, every completion done, the backoff limit or the
    deadline passed) is finished here, as the built-in controller would, rather
    than run again.
    """
    if is_finished(job):
        return None
    if mirror is None:
        desired = _at_rest(job, dict(status_of(job)), now)
    else:
        desired = _status_from_mirror(job, mirror, now, gone=gone)
        if gone:
            desired = _at_rest(job, desired, now)
    if _comparable(desired) == _comparable(status_of(job)):
        return None
    return copy.deepcopy(desired)


def failed_status(job: JsonObj, reason: str, message: str, *, now: str) -> JsonObj | None:
    """The Job's status failed for ``reason`` with no mirror running (None: already finished)."""
    if is_finished(job):
        return None
    status = _at_rest(job, dict(status_of(job)), now)
    if is_finished({"status": status}):
        return status
    return _ended(status, FAILED, (reason, message), now)


def _at_rest(job: JsonObj, status: JsonObj, now: str) -> JsonObj:
    """The status while no mirror runs: no Pods, and finished if nothing is left to run."""
    spec = job.get("spec") or {}
    if is_suspended(job):
        # Never placed, or showing no pods by its own choice: nothing of a run to count,
        # and no startTime while suspended.
        status = {
            k: v for k, v in status.items() if k not in ("uncountedTerminatedPods", "startTime")
        }
    else:
        # Pods that ended but were not counted yet when the status was copied count
        # now: their mirror will never count them.
        status = _with_uncounted_counted(status, spec)
    status.update({gauge: 0 for gauge in _GAUGES if gauge in status or gauge == "active"})
    if not is_suspended(job) and not is_finished({"status": status}):
        outcome = _outcome_without_mirror(spec, status, now)
        if outcome is not None:
            status = _ended(status, *outcome, now)
            if outcome[0] == COMPLETE and is_indexed(spec) and spec.get("completions"):
                status = _every_index_done(status, spec)
    _set_conditions(status, {**job, "status": status}, conditions_of(status), now)
    return status


def _outcome_without_mirror(
    spec: JsonObj, status: JsonObj, now: str
) -> tuple[str, tuple[str, str]] | None:
    """How a Job with no mirror has ended already, as the built-in controller would judge it:
    the final condition type and its (reason, message); None when work remains."""
    conditions = conditions_of(status)
    for target, final in ((FAILURE_TARGET, FAILED), (SUCCESS_CRITERIA_MET, COMPLETE)):
        if is_true(conditions, target):
            found = condition({"status": status}, target) or {}
            return final, (str(found.get("reason") or ""), str(found.get("message") or ""))
    succeeded = int(status.get("succeeded") or 0)
    failed = int(status.get("failed") or 0)
    completions = spec.get("completions")
    if is_indexed(spec):
        done = indexes.parse_indexes(status.get("completedIndexes") or "")
        failed_for_good = indexes.parse_indexes(status.get("failedIndexes") or "")
        settled = indexes.count(indexes.union(done, failed_for_good))
        if completions is not None and indexes.count(done) >= completions:
            return COMPLETE, _COMPLETIONS_REACHED
        if completions is not None and failed_for_good and settled >= completions:
            return FAILED, _FAILED_INDEXES
    elif (completions is not None and succeeded >= completions) or (
        completions is None and succeeded > 0
    ):
        return COMPLETE, _COMPLETIONS_REACHED
    limit = spec.get("backoffLimit")
    if limit is not None and spec.get("backoffLimitPerIndex") is None and failed > limit:
        return FAILED, _BACKOFF_LIMIT_EXCEEDED
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and elapsed_seconds(status.get("startTime"), now) >= deadline > 0:
        return FAILED, _DEADLINE_EXCEEDED
    return None


def _every_index_done(status: JsonObj, spec: JsonObj) -> JsonObj:
    """An Indexed Job that met its completions, as the built-in controller ends it: every
    index completed (those whose Pods were not counted yet included), unless a success
    policy ended it first."""
    reason = str((condition({"status": status}, SUCCESS_CRITERIA_MET) or {}).get("reason") or "")
    if spec.get("successPolicy") is not None and reason != _COMPLETIONS_REACHED[0]:
        return status
    completions = int(spec["completions"])
    every: list[indexes.Interval] = [(0, completions - 1)]
    done = dict(status, succeeded=completions, completedIndexes=indexes.format_indexes(every))
    if "failedIndexes" in done:
        done["failedIndexes"] = ""
    return done


def _ended(status: JsonObj, final: str, words: tuple[str, str], now: str) -> JsonObj:
    """``status`` with the final condition and the target condition that must precede it."""
    reason, message = words
    target = FAILURE_TARGET if final == FAILED else SUCCESS_CRITERIA_MET
    ended = dict(status)
    ended.setdefault("startTime", now)
    conditions = [c for c in conditions_of(ended) if c.get("type") not in (target, final)]
    kept = condition(ended, target)
    if kept is None or kept.get("status") != TRUE:
        kept = _new_condition(target, reason, message, now)
    ended["conditions"] = [*conditions, kept, _new_condition(final, reason, message, now)]
    if final == COMPLETE:
        ended["completionTime"] = now
    return ended


def _new_condition(kind: str, reason: str, message: str, now: str) -> JsonObj:
    return {
        "type": kind,
        "status": TRUE,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def _status_from_mirror(job: JsonObj, mirror: JsonObj, now: str, *, gone: bool) -> JsonObj:
    current = status_of(job)
    theirs = status_of(mirror)
    carry = mirror_carry(mirror)
    if gone:
        theirs = _with_uncounted_counted(theirs, job.get("spec") or {})
    status: JsonObj = {field: theirs[field] for field in _COPIED_VERBATIM if field in theirs}
    status["failed"] = max(current.get("failed", 0), carry.failed + theirs.get("failed", 0))
    status.update(_completions(job.get("spec") or {}, current, theirs, carry))
    conditions = _merged_conditions(conditions_of(current), conditions_of(theirs))
    finished = is_true(conditions, COMPLETE) or is_true(conditions, FAILED)
    start_time = _start_time(job, mirror, finished=finished)
    if start_time is not None:
        status["startTime"] = start_time
    if is_true(conditions, COMPLETE) and theirs.get("completionTime") is not None:
        status["completionTime"] = theirs["completionTime"]
    _set_conditions(status, job, conditions, now, finished=finished)
    return status


def _with_uncounted_counted(status: JsonObj, spec: JsonObj) -> JsonObj:
    """A status whose terminated but uncounted Pods are counted (no mirror will count them).

    An Indexed Job's ``succeeded`` is the count of its completed indexes, which an
    uncounted Pod's UID does not tell: those stay to run again (or, when the Job
    met its completions, ``_ended`` shows every index completed).
    """
    uncounted = status.get("uncountedTerminatedPods") or {}
    counted = {k: v for k, v in status.items() if k != "uncountedTerminatedPods"}
    fields = ("failed",) if is_indexed(spec) else ("succeeded", "failed")
    for field in fields:
        if uncounted.get(field):
            counted[field] = int(status.get(field) or 0) + len(uncounted[field])
    return counted


def _completions(spec: JsonObj, current: JsonObj, theirs: JsonObj, carry: Carry) -> JsonObj:
    """``succeeded``, plus ``completedIndexes`` and ``failedIndexes`` for an Indexed Job.

    ``carry`` (what earlier runs did) adds to the mirror's count of a
    NonIndexed Job; an Indexed Job's earlier indexes join the union.

    Indexes are merged as sets: an index once completed (or failed for good)
    stays so in the built-in controller, so the union of an old and a new
    mirror status is the new one, and a stale status adds nothing. Indexes at
    or above ``completions`` are dropped: the apiserver rejects them, and they
    only exist after an elastic Indexed Job (completions == parallelism) was
    scaled down, the one case where ``succeeded`` may drop.
    """
    if not is_indexed(spec):
        return {
            "succeeded": max(
                current.get("succeeded", 0), carry.succeeded + theirs.get("succeeded", 0)
            )
        }
    # An Indexed mirror after a carry-over runs every index again: its own count
    # says nothing about indexes earlier runs completed, the union says it all.
    succeeded = max(current.get("succeeded", 0), 0 if carry else theirs.get("succeeded", 0))
    completions: int = spec["completions"]
    earlier = {"completedIndexes": carry.completedIndexes, "failedIndexes": carry.failedIndexes}
    completed = indexes.below(
        _merged_indexes(current, theirs, earlier, field="completedIndexes"), completions
    )
    if is_elastic_indexed(spec):
        succeeded = indexes.count(completed)
    else:
        succeeded = max(succeeded, indexes.count(completed))
    result: JsonObj = {
        "succeeded": succeeded,
        "completedIndexes": indexes.format_indexes(completed),
    }
    if spec.get("backoffLimitPerIndex") is not None and (
        "failedIndexes" in theirs or "failedIndexes" in current or carry.failedIndexes
    ):
        failed = indexes.below(
            _merged_indexes(current, theirs, earlier, field="failedIndexes"), completions
        )
        result["failedIndexes"] = indexes.format_indexes(indexes.difference(failed, completed))
    return result


def _merged_indexes(*statuses: JsonObj, field: str) -> list[indexes.Interval]:
    return indexes.union(*(indexes.parse_indexes(s.get(field) or "") for s in statuses))


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


# Counts that move while pods start and stop; the built-in Job controller itself
# batches them (a second per Job), so they may wait as long to be copied.
_PASSING_COUNTS = frozenset({"ready", "terminating"})
# What a run's start brings: its start time and its first pods.
_START = frozenset({"startTime", "active", "ready", "terminating"})
# A target condition, and the final one the built-in controller adds once the pods are gone.
_TARGET_AND_FINAL = ((SUCCESS_CRITERIA_MET, COMPLETE), (FAILURE_TARGET, FAILED))


def is_transitional(old: JsonObj, new: JsonObj) -> bool:
    """Whether writing ``new`` over ``old`` can wait a moment for the next state:

    - only ``ready`` or ``terminating`` change; or
    - ``new`` only starts the run (its ``startTime`` and first pods): their next step,
      or a short run's end, soon follows, and a one-pod Job's status is then written
      once, finished (issue 36: manager writes per Job); or
    - ``new`` brings a target condition (SuccessCriteriaMet, FailureTarget) without
      its final one (Complete, Failed), which follows as soon as the pods are gone:
      one write then carries both.
    """
    differing = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    if not differing:
        return False
    if differing <= _PASSING_COUNTS:
        return True
    if differing <= _START and "startTime" not in old and "startTime" in new:
        return True
    old_conditions, new_conditions = conditions_of(old), conditions_of(new)
    return any(
        is_true(new_conditions, target)
        and not is_true(new_conditions, final)
        and not is_true(old_conditions, target)
        for target, final in _TARGET_AND_FINAL
    )
