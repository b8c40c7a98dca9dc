"""When and what the pool writes to a WorkerCluster's status: pure rules, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HEARTBEAT_SECONDS",
    "StatusClock",
    "WorkerStatus",
    "Written",
    "connected_condition",
    "needs_write",
    "replacing",
    "transition_time",
]

# A healthy worker's unchanged status is written again (with a fresh
# lastContactTime) at most this often.
HEARTBEAT_SECONDS = 60.0


@dataclass(frozen=True)
class Written:
    """What the pool last wrote to one WorkerCluster's status, and when (monotonic seconds)."""

    condition: Mapping[str, Any]
    active: int | None
    kubernetes_version: str | None
    at: float
    lost_time: str | None = None
    observed_generation: int | None = None
    # Conditions beside Connected (a ClusterProfile name conflict), as written.
    others: tuple[Mapping[str, Any], ...] = ()


@dataclass(slots=True)
class StatusClock:
    """When a part of a status jobrelay writes is written: the first time, then only when
    it changed, at most once per ``interval`` seconds (monotonic). The one pacing of
    every status written at a rate: a worker's ``status.capacity``, a RelayQueue's."""

    interval: float
    last: Any = None
    at: float | None = None

    def changed(self, body: Any) -> bool:
        return self.at is None or self.last != body

    def due(self, body: Any, now: float) -> bool:
        if self.at is None:
            return True
        return self.last != body and now - self.at >= self.interval

    def written(self, body: Any, now: float) -> None:
        self.last, self.at = body, now

    def adopt(self, body: Any) -> None:
        """What the stored object already says, before any write of ours (a restart
        writes nothing it need not): a change from it is due at once."""
        if self.at is None:
            self.last, self.at = body, float("-inf")


@dataclass
class WorkerStatus:
    """What was last written to one worker's status, and when (monotonic seconds)."""

    written: Written | None = None
    # The status.capacity, paced by the pool's status interval (set when the record is made).
    capacity: StatusClock = field(default_factory=lambda: StatusClock(0.0))


def needs_write(
    previous: Written | None,
    condition: Mapping[str, Any],
    active: int | None,
    kubernetes_version: str | None,
    now: float,
    *,
    lost_time: str | None = None,
    observed_generation: int | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
    others: tuple[Mapping[str, Any], ...] = (),
) -> bool:
    """Whether the status must be written: on any change, and for a connected
    worker once per ``heartbeat`` (to advance lastContactTime)."""
    if previous is None:
        return True
    if (previous.condition, previous.active, previous.lost_time) != (condition, active, lost_time):
        return True
    if previous.others != others:
        return True
    if observed_generation is not None and previous.observed_generation != observed_generation:
        return True
    if kubernetes_version and previous.kubernetes_version != kubernetes_version:
        return True
    return condition.get("status") == "True" and now - previous.at >= heartbeat


def transition_time(existing: Mapping[str, Any] | None, status: str, now: str) -> str:
    """The condition's lastTransitionTime: kept while its status stays, else ``now``."""
    if existing and existing.get("status") == status and existing.get("lastTransitionTime"):
        return str(existing["lastTransitionTime"])
    return now


def connected_condition(registration: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stored Connected condition, if any."""
    conditions = (registration.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Connected"), None)


def replacing(old: Any, new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that turns ``old`` into ``new``: what ``new`` lacks is nulled (a
    resource the worker no longer has leaves the stored summary)."""
    patch: dict[str, Any] = {}
    old = old if isinstance(old, Mapping) else {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        patch[key] = replacing(old.get(key), value) if isinstance(value, dict) else value
    return patch
