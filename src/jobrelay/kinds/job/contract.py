"""An independent checker of the Job status rules the apiserver enforces (job-api-contract.md).

The status translation is written to keep these rules; this module says
whether it did, without sharing its reasoning. Property tests use it as the
judge between tests and the real apiserver, and the controller runs it as a
last guard before a status write: a write it flags would come back as a 422.

As in the apiserver (pkg/registry/batch/job/strategy.go), the rules listed as
"checked when the fields involved change" only judge a write that changes one
of those fields, so an update unrelated to an already inconsistent status is
not blocked. Each message ends with the contract's rule number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from jobrelay.kinds.job import indexes
from jobrelay.kinds.job.conditions import (
    COMPLETE,
    FAILED,
    FAILURE_TARGET,
    STICKY_CONDITIONS,
    SUCCESS_CRITERIA_MET,
    conditions_of,
    is_true,
    status_of,
)
from jobrelay.kinds.job.spec import is_elastic_indexed, is_indexed, is_suspended
from jobrelay.vocabulary.json_types import JsonObj

_COUNTERS = ("active", "succeeded", "failed", "ready", "terminating")


@dataclass(frozen=True)
class _Write:
    """A status write: the Job as stored before it and as it would be after it.

    What the rules read of it is read once (cached properties): every status write
    is checked, by fourteen rules that read the same statuses and conditions."""

    old_job: JsonObj
    new_job: JsonObj

    @cached_property
    def old(self) -> JsonObj:
        return status_of(self.old_job)

    @cached_property
    def new(self) -> JsonObj:
        return status_of(self.new_job)

    @cached_property
    def spec(self) -> JsonObj:
        # A status write never changes the spec (the apiserver keeps the stored
        # one), so new's spec is taken to be the stored spec that judges it.
        spec: JsonObj = self.new_job.get("spec") or {}
        return spec

    @cached_property
    def _old_conditions(self) -> list[JsonObj]:
        return conditions_of(self.old)

    @cached_property
    def _new_conditions(self) -> list[JsonObj]:
        return conditions_of(self.new)

    def was_true(self, condition_type: str) -> bool:
        return is_true(self._old_conditions, condition_type)

    def is_true(self, condition_type: str) -> bool:
        return is_true(self._new_conditions, condition_type)

    def flipped(self, condition_type: str) -> bool:
        """Whether the write changes whether this condition is True."""
        return self.was_true(condition_type) != self.is_true(condition_type)

    def changed(self, field: str) -> bool:
        return bool(_stored(self.old, field) != _stored(self.new, field))

    def finished(self) -> bool:
        return self.is_true(COMPLETE) or self.is_true(FAILED)

    def finished_changed(self) -> bool:
        return self.finished() != (self.was_true(COMPLETE) or self.was_true(FAILED))


def status_violations(old: JsonObj, new: JsonObj) -> list[str]:
    """The contract rules that writing ``new``'s status over ``old``'s would break.

    ``old`` and ``new`` are whole Jobs (the spec decides several rules); an
    empty list means the apiserver accepts the write.
    """
    write = _Write(old, new)
    return [message for rule in _RULES for message in rule(write)]


def _non_negative_counters(w: _Write) -> list[str]:
    """Rule 1."""
    return [
        f"status.{field}: {w.new[field]}: must be greater than or equal to 0 [rule 1]"
        for field in _COUNTERS
        if (w.new.get(field) or 0) < 0
    ]


def _uncounted_pods_valid(w: _Write) -> list[str]:
    """Rule 2."""
    uncounted = w.new.get("uncountedTerminatedPods") or {}
    succeeded: list[str] = uncounted.get("succeeded") or []
    failed: list[str] = uncounted.get("failed") or []
    problems = [
        f"status.uncountedTerminatedPods.{kind}: empty UID [rule 2]"
        for kind, uids in (("succeeded", succeeded), ("failed", failed))
        if any(not uid for uid in uids)
    ]
    problems += [
        f"status.uncountedTerminatedPods.{kind}: duplicate UID [rule 2]"
        for kind, uids in (("succeeded", succeeded), ("failed", failed))
        if len(set(uids)) != len(uids)
    ]
    problems += [
        f"status.uncountedTerminatedPods: UID {uid!r} both succeeded and failed [rule 2]"
        for uid in sorted(set(succeeded) & set(failed))
        if uid
    ]
    return problems


def _terminal_conditions_kept(w: _Write) -> list[str]:
    """Rule 3."""
    return [
        f"status.conditions: cannot disable the terminal {kind}=True condition [rule 3]"
        for kind in STICKY_CONDITIONS
        if w.was_true(kind) and not w.is_true(kind)
    ]


def _success_criteria_met_consistent(w: _Write) -> list[str]:
    """Rule 4."""
    problems = []
    if (
        w.was_true(COMPLETE)
        and not w.was_true(SUCCESS_CRITERIA_MET)
        and w.is_true(SUCCESS_CRITERIA_MET)
    ):
        problems.append(
            "status.conditions: cannot set SuccessCriteriaMet=True "
            "for a Job already Complete [rule 4]"
        )
    problems += [
        f"status.conditions: cannot set SuccessCriteriaMet=True and {kind}=True together [rule 4]"
        for kind in (FAILED, FAILURE_TARGET)
        if w.is_true(SUCCESS_CRITERIA_MET) and w.is_true(kind)
    ]
    return problems


def _success_policy_needs_criteria(w: _Write) -> list[str]:
    """Rule 5."""
    if w.spec.get("successPolicy") and w.is_true(COMPLETE) and not w.is_true(SUCCESS_CRITERIA_MET):
        return [
            "status.conditions: cannot set Complete=True for a Job with successPolicy "
            "unless SuccessCriteriaMet=True [rule 5]"
        ]
    return []


def _counters_never_decrease(w: _Write) -> list[str]:
    """Rule 6."""
    checked = ["failed"] if is_elastic_indexed(w.spec) else ["failed", "succeeded"]
    return [
        f"status.{field}: cannot decrease the {field} counter "
        f"({_stored(w.old, field)} -> {_stored(w.new, field)}) [rule 6]"
        for field in checked
        if _stored(w.new, field) < _stored(w.old, field)
    ]


def _completion_time_fixed(w: _Write) -> list[str]:
    """Rule 7."""
    if w.old.get("completionTime") is not None and w.changed("completionTime"):
        return ["status.completionTime: completionTime cannot be mutated [rule 7]"]
    return []


def _no_contradicting_terminal_conditions(w: _Write) -> list[str]:
    """Rule 8 (checked when Complete, Failed or FailureTarget flips)."""
    return [
        f"status.conditions: cannot set Complete=True and {kind}=True together [rule 8]"
        for kind in (FAILED, FAILURE_TARGET)
        if (w.flipped(COMPLETE) or w.flipped(kind)) and w.is_true(COMPLETE) and w.is_true(kind)
    ]


def _completion_time_matches_complete(w: _Write) -> list[str]:
    """Rule 9."""
    problems = []
    completion_time = w.new.get("completionTime")
    if w.flipped(COMPLETE) or w.changed("completionTime"):
        if completion_time is not None and not w.is_true(COMPLETE):
            problems.append(
                "status.completionTime: cannot set completionTime when there is "
                "no Complete=True condition [rule 9]"
            )
        if completion_time is None and w.is_true(COMPLETE):
            problems.append(
                "status.completionTime: completionTime is required for a Complete job [rule 9]"
            )
    start_time = w.new.get("startTime")
    if (
        (w.changed("startTime") or w.changed("completionTime"))
        and completion_time is not None
        and start_time is not None
        and _before(completion_time, start_time)
    ):
        problems.append("status.completionTime: completionTime cannot be before startTime [rule 9]")
    return problems


def _finished_job_at_rest(w: _Write) -> list[str]:
    """Rule 10."""
    if not w.finished():
        return []
    problems = []
    if (w.finished_changed() or w.changed("startTime")) and w.new.get("startTime") is None:
        problems.append("status.startTime: startTime is required for finished job [rule 10]")
    problems += [
        f"status.{gauge}: {w.new[gauge]}: {gauge}>0 is invalid for finished job [rule 10]"
        for gauge in ("active", "terminating")
        if (w.finished_changed() or w.changed(gauge)) and (w.new.get(gauge) or 0) > 0
    ]
    if (w.finished_changed() or w.changed("uncountedTerminatedPods")) and _stored(
        w.new, "uncountedTerminatedPods"
    ):
        problems.append("status.uncountedTerminatedPods: must be empty for finished job [rule 10]")
    return problems


def _ready_within_active(w: _Write) -> list[str]:
    """Rule 11."""
    ready = w.new.get("ready")
    changed = w.changed("ready") or w.changed("active")
    if changed and ready is not None and ready > _stored(w.new, "active"):
        return ["status.ready: cannot set more ready pods than active [rule 11]"]
    return []


def _terminal_conditions_preceded(w: _Write) -> list[str]:
    """Rule 12."""
    problems = []
    if w.flipped(FAILED) and w.is_true(FAILED) and not w.is_true(FAILURE_TARGET):
        problems.append(
            "status.conditions: cannot set Failed=True condition without the "
            "FailureTarget=true condition [rule 12]"
        )
    if w.flipped(COMPLETE) and w.is_true(COMPLETE) and not w.is_true(SUCCESS_CRITERIA_MET):
        problems.append(
            "status.conditions: cannot set Complete=True condition without the "
            "SuccessCriteriaMet=true condition [rule 12]"
        )
    return problems


def _indexes_valid(w: _Write) -> list[str]:
    """Rule 13."""
    problems = []
    completed_text = w.new.get("completedIndexes") or ""
    failed_text: str | None = w.new.get("failedIndexes")
    if w.changed("completedIndexes"):
        if completed_text and not is_indexed(w.spec):
            problems.append(
                "status.completedIndexes: cannot set non-empty completedIndexes "
                "when non-indexed completion mode [rule 13]"
            )
        problems += _index_format_problems("completedIndexes", completed_text, w.spec)
    if w.changed("failedIndexes") and failed_text is not None:
        if w.spec.get("backoffLimitPerIndex") is None:
            problems.append(
                "status.failedIndexes: cannot set non-null failedIndexes "
                "when backoffLimitPerIndex is null [rule 13]"
            )
        problems += _index_format_problems("failedIndexes", failed_text, w.spec)
    if (w.changed("completedIndexes") or w.changed("failedIndexes")) and failed_text:
        problems += _overlap_problems(completed_text, failed_text)
    return problems


def _index_format_problems(field: str, text: str, spec: JsonObj) -> list[str]:
    try:
        intervals = indexes.parse_indexes(text)
    except ValueError as error:
        return [f"status.{field}: {text!r}: {error} [rule 13]"]
    completions = spec.get("completions")
    if intervals and (completions is None or intervals[-1][1] >= completions):
        return [
            f"status.{field}: {text!r}: too large index for completions={completions} [rule 13]"
        ]
    return []


def _overlap_problems(completed_text: str, failed_text: str) -> list[str]:
    try:
        completed = indexes.parse_indexes(completed_text)
        failed = indexes.parse_indexes(failed_text)
    except ValueError:
        return []  # already reported as a format problem
    if indexes.overlaps(completed, failed):
        return ["status.failedIndexes: must not overlap with completedIndexes [rule 13]"]
    return []


def _start_time_fixed_while_running(w: _Write) -> list[str]:
    """Rule 14."""
    if (
        w.old.get("startTime") is not None
        and w.changed("startTime")
        and not is_suspended(w.new_job)
    ):
        return ["status.startTime: startTime cannot be removed for unsuspended job [rule 14]"]
    return []


_RULES: tuple[Callable[[_Write], list[str]], ...] = (
    _non_negative_counters,
    _uncounted_pods_valid,
    _terminal_conditions_kept,
    _success_criteria_met_consistent,
    _success_policy_needs_criteria,
    _counters_never_decrease,
    _completion_time_fixed,
    _no_contradicting_terminal_conditions,
    _completion_time_matches_complete,
    _finished_job_at_rest,
    _ready_within_active,
    _terminal_conditions_preceded,
    _indexes_valid,
    _start_time_fixed_while_running,
)


def _stored(status: JsonObj, field: str) -> Any:
    """A field as the apiserver stores it: absent counters are 0, empty UID lists are absent."""
    value = status.get(field)
    if field in ("active", "succeeded", "failed"):
        return value or 0
    if field == "completedIndexes":
        return value or ""
    if field == "uncountedTerminatedPods":
        return {kind: uids for kind, uids in (value or {}).items() if uids}
    return value


def _before(later: str, earlier: str) -> bool:
    """Whether RFC 3339 time ``later`` is in fact before ``earlier``."""
    return datetime.fromisoformat(later) < datetime.fromisoformat(earlier)
