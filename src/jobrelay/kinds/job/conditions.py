"""Reading Job conditions, shared by the status translation and the contract checker.

Kept apart from both so that the checker stays independent of the translation
it judges: they share only how a condition is looked up, not any rule.
"""

from __future__ import annotations

from jobrelay.vocabulary.json_types import JsonObj

COMPLETE = "Complete"
FAILED = "Failed"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
SUSPENDED = "Suspended"

TRUE = "True"
FALSE = "False"

# Conditions that, once True, the apiserver never lets go (contract rule 3).
STICKY_CONDITIONS = (COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET)


def status_of(job: JsonObj) -> JsonObj:
    """The Job's status, ``{}`` when the apiserver has not stored one yet."""
    status: JsonObj = job.get("status") or {}
    return status if isinstance(status, dict) else {}  # a worker's may be anything


def find_condition(conditions: list[JsonObj], condition_type: str) -> JsonObj | None:
    """The condition of that type in a list, or None (types are unique in a Job status)."""
    for found in conditions:  # a loop, not next(genexpr): read several times per reconcile
        if found.get("type") == condition_type:
            return found
    return None


def is_true(conditions: list[JsonObj], condition_type: str) -> bool:
    """Whether the list holds a condition of that type with status ``True``."""
    found = find_condition(conditions, condition_type)
    return found is not None and found.get("status") == TRUE


def conditions_of(status: JsonObj) -> list[JsonObj]:
    """A status's conditions, ``[]`` when it has none."""
    conditions: list[JsonObj] = status.get("conditions") or []
    if not isinstance(conditions, list):
        return []
    for entry in conditions:  # a loop, not all(genexpr): read several times per reconcile
        if not isinstance(entry, dict):
            # A worker may write anything: only the entries that are objects are conditions.
            return [c for c in conditions if isinstance(c, dict)]
    return conditions


def condition(job: JsonObj, condition_type: str) -> JsonObj | None:
    """The Job's condition of that type, whatever its status, or None."""
    return find_condition(conditions_of(status_of(job)), condition_type)


def finished_condition(job: JsonObj) -> JsonObj | None:
    """The ``Complete=True`` or ``Failed=True`` condition that ends the Job, or None."""
    conditions = conditions_of(status_of(job))
    for condition_type in (COMPLETE, FAILED):
        found = find_condition(conditions, condition_type)
        if found is not None and found.get("status") == TRUE:
            return found
    return None


def is_finished(job: JsonObj) -> bool:
    """Whether the Job reached a terminal state; its status can then no longer change."""
    return finished_condition(job) is not None
