"""What every stand-in lifecycle shares (pure): the annotations a run is read from, one
run's view of its object, the step a rule answers, and condition lists kept the way the
upstream helpers keep them."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.timestamps import rfc3339

Obj = dict[str, Any]

# How a run ends (``Succeeded`` or ``Failed``) and how long it runs, in seconds: set on the
# management object, copied to its mirror with the other annotations.
OUTCOME_ANNOTATION = "standin.jobrelay.dev/outcome"
RUN_SECONDS_ANNOTATION = "standin.jobrelay.dev/run-seconds"
SUCCEEDED, FAILED = "Succeeded", "Failed"
DEFAULT_RUN_SECONDS = 3.0
# Longer is refused (read as the default): a typo must not hold a test for hours.
MAX_RUN_SECONDS = 3600.0


@dataclass(frozen=True)
class Run:
    """One object as a rule sees it: the object, the time, and what its annotations ask."""

    obj: Mapping[str, Any]
    now: datetime.datetime
    outcome: str
    run_seconds: float
    suspended: bool

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace") or "")

    @property
    def status(self) -> Mapping[str, Any]:
        return self.obj.get("status") or {}

    @property
    def stamp(self) -> str:
        return timestamp(self.now)

    def seconds_since(self, stamp: str | None) -> float:
        """Seconds from ``stamp`` (RFC 3339; the creation time when absent) to now."""
        since = parse_time(stamp) or parse_time(self.obj["metadata"].get("creationTimestamp"))
        return 0.0 if since is None else (self.now - since).total_seconds()


@dataclass(frozen=True)
class LifecycleStep:
    """The status to write next (the whole status; None: nothing to write), and after how
    many seconds to look again if nothing changes (None: only on a change)."""

    status: Obj | None = None
    recheck_after: float | None = None


WAIT_FOR_A_CHANGE = LifecycleStep()
Rule = Callable[[Run], LifecycleStep]


def timestamp(now: datetime.datetime) -> str:
    return rfc3339(now)


def parse_time(stamp: object) -> datetime.datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def outcome_of(annotations: Mapping[str, Any]) -> str:
    return FAILED if annotations.get(OUTCOME_ANNOTATION) == FAILED else SUCCEEDED


def run_seconds_of(annotations: Mapping[str, Any]) -> float:
    try:
        seconds = float(annotations.get(RUN_SECONDS_ANNOTATION, DEFAULT_RUN_SECONDS))
    except (TypeError, ValueError):
        return DEFAULT_RUN_SECONDS
    return seconds if 0 <= seconds <= MAX_RUN_SECONDS else DEFAULT_RUN_SECONDS


def field(obj: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` (None when any step is missing or not an object)."""
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def after(seconds: float) -> LifecycleStep:
    """Nothing yet: look again when ``seconds`` have passed."""
    return LifecycleStep(recheck_after=max(seconds, 0.0) + 0.2)


def with_changes(status: Mapping[str, Any], **changes: Any) -> Obj:
    """``status`` with ``changes`` laid on; a change to None or "" drops the field (Go's
    omitempty)."""
    new = dict(status)
    for key, value in changes.items():
        if value is None or value == "" or value == {}:
            new.pop(key, None)
        else:
            new[key] = value
    return new


def find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def is_true(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    found = find(conditions, kind)
    return found is not None and found.get("status") == "True"


def set_metav1_condition(
    conditions: Sequence[Mapping[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: str,
) -> list[Obj]:
    """apimachinery's ``meta.SetStatusCondition``: in place of its type, the transition
    time kept while the status is unchanged."""
    new = [dict(c) for c in conditions]
    current = next((c for c in new if c.get("type") == kind), None)
    if current is None:
        new.append(
            {"type": kind, "status": status, "reason": reason, "message": message,
             "lastTransitionTime": now}
        )  # fmt: skip
        return new
    if current.get("status") != status:
        current["status"] = status
        current["lastTransitionTime"] = now
    current["reason"] = reason
    current["message"] = message
    return new
