"""A worker cluster's row: its connection, state, mirrors and capacity used. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.fleet import maintenance_rules
from jobrelay.fleet.maintenance_rules import WorkerClusterView
from jobrelay.placement.units import format_units, resources_of

__all__ = ["ResourceUse", "WorkerRow", "resource_uses", "worker_row"]


@dataclass(frozen=True, slots=True)
class ResourceUse:
    """One resource of a worker: used (requested plus jobrelay's reservations not bound
    yet) of allocatable, in the placement model's units, and as people read it."""

    name: str
    used: int
    allocatable: int

    @property
    def text(self) -> str:
        percent = round(100 * self.used / self.allocatable)
        used, total = format_units(self.name, self.used), format_units(self.name, self.allocatable)
        return f"{used}/{total} ({percent}%)"


def resource_uses(capacity: Mapping[str, Any]) -> dict[str, ResourceUse]:
    """Each resource the worker has any of, by name (none for an odd or unknown status)."""
    try:
        allocatable = resources_of(capacity.get("allocatable") or {})
        requested = resources_of(capacity.get("requested") or {})
        reserved = resources_of(capacity.get("reserved") or {})
    except (TypeError, ValueError, AttributeError, ArithmeticError):  # an odd status
        return {}
    return {
        resource: ResourceUse(
            resource, requested.get(resource, 0) + reserved.get(resource, 0), total
        )
        for resource, total in sorted(allocatable.items())
        if total
    }


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One WorkerCluster, as every view shows it."""

    view: WorkerClusterView
    state: str  # Ready, Cordoned, Draining, Lost ... (maintenance_rules.state_summary)
    message: str  # why it is not connected ("" when it is)
    version: str  # its Kubernetes version ("" when not known)
    capacity_known: bool
    nodes: int | None
    schedulable_nodes: int | None
    resources: dict[str, ResourceUse]

    @property
    def name(self) -> str:
        return self.view.name


def worker_row(registration: Mapping[str, Any]) -> WorkerRow:
    """A WorkerCluster's row, from its spec and the status the leader wrote."""
    view = WorkerClusterView.of(registration)
    status = registration.get("status")
    status = status if isinstance(status, Mapping) else {}
    capacity = status.get("capacity")
    capacity = capacity if isinstance(capacity, Mapping) else {}
    message = ": ".join(filter(None, (view.connected_reason, view.connected_message)))
    return WorkerRow(
        view=view,
        state=maintenance_rules.state_summary(view),
        message=message if view.connected != "True" else "",
        version=str(status.get("kubernetesVersion") or ""),
        capacity_known=bool(capacity),
        nodes=_count(capacity.get("nodes")),
        schedulable_nodes=_count(capacity.get("schedulableNodes")),
        resources=resource_uses(capacity),
    )
