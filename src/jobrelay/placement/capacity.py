"""A worker cluster's capacity, as pure data: its nodes, what is requested on each,
and the demand jobrelay placed there that the worker has not made pods for yet.

Built from the worker's Nodes and Pods (the informers that keep it live are the
caller's); immutable, so one snapshot serves a whole placement decision. What each
node has free, and what reservations take, is computed once per snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jobrelay.placement.nodefit import Fit, Pool, Shape, assign, largest_free, shape_largest
from jobrelay.placement.units import CPU, GPU, MEMORY, PODS, format_resources, resources_of
from jobrelay.placement.workload import PodGroup, Taint
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta

# A node that does not say how many pods it takes is not limited by that.
_UNLIMITED_PODS = 1 << 40


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Mapping[str, int]
    # The sum of the requests of the pods bound to it (placement.units' integers;
    # ``pods``: how many).
    requested: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable

    def free(self) -> dict[str, int]:
        left = {r: q - self.requested.get(r, 0) for r, q in self.allocatable.items()}
        left.setdefault(PODS, _UNLIMITED_PODS)
        return left


def node_of(obj: JsonObj, requested: Mapping[str, int] | None = None) -> Node:
    """A Node object of the API as placement sees it; ValueError on a malformed quantity."""
    meta = Meta(obj)
    spec: Any = obj.get("spec") or {}
    status: Any = obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return Node(
        name=meta.name,
        allocatable=resources_of(status.get("allocatable") or {}),
        requested=dict(requested or {}),
        labels=dict(meta.labels),
        taints=tuple(
            Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
            for t in spec.get("taints") or []
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
    )


@dataclass(frozen=True, slots=True)
class Reservation:
    """Pods jobrelay placed on the worker that the worker has not created yet
    (``key``: which workload, so its pods are not counted twice once they appear)."""

    key: str
    groups: tuple[PodGroup, ...]


@dataclass(frozen=True, slots=True)
class Summary:
    """What ``WorkerCluster.status.capacity`` shows."""

    nodes: int
    schedulable_nodes: int
    allocatable: Mapping[str, int]
    requested: Mapping[str, int]
    reserved: Mapping[str, int]

    def to_status(self) -> JsonObj:
        return {
            "nodes": self.nodes,
            "schedulableNodes": self.schedulable_nodes,
            "allocatable": format_resources(self.allocatable),
            "requested": format_resources(self.requested),
            "reserved": format_resources(self.reserved),
        }

    def columns(self) -> str:
        """One line for ``jobrelay clusters``: ``nodes 3/4, cpu 12/64, memory 4Gi/256Gi``."""
        parts = [f"nodes {self.schedulable_nodes}/{self.nodes}"]
        allocatable = format_resources(self.allocatable)
        used = format_resources(
            {r: self.requested.get(r, 0) + self.reserved.get(r, 0) for r in self.allocatable}
        )
        for resource in (
            CPU,
            MEMORY,
            GPU,
            *sorted(set(self.allocatable) - {CPU, MEMORY, GPU, PODS}),
        ):
            if resource in allocatable:
                parts.append(f"{resource} {used[resource]}/{allocatable[resource]}")
        return ", ".join(parts)


def _add(into: dict[str, int], more: Mapping[str, int], times: int = 1) -> None:
    for resource, quantity in more.items():
        into[resource] = into.get(resource, 0) + quantity * times


class WorkerCapacity:
    """One cluster's nodes and reservations, with the indices a decision reads."""

    def __init__(self, nodes: tuple[Node, ...] = (), reservations: tuple[Reservation, ...] = ()):
        self.nodes = nodes
        self.reservations = reservations

    def with_reservations(self, reservations: tuple[Reservation, ...]) -> WorkerCapacity:
        """The same nodes with other reservations; the node indices are shared, not rebuilt."""
        if reservations == self.reservations:
            return self
        return self._sharing_indices(WorkerCapacity(self.nodes, reservations))

    def with_reservation(self, reservation: Reservation) -> WorkerCapacity:
        """One reservation more, placed on top of what this one has taken: the held pass
        waking workloads one after another, and the relay's overlay of a placement more,
        pay for each once, not for all again."""
        other = WorkerCapacity(self.nodes, (*self.reservations, reservation))
        pool, before = self.pool, self._after_reservations
        taken = dict(before)
        assign(reservation.groups, pool, taken, self._largest_after_reservations)
        largest = list(self._largest_after_reservations)
        for number in {pool.shape_of[i] for i, free in taken.items() if before.get(i) is not free}:
            largest[number] = largest_free(
                [taken.get(i, pool.free[i]) for i in pool.shapes[number].nodes]
            )
        reserved = dict(self._reserved)
        _add_reservation(reserved, reservation)
        other.__dict__.update(
            _after_reservations=taken, _largest_after_reservations=tuple(largest),
            _reserved=reserved,
        )  # fmt: skip
        return self._sharing_indices(other)

    def _sharing_indices(self, other: WorkerCapacity) -> WorkerCapacity:
        """``other`` (the same nodes) with this one's node indices: built once on the object
        the tracker keeps while nothing changes, then shared by every variant with other
        reservations."""
        other.__dict__.update(pool=self.pool, _node_totals=self._node_totals)
        if "empty" in self.__dict__:
            other.__dict__["empty"] = self.__dict__["empty"]
        return other

    def __repr__(self) -> str:
        return f"WorkerCapacity({len(self.nodes)} nodes, {len(self.reservations)} reservations)"

    @cached_property
    def pool(self) -> Pool:
        """The schedulable nodes, grouped by what a pod's constraints look at."""
        names: list[str] = []
        free: list[Mapping[str, int]] = []
        shapes: dict[tuple[Any, ...], tuple[Mapping[str, str], tuple[Taint, ...], list[int]]] = {}
        unusable: dict[str, int] = {}
        for node in sorted(self.nodes, key=lambda n: n.name):
            if not node.ready:
                unusable["not Ready"] = unusable.get("not Ready", 0) + 1
                continue
            if node.unschedulable:
                unusable["unschedulable"] = unusable.get("unschedulable", 0) + 1
                continue
            key = (tuple(sorted(node.labels.items())), node.taints)
            shape = shapes.setdefault(key, (node.labels, node.taints, []))
            shape[2].append(len(names))
            names.append(node.name)
            free.append(node.free())
        shape_of = [0] * len(names)
        for number, (_, _, nodes) in enumerate(shapes.values()):
            for index in nodes:
                shape_of[index] = number
        return Pool(
            tuple(names),
            tuple(free),
            tuple(
                Shape(labels, taints, tuple(nodes), largest_free([free[i] for i in nodes]))
                for labels, taints, nodes in shapes.values()
            ),
            unusable,
            tuple(shape_of),
        )

    @cached_property
    def _after_reservations(self) -> dict[int, Mapping[str, int]]:
        # Reserved pods take their room first; what does not fit any more (capacity
        # shrank under them) will be Pending on the worker and takes none.
        taken: dict[int, Mapping[str, int]] = {}
        for reservation in self.reservations:
            assign(reservation.groups, self.pool, taken)
        return taken

    @cached_property
    def _largest_after_reservations(self) -> tuple[Mapping[str, int], ...]:
        return shape_largest(self.pool, self._after_reservations)

    def fit(self, groups: tuple[PodGroup, ...]) -> Fit:
        """Whether ``groups`` fit at once on top of what is requested and reserved."""
        return assign(
            groups, self.pool, dict(self._after_reservations), self._largest_after_reservations
        )

    @cached_property
    def empty(self) -> WorkerCapacity:
        """The same nodes with nothing on them, all schedulable (a workload that does not
        fit this never will)."""
        return WorkerCapacity(
            tuple(Node(n.name, n.allocatable, {}, n.labels, n.taints) for n in self.nodes)
        )

    @cached_property
    def _node_totals(self) -> _NodeTotals:
        totals = _NodeTotals({}, {}, {}, {}, 0)
        for node in self.nodes:
            _add(totals.allocatable, node.allocatable)
            _add(totals.requested, node.requested)
            if node.schedulable:
                totals.schedulable += 1
                _add(totals.usable_allocatable, node.allocatable)
                _add(totals.usable_requested, node.requested)
        return totals

    @cached_property
    def _reserved(self) -> dict[str, int]:
        reserved: dict[str, int] = {}
        for reservation in self.reservations:
            _add_reservation(reserved, reservation)
        return reserved

    @cached_property
    def summary(self) -> Summary:
        totals = self._node_totals
        return Summary(
            len(self.nodes), totals.schedulable, totals.allocatable, totals.requested,
            self._reserved,
        )  # fmt: skip

    @cached_property
    def usable_totals(self) -> tuple[Mapping[str, int], Mapping[str, int]]:
        """Allocatable and used (requested plus reserved) over the schedulable nodes:
        what the scores weigh."""
        used = dict(self._node_totals.usable_requested)
        _add(used, self._reserved)
        return self._node_totals.usable_allocatable, used


@dataclass(slots=True)
class _NodeTotals:
    allocatable: dict[str, int]
    requested: dict[str, int]
    usable_allocatable: dict[str, int]
    usable_requested: dict[str, int]
    schedulable: int


def _add_reservation(into: dict[str, int], reservation: Reservation) -> None:
    for group in reservation.groups:
        _add(into, {PODS: 1, **group.requests}, group.count)
