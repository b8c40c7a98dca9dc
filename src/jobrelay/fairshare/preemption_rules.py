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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from jobrelay.fairshare.model import Entry, Fleet, QueueSpec, Reclaim, WithinQueue
from jobrelay.fairshare.shares import add_into, usage_by_queue
from jobrelay.placement.units import Resources

__all__ = [
    "PREEMPTED",
    "PREEMPTING",
    "Notice",
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
    winner: Entry, queues: Mapping[str, QueueSpec], entries: list[Entry], need: Resources
) -> list[Entry]:
    """Everyone the winner's queue may displace, in the order they are taken."""
    own = queues.get(winner.queue)
    if own is None:
        return []
    usage = usage_by_queue(e for e in entries if e.queue in queues)
    admitted = [e for e in entries if e.admitted and e.key != winner.key and e.queue in queues]
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
) -> tuple[str, ...] | None:
    """The keys of the admitted entries to preempt so that ``need`` is freed for
    ``winner``, in the order chosen; () when nothing is needed; None when no allowed set
    frees enough (then nobody is preempted). ``fleet`` is part of the snapshot (reserved
    for shares-aware choices; the current rules do not read it)."""
    del fleet
    need = _needed(need)
    if not need:
        return ()
    entries = list(entries)
    usage = {name: dict(values) for name, values in usage_by_queue(entries).items()}
    chosen: list[Entry] = []
    freed: dict[str, int] = {}
    for candidate in _candidates(winner, queues, entries, need):
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
