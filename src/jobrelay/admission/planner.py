"""The admission plan: one pure pass over every workload fleet-wide queues and the manager's
ResourceQuotas bound, ``plan(view) -> AdmissionPlan``.

The view is a frozen picture of what the pass needs: each workload as admission reads it
(:class:`~jobrelay.admission.workload_reads.WorkloadRead`) and whether it is admitted
(placed, a live mirror, or being placed), the queues, the namespaces' labels and
quotas, the fleet's capacity, who is already being preempted, and the caller's room
callbacks (placement's check, which takes the room of each workload it admits). The plan
says who is admitted, in order (the queued ones across queues in their fair order, then
the unqueued held ones oldest first, each only within its namespace's quotas), why each
other waits (with its position in its queue), whom to preempt for those that wait, and
the queues' figures. A reconcile reads its verdict from the last plan
(:mod:`jobrelay.admission.verdicts`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from jobrelay.admission.fair_order import AdmissionPass, admission_pass
from jobrelay.admission.namespace_quota import NamespaceLimits, quota_verdict
from jobrelay.admission.preemption_rules import (
    marks_of,
    plan_preemptions,
    preempted_notice,
    preempting_candidates,
    preempting_notice,
    winner_mark,
)
from jobrelay.admission.queue_model import Entry, Fleet, Preempt, QueueHold, QueueSpec
from jobrelay.admission.shares import QueueFigures, fairness_error, queue_figures
from jobrelay.admission.sorted_view import Judged, SortedView, Sorting, sort_view
from jobrelay.admission.workload_reads import WorkloadRead
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.workload import Workload

__all__ = [
    "AdmissionPlan",
    "AdmissionView",
    "Candidate",
    "ClustersFor",
    "Fits",
    "Judged",
    "PreemptionRoom",
    "plan",
]

# Placement's check: whether the workload fits somewhere now (taking that room if so).
# Room only shrinks during a pass, so once one workload does not fit, another of its
# namespace and fit likeness (``Entry.likeness``: its kind and ``Workload.likeness``) does
# not either: the pass holds such runs without asking again (placement.held.Room keeps
# the same rule).
Fits = Callable[[WorkloadKey, Workload], bool]
# For a waiting workload, the clusters it could go to at all; and the clusters' room after
# the pass, by resource, with that: asked only when a queue may preempt and someone waits.
ClustersFor = Callable[[WorkloadKey, Workload], Collection[str]]
PreemptionRoom = Callable[[], tuple[Mapping[str, Mapping[str, int]], ClustersFor]]


class Candidate(NamedTuple):
    """One workload the pass judges: as read, and whether it is admitted (placed, a live
    mirror, or being placed); pending otherwise. The view takes any tuple of the three
    (:data:`Judged`): the controller's pass makes plain ones, a hundred thousand a pass."""

    key: WorkloadKey
    read: WorkloadRead
    admitted: bool


@dataclass(frozen=True, slots=True)
class AdmissionView:
    """What one pass reads: see the module doc."""

    specs: Mapping[str, QueueSpec]
    namespace_labels: Mapping[str, Mapping[str, str]]
    # The manager's ResourceQuotas' hard values, by namespace (none: no quota there).
    quotas: Mapping[str, NamespaceLimits]
    fleet: Fleet
    # Every workload not finished, not going, and not suspended before its first placement.
    workloads: Sequence[Judged]
    # The workloads held unplaced, the longest-waiting first: the unqueued ones among them
    # are admitted after the queues' (the queued ones wait in their queues' order).
    held: Sequence[WorkloadKey]
    fits: Fits
    # The clusters' room for preemption (None: nobody is preempted in this pass).
    room: PreemptionRoom | None = None
    # Victims an earlier plan chose whose mark is not written yet: they are leaving.
    preempting: Mapping[WorkloadKey, Preempt] = field(default_factory=dict)
    # Each workload's entry as the last plan built it (reused while nothing of it changed:
    # most passes change nothing of most entries).
    built: Mapping[WorkloadKey, Entry] = field(default_factory=dict)
    # The marks of victims that left a moment ago (their winners): the room they freed
    # may not show free yet, so nobody is preempted in this pass (else the same room is
    # made twice).
    settling: frozenset[str] = frozenset()
    # The winners the last plan made or found room for (its ``nominated``).
    nominated: frozenset[str] = frozenset()
    # The last plan's sort of the workloads (its ``sorting``): only those judged
    # otherwise since are sorted again.
    sorted_before: Sorting | None = None


