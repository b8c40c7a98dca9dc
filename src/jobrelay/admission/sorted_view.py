"""A pass's workloads sorted out: each one's entry, in its queue or not, pending or
admitted; and the same sort kept for the next pass, which re-sorts only what changed.

A hundred thousand held workloads mostly stay as they were from one pass to the next (a
pass runs when capacity, queues or quotas change, at most once a second), so sorting
them all again each time is most of a pass's cost. The sort is a pure function of each
workload's judgement (its read and whether it is admitted: :data:`Judged`) and of what
is shared by all (the queues, the namespaces' labels, who is being preempted): while
those shared inputs are equal, a workload judged as before (the same read object, the
same admitted) sorts as before, and only the others are taken out and sorted again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from jobrelay.admission.fair_order import queue_order
from jobrelay.admission.priority_classes import priority_class_refusal
from jobrelay.admission.queue_choice import QueueChoice, Queued, QueueIndex, queue_for, refusal
from jobrelay.admission.queue_model import Entry, Preempt, QueueSpec
from jobrelay.admission.workload_reads import WorkloadRead
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.units import Resources
from jobrelay.placement.workload import Workload

__all__ = ["Judged", "SortedView", "Sorting", "sort_view"]

# What the view reads of each workload: its key, its read, and whether it is admitted.
Judged = tuple[WorkloadKey, WorkloadRead, bool]


@dataclass(slots=True)
class SortedView:
    """The view's workloads sorted out: queued entries, the pending ones among them, the
    unqueued pending ones, and what each namespace has admitted. Keyed so that one
    workload's part can be taken out again."""

    # The queued entries (of any queue named, known or not), by workload.
    entries: dict[WorkloadKey, Entry] = field(default_factory=dict)
    # The pending queued ones, by entry key.
    pending: dict[str, tuple[WorkloadKey, Workload]] = field(default_factory=dict)
    unqueued: dict[WorkloadKey, tuple[Entry, Workload]] = field(default_factory=dict)
    # The admitted entries (queued or not), by namespace then workload.
    by_namespace: dict[str, dict[WorkloadKey, Entry]] = field(default_factory=dict)
    # Every workload's entry as sorted (those refused or unreadable have none).
    built: dict[WorkloadKey, Entry] = field(default_factory=dict)
    # The queued entries leaving (being preempted), by whom ("": not known any more).
    leaving_for: dict[str, str] = field(default_factory=dict)
    # The pending queued ones preempted (back in their queues): their marks (winners).
    requeued_by: dict[str, str] = field(default_factory=dict)
    # Each queued entry's queue, by entry key.
    queue_of: dict[str, str] = field(default_factory=dict)
    # The pending queued entries by queue, then entry key; the queues whose entries were
    # added or taken out since this view was made or copied (their order is redone).
    pending_by_queue: dict[str, dict[str, Entry]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)

    def copy(self) -> SortedView:
        """One to change, this one left as it is (the last plan still reads it). A
        queue's pending entries are copied when first changed (most queues are not)."""
        return SortedView(
            dict(self.entries), dict(self.pending), dict(self.unqueued),
            {namespace: dict(admitted) for namespace, admitted in self.by_namespace.items()},
            dict(self.built), dict(self.leaving_for), dict(self.requeued_by),
            dict(self.queue_of), dict(self.pending_by_queue),
        )  # fmt: skip

    def queue_pending(self, queue: str) -> dict[str, Entry]:
        """``queue``'s pending entries, this view's own to change."""
        if queue not in self.touched:
            self.touched.add(queue)
            self.pending_by_queue[queue] = dict(self.pending_by_queue.get(queue, {}))
        return self.pending_by_queue[queue]

    def take_out(self, key: WorkloadKey) -> None:
        """Forgets ``key``'s part of the sort."""
        entry = self.built.pop(key, None)
        if entry is None:
            return
        self.entries.pop(key, None)
        self.unqueued.pop(key, None)
        self.pending.pop(entry.key, None)
        self.leaving_for.pop(entry.key, None)
        self.requeued_by.pop(entry.key, None)
        self.queue_of.pop(entry.key, None)
        if entry.queue and not entry.admitted:
            self.queue_pending(entry.queue).pop(entry.key, None)
        admitted = self.by_namespace.get(entry.namespace)
        if admitted is not None and admitted.pop(key, None) is not None and not admitted:
            del self.by_namespace[entry.namespace]


