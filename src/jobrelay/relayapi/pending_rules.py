"""A namespace's waiting workloads as the controller's last admission plan says them
(pure: no I/O, no clock): the visibility view a tenant reads, as Kueue's
``pendingworkloads`` is.

RelayQueues are cluster-scoped: a tenant with only a namespace RoleBinding can read
neither its queue nor every workload ahead of it, so `jobrelay get` could count only what
the caller may list. The controller counts over every workload (its plan's positions)
and serves, for one namespace, each waiting workload's queue, its position there, why it
waits, how many waiting ahead of it the answer does not show (other namespaces: counts
only, never names), and its queues' figures (nominal quota, usage, pending) from their
status. The answer is bounded (:data:`MAX_PENDING_ROWS`, said in the body).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from jobrelay.admission.queue_model import QueueHold
from jobrelay.admission.shares import QueueFigures
from jobrelay.readmodel import queue_rows
from jobrelay.relayapi.route_rules import API_GROUP, API_PATH, API_VERSION

__all__ = [
    "MAX_PENDING_ROWS",
    "PENDING_KIND",
    "PENDING_WORKLOADS",
    "PendingPlan",
    "PendingWorkloadRow",
    "match_pending_route",
    "pending_path",
    "pending_rows",
    "pending_workloads_body",
]

PENDING_WORKLOADS: Final = "pendingworkloads"
PENDING_KIND: Final = "PendingWorkload"
# Rows one answer holds at most (the first by queue and position); the body says when
# there were more.
MAX_PENDING_ROWS: Final = 1000

_DNS_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_ROUTE = re.compile(
    rf"^{re.escape(API_PATH)}/namespaces/(?P<ns>{_DNS_NAME})/{PENDING_WORKLOADS}/?$"
)
# A workload named as the plan names it (``Kind namespace/name``), inside a message.
_NAMED = re.compile(r"\b([A-Z][A-Za-z0-9]*) ([a-z0-9][-a-z0-9]*)/([a-z0-9][-a-z0-9.]*)")
_ELSEWHERE = "a workload of another namespace"
_MAX_TEXT = 1024


class PendingPlan(Protocol):
    """What the view reads of an admission plan (``planner.AdmissionPlan``)."""

    @property
    def holding(self) -> Mapping[str, QueueHold]: ...
    @property
    def told(self) -> Mapping[str, QueueHold]: ...
    @property
    def positions(self) -> Mapping[str, int]: ...
    @property
    def queue_of(self) -> Mapping[str, str]: ...
    @property
    def figures(self) -> Mapping[str, QueueFigures]: ...


@dataclass(frozen=True, slots=True)
class PendingWorkloadRow:
    """One waiting workload of the namespace asked about. New fields (an estimated
    start) go last with a default, and into :meth:`item` when set."""

    kind: str
    namespace: str
    name: str
    queue: str  # "" when no queue holds it (a namespace's ResourceQuota does)
    position: int | None  # 1 = next in its queue; None: not in a queue's order
    ahead_not_shown: int  # waiting ahead of it in its queue, not in this answer
    reason: str
    message: str

    def item(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "queue": self.queue,
            "position": self.position,
            "aheadNotShown": self.ahead_not_shown,
            "reason": self.reason,
            "message": self.message,
        }


def match_pending_route(path: str) -> str | None:
    """The namespace of a ``.../namespaces/NS/pendingworkloads`` path, else None."""
    found = _ROUTE.match(path)
    return found["ns"] if found else None


def pending_path(namespace: str) -> str:
    return f"{API_PATH}/namespaces/{namespace}/{PENDING_WORKLOADS}"


def _split(entry_key: str) -> tuple[str, str, str]:
    kind, _, key = entry_key.partition(" ")
    namespace, _, name = key.partition("/")
    return kind, namespace, name


def _scrubbed(message: str, namespace: str) -> str:
    """``message`` without the name of any workload of another namespace."""

    def one(found: re.Match[str]) -> str:
        return found[0] if found[2] == namespace else _ELSEWHERE

    return _NAMED.sub(one, message)[:_MAX_TEXT]


def pending_rows(
    plan: PendingPlan | None, namespace: str, kinds: Collection[str]
) -> list[PendingWorkloadRow]:
    """Every waiting workload of ``namespace`` whose Kind is in ``kinds`` (those the
    caller may list), by queue and position: as the plan judged them, its positions
    counted over every workload of the fleet."""
    if plan is None:
        return []
    shown = {
        key for key in (*plan.holding, *plan.told)
        if (parts := _split(key))[1] == namespace and parts[0] in kinds
    }  # fmt: skip
    # Per queue, the positions of the waiting ones this answer does not show.
    hidden: dict[str, list[int]] = {}
    for key, position in plan.positions.items():
        if key not in shown:
            hidden.setdefault(plan.queue_of.get(key, ""), []).append(position)
    for places in hidden.values():
        places.sort()
    rows = []
    for key in shown:
        kind, _, name = _split(key)
        hold = plan.told.get(key) or plan.holding[key]
        queue = plan.queue_of.get(key, "")
        place = plan.positions.get(key)
        ahead = bisect.bisect_left(hidden.get(queue, []), place) if place else 0
        rows.append(PendingWorkloadRow(
            kind, namespace, name, queue, place, ahead, hold.reason,
            _scrubbed(hold.message, namespace),
        ))  # fmt: skip
    rows.sort(key=lambda r: (r.queue, r.position or 0, r.kind, r.name))
    return rows


def _queue_figures(
    name: str, queues: Mapping[str, Mapping[str, Any]], figures: Mapping[str, QueueFigures]
) -> dict[str, Any]:
    """A queue's figures: its nominal quota and usage from its status (as the panel
    says them), its counts from the plan when it has them (fresher)."""
    found = queues.get(name)
    row = queue_rows.queue_row(found) if found is not None else None
    figure = figures.get(name)
    pending: int | None = figure.pending if figure else (row.pending if row else None)
    admitted: int | None = figure.admitted if figure else (row.admitted if row else None)
    return {
        "name": name,
        "nominalQuota": row.nominal_quota if row else {},
        "usage": row.usage if row else {},
        "pending": pending,
        "admitted": admitted,
    }


def pending_workloads_body(
    plan: PendingPlan | None,
    namespace: str,
    kinds: Collection[str],
    queues: Iterable[Mapping[str, Any]],
    *,
    limit: int = MAX_PENDING_ROWS,
) -> dict[str, Any]:
    """The list answer: rows (at most ``limit``), their queues' figures, and whether the
    controller has judged the queues yet (``planned``: false before its first pass)."""
    rows = pending_rows(plan, namespace, kinds)
    kept = rows[:limit]
    by_name = {str((q.get("metadata") or {}).get("name")): q for q in queues}
    names = sorted({row.queue for row in rows if row.queue})
    figures = plan.figures if plan is not None else {}
    body: dict[str, Any] = {
        "kind": f"{PENDING_KIND}List",
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "metadata": {"namespace": namespace},
        "planned": plan is not None,
        "total": len(rows),
        "limit": limit,
        "truncated": len(rows) > limit,
        "items": [row.item() for row in kept],
        "queues": [_queue_figures(name, by_name, figures) for name in names],
    }
    if len(rows) > limit:
        body["message"] = (
            f"{len(rows)} workloads wait in namespace {namespace}; the first {limit} by "
            "queue and position are listed"
        )
    return body
