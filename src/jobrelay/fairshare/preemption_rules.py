"""Whom a waiting workload may displace, and only as many as it needs.

Two ways, each allowed by the winner's queue: ``reclaimWithinFleet`` (the winner's queue
would stay within its nominal quota: it takes back what queues above their nominal
borrowed; ``Any``: whatever their priority, ``LowerPriority``: only lower than the
winner's), never taking a queue below its own nominal in what is needed; and
``withinQueue: LowerPriority`` (lower-priority admitted workloads of the winner's own
queue). Candidates from other queues come first, then the own queue's; within each, the
lowest priority, then the newest. Candidates are added until what they free covers
``need``, then any whose removal is not needed is dropped again (the last added first
kept: Kueue's minimal set). A candidate that frees nothing of what is needed is never
taken; when no set covers the need, nobody is preempted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from jobrelay.fairshare.model import Entry, Fleet, QueueSpec, Reclaim, WithinQueue
from jobrelay.fairshare.shares import add_into, usage_by_queue
from jobrelay.placement.units import Resources

__all__ = [
    "PREEMPTED",
    "PREEMPTING",
    "Notice",
    "Preemption",
    "Shortfall",
    "plan_preemptions",
    "preempted_notice",
    "preempting_notice",
    "preemptions",
    "victims_for",
]

# The reasons of the Events on the victim (Warning) and on the winner (Normal).
PREEMPTED: Final = "Preempted"
PREEMPTING: Final = "Preempting"


@dataclass(frozen=True, slots=True)
class Notice:
    """An Event to write: its reason and message."""

    reason: str
    message: str


def _needed(need: Resources) -> dict[str, int]:
    return {resource: value for resource, value in need.items() if value > 0}


def _may_reclaim(winner: Entry, queue: QueueSpec, usage: Resources) -> bool:
    """Whether the winner's queue stays within its nominal quota with the winner."""
    return all(
        usage.get(resource, 0) + asked <= queue.nominal.get(resource, 0)
        for resource, asked in winner.requests.items()
        if asked > 0
    )


def _in_victim_order(entries: Iterable[Entry]) -> list[Entry]:
    """Lowest priority first, then the newest (later created, then the larger key)."""
    newest_first = sorted(entries, key=lambda e: (e.created, e.key), reverse=True)
    return sorted(newest_first, key=lambda e: e.priority)  # stable: keeps newest first


def _candidates(
    winner: Entry,
    queues: Mapping[str, QueueSpec],
    entries: list[Entry],
    need: Resources,
    on: str | None,
) -> list[Entry]:
    """Everyone the winner's queue may displace (on cluster ``on``, when given), in the
    order they are taken."""
    own = queues.get(winner.queue)
    if own is None:
        return []
    usage = usage_by_queue(e for e in entries if e.queue in queues)
    admitted = [
        e
        for e in entries
        if e.admitted
        and e.preemptible
        and not e.leaving
        and e.key != winner.key
        and e.queue in queues
        and (on is None or e.cluster == on)
    ]
    others: list[Entry] = []
    if own.reclaim is not Reclaim.NEVER and _may_reclaim(winner, own, usage.get(own.name, {})):
        for entry in admitted:
            queue = queues[entry.queue]
            if entry.queue == own.name:
                continue
            if own.reclaim is Reclaim.LOWER_PRIORITY and entry.priority >= winner.priority:
                continue
            if any(usage[entry.queue].get(r, 0) > queue.nominal.get(r, 0) for r in need):
                others.append(entry)
    within: list[Entry] = []
    if own.within_queue is WithinQueue.LOWER_PRIORITY:
        within = [e for e in admitted if e.queue == own.name and e.priority < winner.priority]
    useful = [e for e in _in_victim_order(others) if _frees(e, need)]
    useful += [e for e in _in_victim_order(within) if _frees(e, need)]
    return useful


def _frees(entry: Entry, need: Resources) -> bool:
    return any(entry.requests.get(resource, 0) > 0 for resource in need)


def _covers(freed: Resources, need: Resources) -> bool:
    return all(freed.get(resource, 0) >= value for resource, value in need.items())