@dataclass(frozen=True, slots=True)
class AdmissionPlan:
    """What one pass decided (see the module doc). Entries are keyed by their entry key
    (``Kind namespace/name``); workloads by their WorkloadKey."""

    # The workloads to look at now, in order: those admitted from the queues (their fair
    # order), the victims, then the unqueued held ones admitted.
    wake: tuple[WorkloadKey, ...] = ()
    # The workloads admitted, in order (the queued ones, then the unqueued ones).
    admitted: tuple[WorkloadKey, ...] = ()
    # Whom to preempt now, by whom and why.
    victims: Mapping[WorkloadKey, Preempt] = field(default_factory=dict)
    # The pending queued ones it admitted, by entry key.
    admitted_entries: frozenset[str] = frozenset()
    # Why each pending queued one waits, as the fair order said it, with its position in
    # its queue and the queue (the position is said only when asked).
    holding: Mapping[str, QueueHold] = field(default_factory=dict)
    positions: Mapping[str, int] = field(default_factory=dict)
    queue_of: Mapping[str, str] = field(default_factory=dict)
    # Holds said as they are: a namespace's quota, or preempting others.
    told: Mapping[str, QueueHold] = field(default_factory=dict)
    # Every entry it counted admitted, by namespace: the quotas' counts.
    by_namespace: Mapping[str, Sequence[Entry]] = field(default_factory=dict)
    # Each workload's entry as this pass built it.
    entries: Mapping[WorkloadKey, Entry] = field(default_factory=dict)
    # Each queue's figures, and the fleet's fairness error (None: no queue).
    figures: Mapping[str, QueueFigures] = field(default_factory=dict)
    fairness_error: float | None = None
    # The winners (entry keys) it made room for, or found room for: served first by the
    # next pass, so that the room is theirs.
    nominated: frozenset[str] = frozenset()
    # Its sort of the workloads, for the next pass (AdmissionView.sorted_before).
    sorting: Sorting | None = None

    def waits(self, entry_key: str) -> bool:
        """Whether this pass judged the pending entry and held it."""
        return entry_key in self.told or entry_key in self.holding

    def hold(self, entry_key: str) -> QueueHold:
        """Why a held entry waits (:meth:`waits` must be true), its position said."""
        told = self.told.get(entry_key)
        if told is not None:
            return told
        holding = self.holding[entry_key]
        position = self.positions.get(entry_key)
        if not position:
            return holding
        where = f" (position {position} in queue {self.queue_of.get(entry_key, '')})"
        return QueueHold(holding.reason, holding.message + where)


def plan(view: AdmissionView) -> AdmissionPlan:
    """One admission pass over ``view`` (see the module doc)."""
    sorting = sort_view(view.workloads, view.specs, view.namespace_labels, view.preempting,
                        built=view.built, before=view.sorted_before)  # fmt: skip
    found = sorting.view
    entries = list(found.entries.values())
    told: dict[str, QueueHold] = {}
    by_namespace = {ns: list(admitted.values()) for ns, admitted in found.by_namespace.items()}

    def admit(entry: Entry, key: WorkloadKey, workload: Workload) -> bool:
        limits = view.quotas.get(entry.namespace)
        if limits is not None:
            counted = by_namespace.get(entry.namespace, [])
            verdict = quota_verdict(limits, counted, entry)
            if verdict is not None:
                told[entry.key] = verdict
                return False
        if not view.fits(key, workload):
            return False
        by_namespace.setdefault(entry.namespace, []).append(entry)
        return True

    queued: list[WorkloadKey] = []
    victims: dict[WorkloadKey, Preempt] = {}
    fair = AdmissionPass()
    queue_of: dict[str, str] = {}
    roomed: set[str] = set()  # the winners given room (victims, or room there already)
    if found.pending:
        pending = found.pending
        # Winners whose victims are leaving or have left come first: the room is theirs.
        marks = {*found.leaving_for.values(), *found.requeued_by.values()}
        nominated = {*_winners_by_mark(entries, marks).values(), *view.nominated}
        quotas = view.quotas
        fair = admission_pass(view.specs, entries, view.fleet,
                              fits=lambda e: admit(e, *pending[e.key]), first=nominated,
                              # a namespace quota's hold is told per workload (admit)
                              alike=lambda held: held.namespace not in quotas,
                              ordered=sorting.ordered, queue_of=found.queue_of)  # fmt: skip
        queued = [pending[key][0] for key in fair.admitted]
        queue_of = found.queue_of
        if view.room is not None:
            victims = _preempt(view, found, entries, fair, view.room, told, roomed)
    unqueued = []
    for held_key in view.held if found.unqueued else ():  # a fleet of queues has none
        waiting = found.unqueued.get(held_key)
        if waiting is not None and admit(waiting[0], held_key, waiting[1]):
            unqueued.append(held_key)
    # Restart-safe figures: the entries as the caches show them (admitted: placed).
    figures = (
        queue_figures(view.specs, _admitted(found), view.fleet, sorting.pending_groups)
        if view.specs
        else {}
    )
    return AdmissionPlan(
        wake=(*queued, *victims, *unqueued),
        admitted=(*queued, *unqueued),
        victims=victims,
        admitted_entries=frozenset(fair.admitted),
        holding=fair.holding,
        positions=fair.positions,
        queue_of=queue_of,
        told=told,
        by_namespace=by_namespace,
        entries=found.built,
        figures=figures,
        fairness_error=fairness_error(figures) if view.specs else None,
        nominated=frozenset(roomed),
        sorting=sorting,
    )