@dataclass(frozen=True, slots=True)
class _Shared:
    """What every workload's sort reads besides its own judgement: while it is equal, a
    workload judged as before sorts as before."""

    specs: Mapping[str, QueueSpec]
    namespace_labels: Mapping[str, Mapping[str, str]]
    preempting: Mapping[WorkloadKey, Preempt]


@dataclass(frozen=True, slots=True)
class Sorting:
    """A pass's sort, kept for the next (see the module doc). Never changed: the next
    pass changes a copy."""

    shared: _Shared
    judged: Mapping[WorkloadKey, Judged]
    view: SortedView
    # Each queue's pending entries in its order (fair_order.queue_order), and counted
    # by requests (one template's entries share one requests object).
    ordered: Mapping[str, list[Entry]]
    pending_groups: Mapping[str, tuple[tuple[Resources, int], ...]]


def _with(before: Entry | None, read: WorkloadRead, queue: str, admitted: bool,
          leaving: bool) -> Entry:  # fmt: skip
    """``read``'s entry in ``queue``, as the pass sees it: the one the pass before built
    when nothing of it changed (no copy)."""
    entry = read.entry
    assert entry is not None
    preemptible = not read.at_most_once
    if (  # field by field, no tuples made: a hundred thousand a pass
        before is not None
        and before.admitted == admitted and before.leaving == leaving
        and before.queue == queue and before.cluster == read.cluster
        and before.preemptible == preemptible and before.priority == entry.priority
        and before.created == entry.created and before.likeness == entry.likeness
        and (before.requests is entry.requests or before.requests == entry.requests)
        and (before.limits is entry.limits or before.limits == entry.limits)
    ):  # fmt: skip
        return before
    return Entry(
        key=entry.key, queue=queue, namespace=entry.namespace, priority=entry.priority,
        created=entry.created, requests=entry.requests, limits=entry.limits, admitted=admitted,
        cluster=read.cluster, preemptible=preemptible, leaving=leaving,
        likeness=entry.likeness,
    )  # fmt: skip


def _sort_into(
    found: SortedView,
    workloads: Iterable[Judged],
    shared: _Shared,
    built: Mapping[WorkloadKey, Entry],
) -> None:
    """Sorts ``workloads`` into ``found`` (none of them in it yet)."""
    specs, labels_of, preempting = shared.specs, shared.namespace_labels, shared.preempting
    # Namespaces' labels do not change during a pass: each (label, namespace) is judged
    # once, and which queues select a namespace is found once per namespace.
    choices: dict[tuple[str | None, str], QueueChoice] = {}
    owns: dict[str, tuple[str, ...]] = {}
    index: QueueIndex | None = None
    for key, read, admitted in workloads:
        entry = read.entry
        if entry is None or read.workload is None:
            continue  # templates placement cannot read: it says why
        namespace = entry.namespace
        choice = choices.get((read.named, namespace))
        if choice is None:
            if index is None:
                index = QueueIndex.of(specs)
            labels = labels_of.get(namespace, {})
            own = owns.get(namespace)
            if own is None:
                own = owns[namespace] = index.own(labels)
            choice = queue_for(read.named, namespace, labels, specs, own=own, index=index)
            choices[(read.named, namespace)] = choice
        queue = choice.queue if isinstance(choice, Queued) else ""
        if (
            not admitted
            and read.priority_classes
            and priority_class_refusal(read.priority_classes, specs.get(queue))
        ):
            continue  # refused (its reconcile says why): it neither waits nor preempts
        leaving = admitted and (bool(read.preempted_by) or key in preempting)
        entry = _with(built.get(key), read, queue, admitted, leaving)  # positional: hot
        found.built[key] = entry
        if admitted:
            admitted_here = found.by_namespace.get(namespace)
            if admitted_here is None:
                admitted_here = found.by_namespace[namespace] = {}
            admitted_here[key] = entry
        if queue:
            found.entries[key] = entry
            found.queue_of[entry.key] = queue
            if not admitted:
                found.pending[entry.key] = (key, read.workload)
                found.queue_pending(queue)[entry.key] = entry
                if read.preempted_by:
                    found.requeued_by[entry.key] = read.preempted_by
            elif leaving:
                earlier = preempting.get(key)
                found.leaving_for[entry.key] = read.preempted_by or (earlier.by if earlier else "")
        elif not admitted and refusal(choice) is None:
            found.unqueued[key] = (entry, read.workload)