def _stays_at_nominal(queue: QueueSpec, usage: Resources, entry: Entry, need: Resources) -> bool:
    """Whether taking ``entry`` keeps its queue at or above its nominal in every resource
    that is needed (a reclaim never eats into another queue's guarantee)."""
    return all(
        usage.get(resource, 0) - entry.requests.get(resource, 0) >= queue.nominal.get(resource, 0)
        for resource in need
        if entry.requests.get(resource, 0) > 0
    )


def victims_for(
    winner: Entry,
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    *,
    need: Resources,
    on: str | None = None,
) -> tuple[str, ...] | None:
    """The keys of the admitted entries to preempt so that ``need`` is freed for
    ``winner``, in the order chosen; () when nothing is needed; None when no allowed set
    frees enough (then nobody is preempted). ``on``: only entries placed on that cluster
    (room is made on one cluster). Entries not ``preemptible`` or already ``leaving`` are
    never taken. ``fleet`` is part of the snapshot (reserved for shares-aware choices;
    the current rules do not read it)."""
    del fleet
    need = _needed(need)
    if not need:
        return ()
    entries = list(entries)
    usage = {name: dict(values) for name, values in usage_by_queue(entries).items()}
    chosen: list[Entry] = []
    freed: dict[str, int] = {}
    for candidate in _candidates(winner, queues, entries, need, on):
        queue_usage = usage.setdefault(candidate.queue, {})
        if candidate.queue != winner.queue and not _stays_at_nominal(
            queues[candidate.queue], queue_usage, candidate, need
        ):
            continue
        chosen.append(candidate)
        add_into(freed, candidate.requests)
        for resource, value in candidate.requests.items():
            queue_usage[resource] = queue_usage.get(resource, 0) - value
        if _covers(freed, need):
            break
    else:
        return None
    # Drop, latest first, every victim the others cover the need without.
    for victim in reversed(list(chosen)):
        without = {r: v - victim.requests.get(r, 0) for r, v in freed.items()}
        if _covers(without, need):
            chosen.remove(victim)
            freed = without
    return tuple(victim.key for victim in chosen)


def preemptions(
    winners: Sequence[Entry],
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    *,
    need_of: Callable[[Entry], Resources],
) -> dict[str, tuple[str, ...]]:
    """Victims for several winners in turn (the caller's order), each victim taken once:
    a victim chosen for one winner no longer counts as admitted for the next, and a
    winner given victims counts as admitted (its queue's usage grows, so a reclaim stops
    at its nominal). ``need_of(winner)`` is what must be freed for it. Winners no set
    makes room for are left out."""
    current = {entry.key: entry for entry in entries}
    chosen: dict[str, tuple[str, ...]] = {}
    for winner in winners:
        victims = victims_for(winner, queues, current.values(), fleet, need=need_of(winner))
        if not victims:
            continue
        chosen[winner.key] = victims
        for key in victims:
            current[key] = dataclasses.replace(current[key], admitted=False)
        current[winner.key] = dataclasses.replace(winner, admitted=True)
    return chosen


class Shortfall(Enum):
    """What a waiting workload lacks: room on a cluster (no cluster fits it now), or
    quota (its queue is at its ceiling)."""

    ROOM = "room"
    QUOTA = "quota"


@dataclass(frozen=True, slots=True)
class Preemption:
    """The victims chosen for one winner, and the cluster whose room they make ("" when
    they make quota, not room)."""

    winner: Entry
    victims: tuple[Entry, ...]
    cluster: str = ""


def _minus(wanted: Resources, available: Mapping[str, int]) -> dict[str, int]:
    return {r: v - available.get(r, 0) for r, v in wanted.items() if v - available.get(r, 0) > 0}


def _over_ceiling(queue: QueueSpec, usage: Resources, requests: Resources) -> dict[str, int]:
    """How far ``requests`` on top of ``usage`` goes above the queue's ceiling."""
    over: dict[str, int] = {}
    for resource, asked in requests.items():
        ceiling = queue.ceiling(resource)
        if ceiling is not None and asked > 0 and usage.get(resource, 0) + asked > ceiling:
            over[resource] = usage.get(resource, 0) + asked - ceiling
    return over


