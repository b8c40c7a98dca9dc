"""RelayQueues read and their status written, pure.

The CRD validates a RelayQueue, but a queue written under an older CRD, or by hand
where validation was off, must never crash the controller: :func:`read_queue` turns
any object into a :class:`QueueSpec` or an :class:`Invalid` saying why, and the
controller leaves an invalid queue out and says so on its status (condition ``Valid``).

The status is written from the queue's figures (whoever computes them: the fair-share
pass) only when it changed, and at most every ``interval`` seconds per queue.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from jobrelay.fairshare.model import (
    LabelSelector,
    QueueingStrategy,
    QueueSpec,
    Reclaim,
    WithinQueue,
)
from jobrelay.kinds.quantity import QuantityError, shown
from jobrelay.placement.units import Resources, format_resources, resources_of

__all__ = [
    "OPERATORS",
    "VALID_CONDITION",
    "Figures",
    "Invalid",
    "StatusClock",
    "existing_condition",
    "read_queue",
    "read_selector",
    "status_body",
    "valid_condition",
]

VALID_CONDITION = "Valid"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# Shares are written rounded: a change below this is not worth a status write.
_SHARE_DIGITS = 4

E = TypeVar("E", QueueingStrategy, Reclaim, WithinQueue)


@dataclass(frozen=True, slots=True)
class Invalid:
    """A RelayQueue the controller cannot use, and why (in words for its admin)."""

    name: str
    reason: str


class Figures(Protocol):
    """What the status and the metrics show of one queue (the fair-share pass's
    ``QueueFigures`` has these, among others)."""

    @property
    def usage(self) -> Resources: ...
    @property
    def demand(self) -> Resources: ...
    @property
    def pending(self) -> int: ...
    @property
    def admitted(self) -> int: ...
    @property
    def fair_share(self) -> float: ...
    @property
    def actual_share(self) -> float: ...


class _Refused(ValueError):
    """Why a part of a spec is unusable (caught in :func:`read_queue`)."""


def read_queue(obj: Mapping[str, Any]) -> QueueSpec | Invalid:
    """A RelayQueue object as the QueueSpec fair share reasons about, or why it is unusable."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        return Invalid("", "it has no name")
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        return Invalid(name, "spec is not an object")
    try:
        return QueueSpec(
            name=name,
            weight=_weight(spec.get("weight")),
            namespace_selector=read_selector(spec.get("namespaceSelector")),
            strategy=_enum(spec, "queueingStrategy", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO),
            nominal=_quantities(spec, "nominalQuota"),
            borrowing_limit=_quantities(spec, "borrowingLimit"),
            reclaim=_enum(_preemption(spec), "reclaimWithinFleet", Reclaim, Reclaim.NEVER, "preemption."),
            within_queue=_enum(_preemption(spec), "withinQueue", WithinQueue, WithinQueue.NEVER, "preemption."),
        )  # fmt: skip
    except _Refused as refused:
        return Invalid(name, str(refused))


def _weight(raw: object) -> float:
    if raw is None:
        return 1.0
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise _Refused(f"spec.weight {shown(str(raw))} is not a number")
    weight = float(raw)
    if not math.isfinite(weight) or weight <= 0:
        raise _Refused(f"spec.weight {raw} is not greater than 0")
    return weight


