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
taken; when no set covers the need, nobody is preempted. Which waiting workloads ask
for victims in one pass: :func:`preempting_candidates` (a few per queue, its head first).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from jobrelay.admission.fair_order import QUEUE_QUOTA_EXCEEDED, WAITING_FOR_ROOM, AdmissionPass
from jobrelay.admission.queue_model import Entry, Fleet, QueueSpec, Reclaim, WithinQueue
from jobrelay.admission.shares import add_into
from jobrelay.placement.units import Resources

__all__ = [
    "PREEMPTED",
    "PREEMPTING",
    "PREEMPTING_PER_PASS",
    "PREEMPTING_PER_QUEUE",
    "Notice",
    "Preemption",
    "Shortfall",
    "marks_of",
    "plan_preemptions",
    "preempted_notice",
    "preempting_candidates",
    "preempting_notice",
    "preemptions",
    "victims_for",
    "winner_mark",
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


def _in_victim_order(entries: list[Entry]) -> None:
    """Sorts in place: lowest priority first, then the newest (later created, then the
    larger key)."""
    entries.sort(key=lambda e: (e.created, e.key), reverse=True)
    entries.sort(key=lambda e: e.priority)  # stable: keeps newest first


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


class _Standing:
    """The admitted entries of a snapshot indexed once for many victim choices: by
    cluster in victim order, with each queue's usage; kept current as victims are taken
    and winners admitted, so each choice reads only the candidates it may take, in order,
    and stops once they cover the need."""

    def __init__(
        self,
        queues: Mapping[str, QueueSpec],
        entries: Iterable[Entry],
        admitted_now: Collection[str] = (),
    ) -> None:
        self.queues = queues
        self.usage: dict[str, dict[str, int]] = {}
        takeable: list[Entry] = []
        for entry in entries:
            if entry.key in admitted_now and not entry.admitted:
                # Admitted by this pass, being placed: its queue's usage, never a victim
                # (else a queue's next winners would reclaim past its nominal quota).
                add_into(self.usage.setdefault(entry.queue, {}), entry.requests)
                continue
            if not entry.admitted:
                continue
            add_into(self.usage.setdefault(entry.queue, {}), entry.requests)
            if entry.preemptible and not entry.leaving and entry.queue in queues:
                takeable.append(entry)
        _in_victim_order(takeable)
        self.everywhere = takeable
        self.by_cluster: dict[str, list[Entry]] = {}
        for entry in takeable:
            self.by_cluster.setdefault(entry.cluster, []).append(entry)
        self.taken: set[str] = set()

    def take(self, victims: Iterable[Entry], winner: Entry) -> None:
        """The victims are no longer admitted; the winner is."""
        for victim in victims:
            self.taken.add(victim.key)
            add_into(self.usage.setdefault(victim.queue, {}),
                     {r: -v for r, v in victim.requests.items()})  # fmt: skip
        add_into(self.usage.setdefault(winner.queue, {}), winner.requests)
        self.taken.add(winner.key)

    def victims(
        self, winner: Entry, need: Resources, on: str | None, *, within_only: bool = False
    ) -> tuple[Entry, ...] | None:
        """See :func:`victims_for`; ``within_only``: of the winner's own queue only."""
        own = self.queues.get(winner.queue)
        if own is None:
            return None
        before = self.usage  # the candidates are judged on the usage before this choice
        reclaim = (
            not within_only
            and own.reclaim is not Reclaim.NEVER
            and _may_reclaim(winner, own, before.get(own.name, {}))
        )
        within = own.within_queue is WithinQueue.LOWER_PRIORITY
        if not reclaim and not within:
            return None
        usage = {name: dict(values) for name, values in before.items()}
        chosen: list[Entry] = []
        freed: dict[str, int] = {}
        later: list[Entry] = []  # own queue's: taken only after every other queue's
        pool = self.everywhere if on is None else self.by_cluster.get(on, [])
        for entry in pool:
            if entry.key in self.taken or entry.key == winner.key or not _frees(entry, need):
                continue
            if entry.queue == own.name:
                if within and entry.priority < winner.priority:
                    later.append(entry)
                continue
            if not reclaim or (
                own.reclaim is Reclaim.LOWER_PRIORITY and entry.priority >= winner.priority
            ):
                continue
            queue = self.queues[entry.queue]
            queue_usage = before.get(entry.queue, {})
            if not any(queue_usage.get(r, 0) > queue.nominal.get(r, 0) for r in need):
                continue  # not above its nominal: nothing of it is borrowed
            if not _stays_at_nominal(queue, usage.setdefault(entry.queue, {}), entry, need):
                continue
            if self._choose(entry, chosen, freed, usage, need):
                return self._fewest(chosen, freed, need)
        for entry in later:
            if self._choose(entry, chosen, freed, usage, need):
                return self._fewest(chosen, freed, need)
        return None

    @staticmethod
    def _choose(
        entry: Entry,
        chosen: list[Entry],
        freed: dict[str, int],
        usage: dict[str, dict[str, int]],
        need: Resources,
    ) -> bool:
        """Adds a victim; whether the chosen now cover the need."""
        chosen.append(entry)
        add_into(freed, entry.requests)
        add_into(usage.setdefault(entry.queue, {}), {r: -v for r, v in entry.requests.items()})
        return _covers(freed, need)

    @staticmethod
    def _fewest(chosen: list[Entry], freed: dict[str, int], need: Resources) -> tuple[Entry, ...]:
        """Drops, latest first, every victim the others cover the need without."""
        for victim in reversed(list(chosen)):
            without = {r: v - victim.requests.get(r, 0) for r, v in freed.items()}
            if _covers(without, need):
                chosen.remove(victim)
                freed = without
        return tuple(chosen)


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
    found = _Standing(queues, entries).victims(winner, need, on)
    return None if found is None else tuple(victim.key for victim in found)


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
    del fleet
    standing = _Standing(queues, entries)
    chosen: dict[str, tuple[str, ...]] = {}
    for winner in winners:
        need = _needed(need_of(winner))
        victims = standing.victims(winner, need, None) if need else None
        if not victims:
            continue
        chosen[winner.key] = tuple(victim.key for victim in victims)
        standing.take(victims, winner)
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


def _for_quota(winner: Entry, standing: _Standing) -> Preemption | None:
    """Lower-priority workloads of its own queue that bring it under its ceiling (only
    its own queue's usage counts against its ceiling: a reclaim cannot help)."""
    own = standing.queues[winner.queue]
    if own.within_queue is WithinQueue.NEVER:
        return None
    need = _over_ceiling(own, standing.usage.get(own.name, {}), winner.requests)
    if not need:
        return None
    victims = standing.victims(winner, need, None, within_only=True)
    return Preemption(winner, victims) if victims else None


def _for_room(
    winner: Entry,
    standing: _Standing,
    free: Mapping[str, Mapping[str, int]],
    clusters: Collection[str],
) -> Preemption | None:
    """The fewest victims that make room for it on one of ``clusters`` (then the
    cluster's name); none (a Preemption without victims, on that cluster) when one has
    the room already (what is leaving frees it): it waits for that room, and takes it."""
    best: Preemption | None = None
    for cluster in sorted(c for c in free if c in clusters):
        need = _minus(winner.requests, free[cluster])
        if not need:
            return Preemption(winner, (), cluster)
        victims = standing.victims(winner, need, cluster)
        if victims and (best is None or len(victims) < len(best.victims)):
            best = Preemption(winner, victims, cluster)
    return best


def plan_preemptions(
    waiting: Sequence[tuple[Entry, Shortfall]],
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    *,
    free: Mapping[str, Mapping[str, int]],
    clusters_for: Callable[[Entry], Collection[str]] | None = None,
    admitted_now: Collection[str] = (),
    took_room: set[str] | None = None,
) -> list[Preemption]:
    """Whom to preempt for the ``waiting`` workloads (their queues' order, each with what
    it lacks), each victim taken once.

    ``free``: each cluster's room now (allocatable less what is requested and reserved),
    by resource; the room of entries already ``leaving`` is added to it (it is as good as
    free), and they are neither taken again nor counted in their queues' usage. A winner
    given victims counts as admitted on their cluster, taking its room, so the next
    winner does not count on the same room. ``clusters_for(winner)``: the clusters it
    could go to at all were they empty (its placement rules; default: every cluster in
    ``free``). ``admitted_now``: the keys this pass admitted (pending in ``entries``):
    they count in their queues' usage and are never taken. ``took_room`` gets the keys
    of the winners that found room already (they need no victims, and take it). A
    winner whose queue allows no preemption, or for whom no allowed set makes room, is
    left out. Each choice reads only the candidates it may take, in
    order, and stops once they cover the need."""
    del fleet
    room = {cluster: dict(values) for cluster, values in free.items()}
    current: list[Entry] = []
    for entry in entries:
        if entry.admitted and entry.leaving:
            if entry.cluster in room:
                add_into(room[entry.cluster], entry.requests)
            entry = dataclasses.replace(entry, admitted=False)
        current.append(entry)
    now_admitted = admitted_now if isinstance(admitted_now, set | frozenset) else set(admitted_now)
    standing = _Standing(queues, current, now_admitted)
    chosen: list[Preemption] = []
    for winner, shortfall in waiting:
        queue = queues.get(winner.queue)
        if queue is None or winner.admitted or winner.key in standing.taken:
            continue
        if winner.key in now_admitted:
            continue
        if queue.reclaim is Reclaim.NEVER and queue.within_queue is WithinQueue.NEVER:
            continue
        if shortfall is Shortfall.QUOTA:
            found = _for_quota(winner, standing)
        else:
            allowed = room.keys() if clusters_for is None else clusters_for(winner)
            found = _for_room(winner, standing, room, allowed)
        if found is None:
            continue
        if found.victims:
            chosen.append(found)
        elif took_room is not None:
            took_room.add(winner.key)
        # Its room (made, or there already) is its own now: the next winner counts
        # neither that room nor its queue's usage without it.
        standing.take(found.victims, winner)
        for victim in found.victims:
            if victim.cluster in room:
                add_into(room[victim.cluster], victim.requests)
        if found.cluster:
            add_into(room[found.cluster], {r: -v for r, v in winner.requests.items()})
    return chosen


def winner_mark(winner: Entry, victim: Entry) -> str:
    """What a victim is told of its winner (its mark ``jobrelay.dev/preempted-by`` and
    its Warning): the winner's key when it is of the victim's namespace; else its queue
    and a digest of its key only, so that no tenant learns another's workload names."""
    return winner.key if winner.namespace == victim.namespace else _unnamed(winner)


def _unnamed(winner: Entry) -> str:
    return _unnamed_of(winner.key, winner.queue)


@functools.lru_cache(maxsize=16384)  # read back for every pending entry in some passes
def _unnamed_of(key: str, queue: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"a workload of queue {queue} ({digest})"


def marks_of(winner: Entry) -> tuple[str, str]:
    """The marks a victim of ``winner`` may carry (:func:`winner_mark`'s two forms)."""
    return winner.key, _unnamed(winner)


def preempted_notice(victim: Entry, winner: Entry) -> Notice:
    """The Warning on a preempted workload: by whom (:func:`winner_mark`) and why."""
    if victim.queue != winner.queue:
        why = f"to reclaim {winner.queue}'s nominal quota"
    else:
        why = f"of higher priority ({winner.priority} over {victim.priority}) in {victim.queue}"
    by = winner_mark(winner, victim)
    return Notice(PREEMPTED, f"preempted by {by} {why}; it waits in {victim.queue} again")


def preempting_notice(winner: Entry, victims: Iterable[str]) -> Notice:
    """The Event on the winner: whom it displaces (``Kind namespace/name`` keys); those
    of other namespaces counted, never named."""
    own: list[str] = []
    others = 0
    for victim in victims:
        if victim.partition(" ")[2].startswith(f"{winner.namespace}/"):
            own.append(victim)
        else:
            others += 1
    names = sorted(own)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    if others:
        elsewhere = f"{others} workload{'s' if others > 1 else ''} of other namespaces"
        shown = f"{shown} and {elsewhere}" if shown else elsewhere
    return Notice(PREEMPTING, f"preempting {shown} to make room in {winner.queue}")


# At most this many waiting workloads of a queue, and of all queues, ask for preemption
# in one pass (the next ones in their queues' order; the rest ask in the passes after):
# one plan stays a few tens of milliseconds on 10,000 workloads (bench.admission_pass).
PREEMPTING_PER_QUEUE = 8
PREEMPTING_PER_PASS = 32

# What a waiting workload lacks, by the reason it waits.
_SHORTFALLS = {WAITING_FOR_ROOM: Shortfall.ROOM, QUEUE_QUOTA_EXCEEDED: Shortfall.QUOTA}


def preempting_candidates(
    specs: Mapping[str, QueueSpec], result: AdmissionPass
) -> list[tuple[Entry, Shortfall]]:
    """The waiting workloads of queues that may preempt, that lack room or quota (not
    those behind a StrictFIFO head, nor over their namespace's quota): each queue's first
    few in its order, the heads of all queues first."""
    allowed = {
        name for name, spec in specs.items()
        if spec.reclaim is not Reclaim.NEVER or spec.within_queue is not WithinQueue.NEVER
    }  # fmt: skip
    if not allowed:
        return []
    found = []
    for entry, holding, position in result.heads(PREEMPTING_PER_QUEUE):
        if entry.queue in allowed and holding is not None:
            shortfall = _SHORTFALLS.get(holding.reason)
            if shortfall is not None:
                found.append((position, entry.queue, entry, shortfall))
    found.sort(key=lambda item: (item[0], item[1]))
    return [(entry, shortfall) for _position, _queue, entry, shortfall in found][
        :PREEMPTING_PER_PASS
    ]
