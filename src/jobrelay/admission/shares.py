"""Each queue's figures over the fleet: usage, demand, dominant share, fair share.

A queue's *dominant share* is its usage of the resource it uses most, as a fraction of
the fleet's allocatable of that resource (dominant-resource fairness); divided by its
weight it orders admission. Its *fair share* is its part of the fleet when the fleet is
divided by weight among the queues that want something, no queue given more than its
demand (or its ceiling) asks, what one cannot use going to the others (water-filling, as
Armada computes its demand-capped fair share). The *fairness error* sums how far the
queues below their fair share fall short of it (Armada's metric): 0 is perfectly fair.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobrelay.admission.queue_model import Entry, Fleet, QueueSpec
from jobrelay.placement.units import Resources

__all__ = [
    "QueueFigures",
    "dominant_share",
    "dominant_share_with",
    "fairness_error",
    "queue_figures",
    "usage_by_queue",
]

# Shares closer than this are equal (float sums of many small fractions).
_EPSILON = 1e-12


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One queue as the fleet sees it now. Shares are fractions of the fleet (0 to 1)."""

    name: str
    weight: float
    # What its admitted entries request, per resource.
    usage: Mapping[str, int] = field(default_factory=dict)
    # What its admitted and pending entries request together.
    demand: Mapping[str, int] = field(default_factory=dict)
    pending: int = 0
    admitted: int = 0
    dominant_share: float = 0.0
    weighted_share: float = 0.0
    fair_share: float = 0.0
    # The share it holds now: its dominant share (Armada's actual share).
    actual_share: float = 0.0


def dominant_share(usage: Resources, fleet: Fleet) -> float:
    """The largest fraction of the fleet's allocatable that ``usage`` takes of any one
    resource (resources the fleet has none of are left out: nothing can be shared)."""
    share = 0.0
    for resource, used in usage.items():
        allocatable = fleet.allocatable.get(resource, 0)
        if allocatable > 0 and used > 0:
            share = max(share, used / allocatable)
    return share


def dominant_share_with(usage: Resources, extra: Resources, fleet: Fleet) -> float:
    """The dominant share of ``usage`` and ``extra`` together (without building the sum)."""
    share = 0.0
    for resource, used in usage.items():
        allocatable = fleet.allocatable.get(resource, 0)
        total = used + extra.get(resource, 0)
        if allocatable > 0 and total > 0:
            share = max(share, total / allocatable)
    for resource, asked in extra.items():
        allocatable = fleet.allocatable.get(resource, 0)
        if resource not in usage and allocatable > 0 and asked > 0:
            share = max(share, asked / allocatable)
    return share


def add_into(total: dict[str, int], requests: Resources, times: int = 1) -> None:
    """Adds ``requests`` (``times`` over) into ``total`` in place."""
    for resource, value in requests.items():
        total[resource] = total.get(resource, 0) + value * times


def usage_by_queue(entries: Iterable[Entry]) -> dict[str, dict[str, int]]:
    """What each queue's admitted entries request, per resource."""
    usage: dict[str, dict[str, int]] = {}
    for entry in entries:
        if entry.admitted:
            add_into(usage.setdefault(entry.queue, {}), entry.requests)
    return usage


def _capped(demand: Resources, queue: QueueSpec) -> dict[str, int]:
    """``demand`` cut down to what the queue may ever use (its ceiling per resource)."""
    capped = {}
    for resource, value in demand.items():
        ceiling = queue.ceiling(resource)
        capped[resource] = value if ceiling is None else min(value, ceiling)
    return capped


def fair_shares(weights: Mapping[str, float], caps: Mapping[str, float]) -> dict[str, float]:
    """The fleet (1.0) divided by weight, no queue above its cap, what a capped queue
    leaves going to the rest (water-filling). Queues of cap 0 or weight <= 0 get 0."""
    shares = dict.fromkeys(weights, 0.0)
    active = {name for name, cap in caps.items() if cap > 0 and weights.get(name, 0) > 0}
    remaining = 1.0
    while active and remaining > _EPSILON:
        total_weight = sum(weights[name] for name in active)
        offers = {name: remaining * weights[name] / total_weight for name in active}
        filled = {name for name in active if shares[name] + offers[name] >= caps[name] - _EPSILON}
        if not filled:
            for name in active:
                shares[name] += offers[name]
            break
        # Fill the queues that reach their cap, then share out again what they left.
        for name in sorted(filled):
            remaining -= caps[name] - shares[name]
            shares[name] = caps[name]
        active -= filled
    return shares


def queue_figures(
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    pending_groups: Mapping[str, Iterable[tuple[Resources, int]]] | None = None,
) -> dict[str, QueueFigures]:
    """Every queue's figures (entries of a queue not in ``queues`` are left out).
    ``pending_groups``: each queue's pending entries counted by requests, as a caller
    that keeps them between passes has them (the pending ones among ``entries`` are then
    not read)."""
    usage: dict[str, dict[str, int]] = {name: {} for name in queues}
    demand: dict[str, dict[str, int]] = {name: {} for name in queues}
    pending = dict.fromkeys(queues, 0)
    admitted = dict.fromkeys(queues, 0)
    # Entries counted by queue, admittedness and requests, summed once per such group:
    # the entries of one template share one requests object (a hundred thousand, a few
    # hundred groups). The entries live through the call, so their ids stay theirs.
    counts: dict[tuple[str, bool, int], int] = {}
    asked: dict[int, Resources] = {}
    for entry in entries:
        if entry.queue not in queues or (pending_groups is not None and not entry.admitted):
            continue
        requests = entry.requests
        group = (entry.queue, entry.admitted, id(requests))
        count = counts.get(group)
        if count is None:
            counts[group] = 1
            asked[group[2]] = requests
        else:
            counts[group] = count + 1
    for (in_queue, is_admitted, requests_id), count in counts.items():
        requests = asked[requests_id]
        add_into(demand[in_queue], requests, count)
        if is_admitted:
            add_into(usage[in_queue], requests, count)
            admitted[in_queue] += count
        else:
            pending[in_queue] += count
    for in_queue, groups in (pending_groups or {}).items():
        if in_queue in queues:
            for requests, count in groups:
                add_into(demand[in_queue], requests, count)
                pending[in_queue] += count
    weights = {name: queue.weight for name, queue in queues.items()}
    caps = {
        name: dominant_share(_capped(demand[name], queue), fleet) for name, queue in queues.items()
    }
    fair = fair_shares(weights, caps)
    figures = {}
    for name, queue in sorted(queues.items()):
        share = dominant_share(usage[name], fleet)
        figures[name] = QueueFigures(
            name=name,
            weight=queue.weight,
            usage=usage[name],
            demand=demand[name],
            pending=pending[name],
            admitted=admitted[name],
            dominant_share=share,
            weighted_share=share / queue.weight if queue.weight > 0 else float("inf"),
            fair_share=fair[name],
            actual_share=share,
        )
    return figures


def fairness_error(figures: Mapping[str, QueueFigures] | Iterable[QueueFigures]) -> float:
    """How far the queues below their fair share fall short of it, summed (0: fair)."""
    values = figures.values() if isinstance(figures, Mapping) else figures
    return sum(max(0.0, figure.fair_share - figure.actual_share) for figure in values)