def _for_quota(
    winner: Entry, queues: Mapping[str, QueueSpec], current: Mapping[str, Entry], fleet: Fleet
) -> Preemption | None:
    """Lower-priority workloads of its own queue that bring it under its ceiling (only
    its own queue's usage counts against its ceiling: a reclaim cannot help)."""
    own = queues[winner.queue]
    if own.within_queue is WithinQueue.NEVER:
        return None
    usage = usage_by_queue(current.values()).get(own.name, {})
    need = _over_ceiling(own, usage, winner.requests)
    within_only = {**queues, own.name: dataclasses.replace(own, reclaim=Reclaim.NEVER)}
    victims = victims_for(winner, within_only, current.values(), fleet, need=need)
    if not victims:
        return None
    return Preemption(winner, tuple(current[key] for key in victims))


def _for_room(
    winner: Entry,
    queues: Mapping[str, QueueSpec],
    current: Mapping[str, Entry],
    fleet: Fleet,
    free: Mapping[str, Mapping[str, int]],
    clusters: Collection[str],
) -> Preemption | None:
    """The fewest victims that make room for it on one of ``clusters`` (then the
    cluster's name); none when one has the room already (what is leaving frees it)."""
    best: Preemption | None = None
    for cluster in sorted(c for c in free if c in clusters):
        need = _minus(winner.requests, free[cluster])
        if not need:
            return None  # room there already: it waits for it, nobody is preempted
        victims = victims_for(winner, queues, current.values(), fleet, need=need, on=cluster)
        if victims and (best is None or len(victims) < len(best.victims)):
            best = Preemption(winner, tuple(current[key] for key in victims), cluster)
    return best


def plan_preemptions(
    waiting: Sequence[tuple[Entry, Shortfall]],
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    *,
    free: Mapping[str, Mapping[str, int]],
    clusters_for: Callable[[Entry], Collection[str]] | None = None,
) -> list[Preemption]:
    """Whom to preempt for the ``waiting`` workloads (their queues' order, each with what
    it lacks), each victim taken once.

    ``free``: each cluster's room now (allocatable less what is requested and reserved),
    by resource; the room of entries already ``leaving`` is added to it (it is as good as
    free), and they are neither taken again nor counted in their queues' usage. A winner
    given victims counts as admitted on their cluster, taking its room, so the next
    winner does not count on the same room. ``clusters_for(winner)``: the clusters it
    could go to at all were they empty (its placement rules; default: every cluster in
    ``free``). A winner whose queue allows no preemption, or for whom no allowed set
    makes room, is left out."""
    room = {cluster: dict(values) for cluster, values in free.items()}
    current: dict[str, Entry] = {}
    for entry in entries:
        if entry.admitted and entry.leaving:
            if entry.cluster in room:
                add_into(room[entry.cluster], entry.requests)
            entry = dataclasses.replace(entry, admitted=False)
        current[entry.key] = entry
    chosen: list[Preemption] = []
    for winner, shortfall in waiting:
        queue = queues.get(winner.queue)
        if queue is None or winner.key not in current or current[winner.key].admitted:
            continue
        if queue.reclaim is Reclaim.NEVER and queue.within_queue is WithinQueue.NEVER:
            continue
        if shortfall is Shortfall.QUOTA:
            found = _for_quota(winner, queues, current, fleet)
        else:
            allowed = room.keys() if clusters_for is None else clusters_for(winner)
            found = _for_room(winner, queues, current, fleet, room, allowed)
        if found is None:
            continue
        chosen.append(found)
        for victim in found.victims:
            current[victim.key] = dataclasses.replace(victim, admitted=False)
            if victim.cluster in room:
                add_into(room[victim.cluster], victim.requests)
        current[winner.key] = dataclasses.replace(winner, admitted=True, cluster=found.cluster)
        if found.cluster:
            add_into(room[found.cluster], {r: -v for r, v in winner.requests.items()})
    return chosen


def preempted_notice(victim: Entry, winner: Entry) -> Notice:
    """The Warning on a preempted workload: by whom and why."""
    if victim.queue != winner.queue:
        why = f"to reclaim {winner.queue}'s nominal quota"
    else:
        why = f"of higher priority ({winner.priority} over {victim.priority}) in {victim.queue}"
    return Notice(PREEMPTED, f"preempted by {winner.key} {why}; it waits in {victim.queue} again")


def preempting_notice(winner: Entry, victims: Iterable[str]) -> Notice:
    """The Event on the winner: whom it displaces."""
    names = sorted(victims)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return Notice(PREEMPTING, f"preempting {shown} to make room in {winner.queue}")
