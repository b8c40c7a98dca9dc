"""RelayQueues read, pure.

The CRD validates a RelayQueue, but a queue written under an older CRD, or by hand
where validation was off, must never crash the controller: :func:`read_queue` turns
any object into a :class:`QueueSpec` or an :class:`InvalidQueue` saying why, and the
controller leaves an invalid queue out and says so on its status (condition ``Valid``,
:mod:`jobrelay.admission.queue_status`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from jobrelay.admission.queue_model import (
    LabelSelector,
    QueueingStrategy,
    QueueSpec,
    Reclaim,
    WithinQueue,
)
from jobrelay.placement.units import resources_of
from jobrelay.vocabulary.quantity import QuantityError, shown

__all__ = [
    "MAX_ALLOWED_PRIORITY_CLASSES",
    "OPERATORS",
    "InvalidQueue",
    "read_queue",
    "read_selector",
]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

E = TypeVar("E", QueueingStrategy, Reclaim, WithinQueue)


@dataclass(frozen=True, slots=True)
class InvalidQueue:
    """A RelayQueue the controller cannot use, and why (in words for its admin)."""

    name: str
    reason: str


class _Refused(ValueError):
    """Why a part of a spec is unusable (caught in :func:`read_queue`)."""


def read_queue(obj: Mapping[str, Any]) -> QueueSpec | InvalidQueue:
    """A RelayQueue object as the QueueSpec fair share reasons about, or why it is unusable."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        return InvalidQueue("", "it has no name")
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        return InvalidQueue(name, "spec is not an object")
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
            allowed_priority_classes=_class_names(spec.get("allowedPriorityClasses")),
        )  # fmt: skip
    except _Refused as refused:
        return InvalidQueue(name, str(refused))


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


# At most this many names in spec.allowedPriorityClasses (the CRD says the same).
MAX_ALLOWED_PRIORITY_CLASSES = 64


def _class_names(raw: object) -> frozenset[str] | None:
    """``spec.allowedPriorityClasses`` (absent: None, any class but a system one)."""
    if raw is None:
        return None
    where = "spec.allowedPriorityClasses"
    if not isinstance(raw, list) or not all(isinstance(name, str) and name for name in raw):
        raise _Refused(f"{where} is not a list of PriorityClass names")
    if len(raw) > MAX_ALLOWED_PRIORITY_CLASSES:
        raise _Refused(f"{where} lists more than {MAX_ALLOWED_PRIORITY_CLASSES} names")
    return frozenset(raw)


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
