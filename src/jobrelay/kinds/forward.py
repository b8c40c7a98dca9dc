"""Pieces of a status merge that never moves backwards (pure), shared by the adapters.

Statuses reach the manager stale, repeated and reordered (a watch event of one
worker, a relist of another): a counter takes the larger of what the
management object shows and what the mirror shows, a start time never moves
earlier, an end time once set stays, and a condition once True that means the
end stays True.
"""

from __future__ import annotations

import copy

from jobrelay.kinds.base import Finish
from jobrelay.vocabulary.json_types import JsonObj


def status_of(obj: JsonObj | None) -> JsonObj:
    """The object's status as a dict; a worker may write anything: a non-object is refused
    (decide reports it: StatusNotCopied)."""
    status = (obj or {}).get("status") or {}
    if not isinstance(status, dict):
        raise TypeError(f"the status is a {type(status).__name__}, not an object")
    return status


def conditions_of(status: JsonObj) -> list[JsonObj]:
    """The entries of ``status.conditions`` that are objects."""
    found = status.get("conditions")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def true_condition(conditions: list[JsonObj], condition_type: str) -> JsonObj | None:
    return next(
        (c for c in conditions if c.get("type") == condition_type and c.get("status") == "True"),
        None,
    )


def count(value: object) -> int:
    """A counter as written (an int); anything else counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def larger(mine: JsonObj, theirs: JsonObj, key: str) -> int:
    return max(count(mine.get(key)), count(theirs.get(key)))


def keep_counters(merged: JsonObj, mine: JsonObj, theirs: JsonObj, keys: tuple[str, ...]) -> None:
    """Each counter of ``keys`` in ``merged`` as the larger of ``mine`` and ``theirs``."""
    for key in keys:
        if key in mine or key in theirs:
            merged[key] = larger(mine, theirs, key)


def keep_first(merged: JsonObj, mine: JsonObj, keys: tuple[str, ...]) -> None:
    """A time or value once on the management object stays as it is (e.g. startTime)."""
    for key in keys:
        if mine.get(key):
            merged[key] = mine[key]


def keep_latest(merged: JsonObj, mine: JsonObj, keys: tuple[str, ...]) -> None:
    """A time never moves earlier: a stale status's older ``startTime`` loses to ours. It
    may move later (a resumed run starts again) or go (a suspended one has none), as the
    operator writes it. RFC 3339 times as the apiserver writes them compare as strings."""
    for key in keys:
        ours, theirs = mine.get(key), merged.get(key)
        if isinstance(ours, str) and isinstance(theirs, str) and ours > theirs:
            merged[key] = ours


def keep_true_conditions(merged: JsonObj, mine: JsonObj, types: tuple[str, ...]) -> None:
    """A condition of ``types`` True on the management object stays, whatever came later."""
    mine_conditions = conditions_of(mine)
    theirs = conditions_of(merged)
    for condition_type in types:
        kept = true_condition(mine_conditions, condition_type)
        if kept is not None and true_condition(theirs, condition_type) is None:
            theirs = [c for c in theirs if c.get("type") != condition_type] + [copy.deepcopy(kept)]
    if theirs or "conditions" in merged:
        merged["conditions"] = theirs


def finish_by_conditions(obj: JsonObj, success: str, failure: str) -> Finish | None:
    """Finished when a ``failure`` or ``success`` condition is True (failure looked at first:
    a status holding both ended badly)."""
    status = obj.get("status")
    conditions = conditions_of(status if isinstance(status, dict) else {})
    for condition_type in (failure, success):
        found = true_condition(conditions, condition_type)
        if found is not None:
            return Finish(
                succeeded=condition_type == success,
                reason=str(found.get("reason") or condition_type),
                message=str(found.get("message") or ""),
                at=str(found.get("lastTransitionTime") or ""),
            )
    return None


def compact(status: JsonObj) -> JsonObj:
    """A status without empty values, to compare two without noise."""
    return {k: v for k, v in status.items() if v not in (None, [], {}, "")}


def changed(current: JsonObj, desired: JsonObj) -> JsonObj | None:
    """``desired`` (a copy) when it differs from ``current``; None when they agree."""
    if compact(desired) == compact(current):
        return None
    return copy.deepcopy(compact(desired))


def condition(condition_type: str, reason: str, message: str, now: str) -> JsonObj:
    """A metav1.Condition-shaped True condition (every field its schema requires)."""
    return {
        "type": condition_type,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