def sort_view(
    workloads: Sequence[Judged],
    specs: Mapping[str, QueueSpec],
    namespace_labels: Mapping[str, Mapping[str, str]],
    preempting: Mapping[WorkloadKey, Preempt],
    *,
    built: Mapping[WorkloadKey, Entry],
    before: Sorting | None,
) -> Sorting:
    """``workloads`` sorted out; from ``before`` (the last pass's sort) when what all
    share is as it was, re-sorting only the workloads judged otherwise, new or gone.
    ``built``: each workload's entry as the last plan built it (reused when unchanged)."""
    shared = _Shared(dict(specs), dict(namespace_labels), dict(preempting))
    if before is None or before.shared != shared:
        found = SortedView()
        _sort_into(found, workloads, shared, built)
        judged_now = {judged[0]: judged for judged in workloads}
        return Sorting(shared, judged_now, found, *_ordered(found, {}, {}))
    earlier = before.judged
    changed: list[Judged] = []
    same = 0
    for judged in workloads:
        was = earlier.get(judged[0])
        # Bools are singletons and reads are never changed in place: identity is enough.
        if was is not None and was[1] is judged[1] and was[2] is judged[2]:
            same += 1
        else:
            changed.append(judged)
    if not changed and same == len(earlier):
        return before
    found = before.view.copy()
    judged_now = dict(earlier)
    gone_count = len(earlier) - same - sum(1 for judged in changed if judged[0] in earlier)
    if gone_count:
        current = {judged[0] for judged in workloads}
        for key in [key for key in earlier if key not in current]:
            found.take_out(key)
            del judged_now[key]
    for judged in changed:
        found.take_out(judged[0])
        judged_now[judged[0]] = judged
    _sort_into(found, changed, shared, before.view.built)
    ordered, groups = _ordered(found, before.ordered, before.pending_groups)
    return Sorting(shared, judged_now, found, ordered, groups)


def _ordered(
    found: SortedView,
    before: Mapping[str, list[Entry]],
    groups_before: Mapping[str, tuple[tuple[Resources, int], ...]],
) -> tuple[dict[str, list[Entry]], dict[str, tuple[tuple[Resources, int], ...]]]:
    """Each queue's pending entries in its order, and counted by requests: those of the
    queues ``found`` left untouched as they were before, the others done again."""
    ordered, groups = dict(before), dict(groups_before)
    for queue in found.touched:
        pending = found.pending_by_queue.get(queue)
        if pending:
            ordered[queue] = sorted(pending.values(), key=queue_order)
            groups[queue] = _counted(pending.values())
        else:
            ordered.pop(queue, None)
            groups.pop(queue, None)
            found.pending_by_queue.pop(queue, None)
    found.touched.clear()  # the next pass's copy starts untouched
    return ordered, groups


def _counted(entries: Iterable[Entry]) -> tuple[tuple[Resources, int], ...]:
    """``entries`` counted by requests object (equal requests of other objects apart)."""
    counts: dict[int, tuple[Resources, int]] = {}
    for entry in entries:
        requests = entry.requests
        had = counts.get(id(requests))  # the entries live through the call: ids stay theirs
        counts[id(requests)] = (requests, 1 if had is None else had[1] + 1)
    return tuple(counts.values())
