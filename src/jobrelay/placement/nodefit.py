"""Per-node fit: whether every pod group of a workload fits a cluster at once.

Counted node by node, as kube-scheduler would: a node takes as many pods of a group
as its free resources allow for every resource the pod requests, and only where the
group's nodeSelector, required affinity and tolerations allow; unschedulable and
not-Ready nodes take none. A sum over the cluster never counts. Groups are placed
greedily, first fit, in their order (the scheduler is greedy too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from jobrelay.placement.units import PODS, format_units
from jobrelay.placement.workload import PodGroup, Taint

# Nodes named in an explanation before the rest are only counted.
_NAMED_NODES = 5


@dataclass(frozen=True, slots=True)
class Shape:
    """Nodes that look alike to a pod's constraints (labels, taints): judged once."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    nodes: tuple[int, ...]  # indices into Pool.names and Pool.free
    # The most any one of its nodes has free, per resource: a pod asking for more is
    # refused by the whole shape at once (what a decision takes only lowers free).
    largest: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pool:
    """The schedulable nodes of one cluster and what each has free."""

    names: tuple[str, ...]
    free: tuple[Mapping[str, int], ...]
    shapes: tuple[Shape, ...]
    # Why the other nodes take no pods: {"not Ready": 2, "unschedulable": 1}.
    unusable: Mapping[str, int] = field(default_factory=dict)
    shape_of: tuple[int, ...] = ()  # node index: index of its shape


def largest_free(frees: Sequence[Mapping[str, int]]) -> dict[str, int]:
    largest: dict[str, int] = {}
    for free in frees:
        for resource, quantity in free.items():
            if quantity > largest.get(resource, 0):
                largest[resource] = quantity
    return largest


@dataclass(frozen=True, slots=True)
class Fit:
    """Where the pods would go (``placed``: group name, node name, pods), or why not."""

    placed: tuple[tuple[str, str, int], ...] = ()
    reason: str | None = None  # None: everything fits

    @property
    def fits(self) -> bool:
        return self.reason is None


def _pods_that_fit(free: Mapping[str, int], requests: Mapping[str, int], wanted: int) -> int:
    count = wanted
    for resource, quantity in requests.items():
        count = min(count, free.get(resource, 0) // quantity)
        if count == 0:
            return 0
    return count


def _minus(free: Mapping[str, int], requests: Mapping[str, int], pods: int) -> dict[str, int]:
    left = dict(free)
    for resource, quantity in requests.items():
        left[resource] = left.get(resource, 0) - quantity * pods
    return left


def _per_node(counts: Sequence[tuple[str, int]]) -> str:
    named = ", ".join(f"{name} {pods}" for name, pods in counts[:_NAMED_NODES])
    rest = len(counts) - _NAMED_NODES
    return f"{named}, and {rest} more nodes" if rest > 0 else named


def _none_allowed(group: PodGroup, pool: Pool, refused: Mapping[str, int]) -> str:
    causes = {**pool.unusable, **refused}
    if not causes:
        return "has no schedulable nodes"
    why = ", ".join(f"{count} {cause}" for cause, count in sorted(causes.items()))
    return f"no node can take a pod of {_group(group)}({why})"


def _group(group: PodGroup) -> str:
    return f"group {group.name} " if group.name not in ("", "main") else "this workload "


def _too_large(requests: Mapping[str, int], frees: Sequence[Mapping[str, int]]) -> str:
    for resource, quantity in sorted(requests.items()):
        largest = max((free.get(resource, 0) for free in frees), default=0)
        if largest < quantity:
            need = format_units(resource, quantity)
            return f"no node has {need} {resource} free (largest free: {format_units(resource, largest)})"
    wanted = ", ".join(
        f"{format_units(r, q)} {r}" for r, q in sorted(requests.items()) if r != PODS
    )
    return f"no node has {wanted} free at once"


def shape_largest(
    pool: Pool, taken: Mapping[int, Mapping[str, int]], nodes: Iterable[int] | None = None
) -> tuple[Mapping[str, int], ...]:
    """The most a node of each shape has free once ``taken`` is taken (only the shapes
    of ``nodes`` are recounted; default: those of every taken node)."""
    touched = {pool.shape_of[index] for index in (taken if nodes is None else nodes)}
    return tuple(
        largest_free([taken.get(i, pool.free[i]) for i in shape.nodes])
        if number in touched
        else shape.largest
        for number, shape in enumerate(pool.shapes)
    )


def assign(
    groups: Sequence[PodGroup],
    pool: Pool,
    taken: dict[int, Mapping[str, int]] | None = None,
    largest: Sequence[Mapping[str, int]] | None = None,
) -> Fit:
    """Place every pod of ``groups`` on ``pool``'s nodes, greedily.

    ``taken`` holds the free resources of nodes already used (node index: what is
    left); it is updated in place, so reservations can be placed first and the
    workload after them. ``largest`` is :func:`shape_largest` of ``taken`` as given
    (default: recounted where needed).
    """
    if taken is None:
        taken = {}
    if largest is None:
        largest = shape_largest(pool, taken) if taken else [s.largest for s in pool.shapes]
    used_now: set[int] = set()  # nodes this call took from
    placed: list[tuple[str, str, int]] = []
    for group in groups:
        remaining = group.count
        # Every pod takes one of the node's pod slots too.
        requests = {PODS: 1, **group.requests}
        counts: list[tuple[str, int]] = []
        refused: dict[str, int] = {}
        allowed: list[int] = []  # shapes with a node the group may use
        names_nodes = group.affinity is not None and group.affinity.names_nodes
        for number, shape in enumerate(pool.shapes):
            if remaining == 0:
                break
            nodes = shape.nodes
            if not names_nodes:
                cause = group.allows("", shape.labels, shape.taints)
                if cause is not None:
                    refused[cause] = refused.get(cause, 0) + len(nodes)
                    continue
            allowed.append(number)
            if any(largest[number].get(r, 0) < q for r, q in requests.items()):
                continue
            for index in nodes:
                if names_nodes:
                    cause = group.allows(pool.names[index], shape.labels, shape.taints)
                    if cause is not None:
                        refused[cause] = refused.get(cause, 0) + 1
                        continue
                free = taken.get(index)
                if free is None:
                    free = pool.free[index]
                pods = _pods_that_fit(free, requests, remaining)
                if pods:
                    taken[index] = _minus(free, requests, pods)
                    used_now.add(index)
                    counts.append((pool.names[index], pods))
                    remaining -= pods
                    if remaining == 0:
                        break
        placed.extend((group.name, node, pods) for node, pods in counts)
        if remaining:
            if not allowed:
                return Fit(tuple(placed), _none_allowed(group, pool, refused))
            if not counts:
                now = shape_largest(pool, taken, used_now) if used_now else largest
                frees = [now[number] for number in allowed]
                return Fit(tuple(placed), _too_large(requests, frees))
            fitted = group.count - remaining
            return Fit(
                tuple(placed),
                f"{_group(group) if len(groups) > 1 else ''}{fitted} of {group.count} pods "
                f"fit at once (per node: {_per_node(counts)})",
            )
    return Fit(tuple(placed))