def _preempt(
    view: AdmissionView,
    found: SortedView,
    entries: list[Entry],
    fair: AdmissionPass,
    room: PreemptionRoom,
    told: dict[str, QueueHold],
    roomed: set[str],
) -> dict[WorkloadKey, Preempt]:
    """Whom to preempt now (told to the victims' reconciles); the winners, their own
    victims leaving, are held as ``Preempting``; ``roomed`` gets every winner given room."""
    # Victims' marks name their winners (or, across namespaces, only their queue and a
    # digest): each mark read back as its winner's key.
    winner_of = _winners_by_mark(entries, set(found.leaving_for.values()))
    by_winner: dict[str, list[str]] = {}
    for leaving, mark in found.leaving_for.items():
        by_winner.setdefault(winner_of.get(mark, mark), []).append(leaving)
    waiting = [] if view.settling else preempting_candidates(view.specs, fair)
    victims: dict[WorkloadKey, Preempt] = {}
    if waiting:
        # Planned for those that wait now, after those this pass admitted took room.
        free, could_take = room()

        def clusters_for(entry: Entry) -> Collection[str]:
            at, workload = found.pending[entry.key]
            return could_take(at, workload)

        keys: dict[str, WorkloadKey] = {}  # entry key -> workload key, once a victim is chosen
        for chosen in plan_preemptions(waiting, view.specs, entries, view.fleet, free=free,
                                       clusters_for=clusters_for,
                                       admitted_now=frozenset(fair.admitted),
                                       took_room=roomed):  # fmt: skip
            if chosen.victims and not keys:
                keys = _workload_keys(view.workloads)
            for victim in chosen.victims:
                notice = preempted_notice(victim, chosen.winner)
                by = winner_mark(chosen.winner, victim)
                victims[keys[victim.key]] = Preempt(by, notice.message)
                by_winner.setdefault(chosen.winner.key, []).append(victim.key)
            roomed.add(chosen.winner.key)
    named = {entry.key: entry for entry in _winners(entries, by_winner)}
    for winner, its_victims in by_winner.items():
        if winner in told or winner in fair.holding:
            notice = preempting_notice(named[winner], its_victims)
            told[winner] = QueueHold(notice.reason, notice.message, event_type="Normal")
    return victims


def _admitted(found: SortedView) -> list[Entry]:
    """The entries the caches show admitted (of any queue, or none)."""
    return [entry for admitted in found.by_namespace.values() for entry in admitted.values()]


def _workload_keys(workloads: Sequence[Judged]) -> dict[str, WorkloadKey]:
    """Each workload's key by its entry key."""
    return {read.entry.key: key for key, read, _ in workloads if read.entry is not None}


def _winners_by_mark(entries: Sequence[Entry], marks: set[str]) -> dict[str, str]:
    """Each of ``marks`` that names a pending entry, as that entry's key (a digest is
    worked out only when some mark is not a key itself)."""
    if not marks:
        return {}
    pending = [entry for entry in entries if not entry.admitted]
    found = {entry.key: entry.key for entry in pending if entry.key in marks}
    if len(found) < len(marks):
        for entry in pending:
            unnamed = marks_of(entry)[1]
            if unnamed in marks:
                found[unnamed] = entry.key
    return found


def _winners(entries: Sequence[Entry], by_winner: Mapping[str, object]) -> Iterator[Entry]:
    return (entry for entry in entries if entry.key in by_winner)