def _preemption(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    preemption = spec.get("preemption")
    if preemption is None:
        return {}
    if not isinstance(preemption, Mapping):
        raise _Refused("spec.preemption is not an object")
    return preemption


def _enum(within: Mapping[str, Any], field: str, kind: type[E], default: E, prefix: str = "") -> E:
    raw = within.get(field)
    if raw is None:
        return default
    try:
        return kind(raw)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise _Refused(f"spec.{prefix}{field} {shown(str(raw))} is not one of {allowed}") from None


def _quantities(spec: Mapping[str, Any], field: str) -> dict[str, int]:
    raw = spec.get(field)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _Refused(f"spec.{field} is not a map of resources to quantities")
    try:
        return resources_of({str(k): v for k, v in raw.items()})
    except QuantityError as error:
        raise _Refused(f"spec.{field}.{error}") from None
    except TypeError:
        raise _Refused(f"spec.{field} holds a value that is not a quantity") from None


def read_selector(raw: object) -> LabelSelector:
    """A Kubernetes label selector (absent or ``{}``: every namespace); ValueError if
    it is malformed."""
    if raw is None:
        return LabelSelector()
    if not isinstance(raw, Mapping):
        raise _Refused("spec.namespaceSelector is not a label selector")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise _Refused("spec.namespaceSelector.matchLabels is not a map of strings")
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise _Refused("spec.namespaceSelector.matchExpressions is not a list")
    return LabelSelector(dict(labels), tuple(_expression(e) for e in expressions))


def _expression(raw: object) -> tuple[str, str, tuple[str, ...]]:
    where = "spec.namespaceSelector.matchExpressions"
    if not isinstance(raw, Mapping):
        raise _Refused(f"{where} holds an entry that is not an object")
    key, operator, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise _Refused(f"{where} holds an entry without a key")
    if operator not in OPERATORS:
        raise _Refused(
            f"{where}: operator {shown(str(operator))} of {key!r} is not one of "
            + ", ".join(OPERATORS)
        )
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _Refused(f"{where}: the values of {key!r} are not a list of strings")
    # As Kubernetes: In and NotIn need values, Exists and DoesNotExist take none.
    if (operator in ("In", "NotIn")) != bool(values):
        wants = "needs values" if operator in ("In", "NotIn") else "takes no values"
        raise _Refused(f"{where}: {key!r} {operator} {wants}")
    return key, operator, tuple(values)


def valid_condition(
    invalid: Invalid | None, existing: Mapping[str, Any] | None, now: str
) -> dict[str, Any]:
    """The ``Valid`` condition: True, or False with why the controller ignores the queue.
    Its transition time moves only when its status does."""
    status = "False" if invalid is not None else "True"
    condition: dict[str, Any] = {
        "type": VALID_CONDITION,
        "status": status,
        "reason": "InvalidSpec" if invalid is not None else "Valid",
        "message": (
            f"ignored: {invalid.reason}"
            if invalid is not None
            else "the controller admits this queue's workloads by fair share"
        ),
    }
    kept = existing is not None and existing.get("status") == status
    previous = existing.get("lastTransitionTime") if existing is not None else None
    condition["lastTransitionTime"] = previous if kept and previous else now
    return condition


def existing_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The queue's stored ``Valid`` condition, if any."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == VALID_CONDITION:
            return condition
    return None


def status_body(figures: Figures | None, condition: Mapping[str, Any]) -> dict[str, Any]:
    """The status a queue should have: its figures (none for an invalid queue, or
    before the first fair-share pass) and its condition."""
    body: dict[str, Any] = {"conditions": [dict(condition)]}
    if figures is None:
        return body
    body.update(
        pending=figures.pending,
        admitted=figures.admitted,
        usage=format_resources(figures.usage),
        demand=format_resources(figures.demand),
        fairShare=_share(figures.fair_share),
        actualShare=_share(figures.actual_share),
    )
    return body


def _share(value: float) -> float:
    return round(value, _SHARE_DIGITS) if math.isfinite(value) else 0.0


def _comparable(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body without its transition times: a rewrite of the same words is no change."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in body.get("conditions") or []
    ]
    return {**body, "conditions": conditions}


@dataclass(slots=True)
class StatusClock:
    """When one queue's status is written: only on change, at most every ``interval``
    seconds. ``due`` says whether to write now; ``written`` records a write."""

    interval: float
    last_body: dict[str, Any] | None = None
    last_at: float | None = None

    def changed(self, body: Mapping[str, Any]) -> bool:
        return self.last_body != _comparable(body)

    def due(self, body: Mapping[str, Any], now: float) -> bool:
        if not self.changed(body):
            return False
        return self.last_at is None or now - self.last_at >= self.interval

    def written(self, body: Mapping[str, Any], now: float) -> None:
        self.last_body, self.last_at = _comparable(body), now

    def from_stored(self, obj: Mapping[str, Any]) -> None:
        """Adopt what the object's stored status already says (a restart writes nothing
        it need not)."""
        status = obj.get("status")
        if isinstance(status, Mapping) and self.last_body is None:
            self.last_body = _comparable(status)
