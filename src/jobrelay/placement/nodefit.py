"""Per-node fit: whether every pod group of a workload fits a cluster at once.

Counted node by node, as kube-scheduler would: a node takes as many pods of a group
as its free resources allow for every resource the pod requests, and only where the
group's nodeSelector, required affinity and tolerations allow; unschedulable and
not-Ready nodes take none. A sum over the cluster never counts. Groups are placed
greedily, first fit, in their order (the scheduler is greedy too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


@dataclass(frozen=True, slots=True)
class Pool:
    """The schedulable nodes of one cluster and what each has free."""

    names: tuple[str, ...]
    free: tuple[Mapping[str, int], ...]
    shapes: tuple[Shape, ...]
    # Why the other nodes take no pods: {"not Ready": 2, "unschedulable": 1}.
    unusable: Mapping[str, int] = field(default_factory=dict)


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


def assign(
    groups: Sequence[PodGroup], pool: Pool, taken: dict[int, Mapping[str, int]] | None = None
) -> Fit:
    """Place every pod of ``groups`` on ``pool``'s nodes, greedily.

    ``taken`` holds the free resources of nodes already used (node index: what is
    left); it is updated in place, so reservations can be placed first and the
    workload after them.
    """
    taken = {} if taken is None else taken
    placed: list[tuple[str, str, int]] = []
    for group in groups:
        remaining = group.count
        # Every pod takes one of the node's pod slots too.
        requests = {PODS: 1, **group.requests}
        counts: list[tuple[str, int]] = []
        refused: dict[str, int] = {}
        allowed: list[int] = []
        for shape in pool.shapes:
            if remaining == 0:
                break
            nodes = shape.nodes
            names_nodes = group.affinity is not None and group.affinity.names_nodes
            if not names_nodes:
                cause = group.allows("", shape.labels, shape.taints)
                if cause is not None:
                    refused[cause] = refused.get(cause, 0) + len(nodes)
                    continue
            for index in nodes:
                if names_nodes:
                    cause = group.allows(pool.names[index], shape.labels, shape.taints)
                    if cause is not None:
                        refused[cause] = refused.get(cause, 0) + 1
                        continue
                allowed.append(index)
                free = taken.get(index)
                if free is None:
                    free = pool.free[index]
                pods = _pods_that_fit(free, requests, remaining)
                if pods:
                    taken[index] = _minus(free, requests, pods)
                    counts.append((pool.names[index], pods))
                    remaining -= pods
                    if remaining == 0:
                        break
        placed.extend((group.name, node, pods) for node, pods in counts)
        if remaining:
            if not allowed:
                return Fit(tuple(placed), _none_allowed(group, pool, refused))
            if not counts:
                frees = [taken.get(i, pool.free[i]) for i in allowed]
                return Fit(tuple(placed), _too_large(requests, frees))
            fitted = group.count - remaining
            return Fit(
                tuple(placed),
                f"{_group(group) if len(groups) > 1 else ''}{fitted} of {group.count} pods "
                f"fit at once (per node: {_per_node(counts)})",
            )
    return Fit(tuple(placed))
