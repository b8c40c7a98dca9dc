"""A RelayQueue's status, pure: its ``Valid`` condition and its figures as written.

The figures are each admission plan's (:func:`jobrelay.admission.shares.queue_figures`);
when they are written (on change, at most every few seconds) is the writer's business
(``fleet/relayqueues.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jobrelay.admission.queue_specs import InvalidQueue
from jobrelay.admission.shares import QueueFigures
from jobrelay.placement.units import format_resources

__all__ = ["VALID_CONDITION", "existing_condition", "status_body", "valid_condition"]

VALID_CONDITION = "Valid"
# Shares are written rounded: a change below this is not worth a status write.
_SHARE_DIGITS = 4


def valid_condition(
    invalid: InvalidQueue | None, existing: Mapping[str, Any] | None, now: str
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


def status_body(figures: QueueFigures | None, condition: Mapping[str, Any]) -> dict[str, Any]:
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
