"""A RelayQueue's row: its spec and the figures the leader wrote in its status. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.meta import Meta

__all__ = ["QueueRow", "queue_row"]

# Resources shown of a quota or a usage at most (a queue's spec is a tenant admin's).
_MAX_RESOURCES = 32


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _share(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _quantities(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k)[:253]: str(v)[:64] for k, v in list(value.items())[:_MAX_RESOURCES]}


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One RelayQueue, as every view shows it."""

    name: str
    weight: float
    valid: bool
    message: str  # why it is ignored ("" when valid)
    pending: int | None  # None: its status does not say yet
    admitted: int | None
    usage: dict[str, str]
    demand: dict[str, str]
    nominal_quota: dict[str, str]
    borrowing_limit: dict[str, str]
    fair_share: float | None
    actual_share: float | None


def queue_row(queue: Mapping[str, Any]) -> QueueRow:
    """``queue``'s row; a field the status does not say yet reads as none."""
    spec, status = _map(queue.get("spec")), _map(queue.get("status"))
    conditions = status.get("conditions")
    valid = next(
        (c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Valid"), {}
    ) if isinstance(conditions, list) else {}  # fmt: skip
    refused = valid.get("status") == "False"
    weight = spec.get("weight", 1)
    return QueueRow(
        name=Meta(queue).name,
        weight=weight if isinstance(weight, int | float) and not isinstance(weight, bool) else 1,
        valid=not refused,
        message=str(valid.get("message") or valid.get("reason") or "invalid") if refused else "",
        pending=_count(status.get("pending")),
        admitted=_count(status.get("admitted")),
        usage=_quantities(status.get("usage")),
        demand=_quantities(status.get("demand")),
        nominal_quota=_quantities(spec.get("nominalQuota")),
        borrowing_limit=_quantities(spec.get("borrowingLimit")),
        fair_share=_share(status.get("fairShare")),
        actual_share=_share(status.get("actualShare")),
    )
