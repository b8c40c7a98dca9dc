"""One admission pass: which pending workloads the queues take now, and why the rest wait.

Across queues, weighted dominant-resource-fair order: a queue whose next workload stays
within its nominal quota comes first (its guarantee), then the queue of the lowest
weighted dominant share with its next workload, recomputed after each admission (the
admitted workload's requests join its queue's usage), then the lowest share now, then the
queue's name. Within a queue: higher priority first, then older, then by key. A queue
never goes above its ceiling (nominal + borrowing limit) in any resource, nor a namespace
above its ResourceQuota when one is given. ``fits`` is the caller's placement check (it
takes the room of those admitted before in the same pass): a BestEffortFIFO queue passes
over a workload that fits nowhere now and goes on with the next; a StrictFIFO queue stops
at it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from jobrelay.admission.line_outcomes import Holds, LineOutcome, Positions
from jobrelay.admission.namespace_quota import NamespaceLimits, NamespaceUsage, quota_check
from jobrelay.admission.queue_model import Entry, Fleet, QueueHold, QueueingStrategy, QueueSpec
from jobrelay.admission.shares import add_into, dominant_share_with
from jobrelay.placement.units import Resources, format_units

__all__ = [
    "EXCEEDS_QUEUE_QUOTA",
    "NOMINAL_QUOTA_EXCEEDED",
    "QUEUED_BEHIND",
    "QUEUE_QUOTA_EXCEEDED",
    "WAITING_FOR_ROOM",
    "AdmissionPass",
    "Alike",
    "admission_pass",
    "beyond_nominal",
    "positions",
    "queue_order",
    "quota_excess",
]

# Why a pending workload waits (the reasons of its Held condition and Events).
QUEUE_QUOTA_EXCEEDED: Final = "QueueQuotaExceeded"  # its queue is at its ceiling now
EXCEEDS_QUEUE_QUOTA: Final = "ExceedsQueueQuota"  # it asks more than the ceiling, ever
QUEUED_BEHIND: Final = "QueuedBehind"  # a StrictFIFO queue waits for its head
# It may not be preempted (redispatch: never), so it never borrows: its queue's nominal
# quota is used up now.
NOMINAL_QUOTA_EXCEEDED: Final = "NominalQuotaExceeded"
WAITING_FOR_ROOM: Final = "WaitingForRoom"  # no cluster fits it now


@dataclass(frozen=True, slots=True)
class AdmissionPass:
    """What one pass decided. ``admitted``: keys in the order admitted; ``holding``:
    every other pending key of a known queue and why it waits; ``positions``: its place
    in its queue's order after this pass (1 = next). Both are found in ``lines`` when
    asked (:mod:`jobrelay.admission.line_outcomes`)."""

    admitted: tuple[str, ...] = ()
    holding: Mapping[str, QueueHold] = field(default_factory=dict)
    positions: Mapping[str, int] = field(default_factory=dict)
    # What holding and positions are read from (they compare and show what it says).
    lines: Mapping[str, LineOutcome] = field(default_factory=dict, compare=False, repr=False)

    def heads(self, count: int) -> Iterator[tuple[Entry, QueueHold | None, int]]:
        """Each queue's first ``count`` entries not admitted, with their holds and places."""
        for line in self.lines.values():
            yield from line.heads(count)


def queue_order(entry: Entry) -> tuple[int, str, str]:
    """Within a queue: higher priority first, then older, then by key."""
    return (-entry.priority, entry.created, entry.key)


def positions(entries: Iterable[Entry]) -> dict[str, int]:
    """Each pending (not admitted) entry's place in its queue's order, 1 = next: what
    `jobrelay get` shows and the held reason names. Admitted entries take no place."""
    by_queue: dict[str, list[Entry]] = {}
    for entry in entries:
        if not entry.admitted:
            by_queue.setdefault(entry.queue, []).append(entry)
    places: dict[str, int] = {}
    for waiting in by_queue.values():
        for place, entry in enumerate(sorted(waiting, key=queue_order), start=1):
            places[entry.key] = place
    return places


def quota_excess(queue: QueueSpec, usage: Resources, requests: Resources) -> QueueHold | None:
    """Why ``requests`` on top of ``usage`` would take ``queue`` above its ceiling (the
    first such resource by name), or None when it stays within."""
    if not queue.borrowing_limit:  # no ceiling anywhere
        return None
    for resource in sorted(requests):
        asked = requests[resource]
        ceiling = queue.ceiling(resource)
        if ceiling is None or asked <= 0:
            continue
        total = usage.get(resource, 0) + asked
        if total <= ceiling:
            continue
        nominal = format_units(resource, queue.nominal.get(resource, 0))
        borrowing = format_units(resource, queue.borrowing_limit.get(resource, 0))
        limits = f"(nominal {nominal}, borrowing limit {borrowing})"
        if asked > ceiling:
            return QueueHold(
                EXCEEDS_QUEUE_QUOTA,
                f"{queue.name}: asks {format_units(resource, asked)} {resource}, more than "
                f"the queue may ever use, {format_units(resource, ceiling)} {limits}: "
                f"ask less, or ask an admin to raise the queue's quota",
            )
        return QueueHold(
            QUEUE_QUOTA_EXCEEDED,
            f"{queue.name}: {format_units(resource, total)} of "
            f"{format_units(resource, ceiling)} {resource} {limits}",
        )
    return None


def beyond_nominal(queue: QueueSpec, usage: Resources, requests: Resources) -> QueueHold | None:
    """Why a workload that may not be preempted waits: ``requests`` on top of ``usage``
    would take ``queue`` above its nominal quota (it would borrow, and a borrower must be
    reclaimable); None when it stays within."""
    for resource in sorted(requests):
        asked = requests[resource]
        nominal = queue.nominal.get(resource, 0)
        if asked <= 0 or usage.get(resource, 0) + asked <= nominal:
            continue
        shown = format_units(resource, nominal)
        why = (
            f"{queue.name}: it asks to run at most once (jobrelay.dev/redispatch: never), so "
            f"it may not be preempted and runs only within its queue's nominal quota, never "
            f"on borrowed capacity: "
        )
        if asked > nominal:
            return QueueHold(
                NOMINAL_QUOTA_EXCEEDED,
                why + f"it asks {format_units(resource, asked)} {resource}, more than the "
                f"nominal {shown}: ask less, drop the annotation, or ask an admin for more",
            )
        total = format_units(resource, usage.get(resource, 0) + asked)
        return QueueHold(NOMINAL_QUOTA_EXCEEDED, why + f"{total} of nominal {shown} {resource}")
    return None


def _within_nominal(queue: QueueSpec, usage: Resources, requests: Resources) -> bool:
    """Whether ``requests`` stays within the queue's nominal quota of all it asks."""
    if not queue.nominal:
        return not any(asked > 0 for asked in requests.values())
    return all(
        usage.get(resource, 0) + asked <= queue.nominal.get(resource, 0)
        for resource, asked in requests.items()
        if asked > 0
    )


# Shares equal to this many decimals are a tie.
_DIGITS = 12


@dataclass(slots=True)
class _Line:
    """One queue during a pass: its pending entries in order and where it has got to."""

    queue: QueueSpec
    pending: list[Entry]
    usage: dict[str, int]
    next: int = 0
    # Its weighted dominant share now, rounded: changes only when it admits.
    share: float = 0.0
    waiting_for_room: QueueHold | None = None
    # Its last order and the requests of the head it was for: the same until it admits,
    # and heads alike (one template's) follow one another (the pass asks after each).
    ordered_for: Resources | None = None
    ordered: tuple[int, float, float, str] = (0, 0.0, 0.0, "")
    # What the pass decided of each pending entry (made once ``pending`` is final).
    outcome: LineOutcome = field(init=False)

    def no_room(self) -> QueueHold:
        """Why its entries that no cluster fits wait (one value for them all)."""
        if self.waiting_for_room is None:
            self.waiting_for_room = QueueHold(
                WAITING_FOR_ROOM,
                f"{self.queue.name}: no cluster has room for it now; it is admitted when "
                f"capacity frees and its queue's turn comes",
            )
        return self.waiting_for_room

    def take(self, entry: Entry, fleet: Fleet) -> None:
        """Adds an admitted entry to its usage."""
        add_into(self.usage, entry.requests)
        self.reshare(fleet)

    def reshare(self, fleet: Fleet) -> None:
        share = dominant_share_with(self.usage, {}, fleet) / self.queue.weight
        self.share = round(share, _DIGITS)
        self.ordered_for = None

    def order(self, fleet: Fleet) -> tuple[int, float, float, str]:
        """Its place among the queues: within nominal first, then the lowest weighted
        dominant share it would have with its next entry (Kueue's ordering: with whole
        workloads, the share before would let ties keep a heavy queue under its part),
        then the lowest it has now (so that queues tied on the first take turns), then
        its name. Shares are rounded so that float noise does not decide a tie."""
        requests = self.pending[self.next].requests
        last = self.ordered_for
        if last is not None and (requests is last or requests == last):
            return self.ordered
        guaranteed = 0 if _within_nominal(self.queue, self.usage, requests) else 1
        after = dominant_share_with(self.usage, requests, fleet) / self.queue.weight
        self.ordered_for = requests
        self.ordered = (guaranteed, round(after, _DIGITS), self.share, self.queue.name)
        return self.ordered


def _lines(
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    namespaces: Mapping[str, NamespaceUsage],
    ordered: Mapping[str, Sequence[Entry]] | None = None,
) -> dict[str, _Line]:
    """The queues that have pending entries, each with its usage, entries in order; the
    usage of the namespaces in ``namespaces`` counted in place (admitted entries of any
    queue, known or not). ``ordered``: each queue's pending entries already in
    :func:`queue_order` (those of ``entries`` are then not read again)."""
    lines = {name: _Line(queue, [], {}) for name, queue in queues.items()}
    for entry in entries:
        if not entry.admitted:
            if ordered is None:
                line = lines.get(entry.queue)
                if line is not None:
                    line.pending.append(entry)
            continue
        if entry.namespace in namespaces:
            namespaces[entry.namespace].add(entry)
        line = lines.get(entry.queue)
        if line is not None:
            add_into(line.usage, entry.requests)
    for name, line in lines.items():
        if ordered is None:
            line.pending.sort(key=queue_order)
        else:
            line.pending = list(ordered.get(name, ()))  # a copy: the caller keeps its own
        line.outcome = LineOutcome(line.pending)
        if line.queue.weight > 0:
            line.reshare(fleet)
    return {name: line for name, line in lines.items() if line.pending}


# Whether the entries right behind a held one, of its likeness and asking the quotas the
# same, may be held with it unjudged (see admission_pass).
Alike = Callable[[Entry], bool]


@dataclass(slots=True)
class _Pass:
    """What a pass has decided so far, and what it checks each entry against."""

    fits: Callable[[Entry], bool]
    fleet: Fleet
    limits: Mapping[str, NamespaceLimits]
    namespaces: dict[str, NamespaceUsage]
    alike: Alike | None = None
    admitted: list[str] = field(default_factory=list)

    def why_not(self, line: _Line, entry: Entry) -> QueueHold | None:
        """Why ``entry`` may not be admitted now: its queue's ceiling, then its
        namespace's ResourceQuota (None: it may, if a cluster fits it)."""
        why = quota_excess(line.queue, line.usage, entry.requests)
        if why is None and not entry.preemptible:
            why = beyond_nominal(line.queue, line.usage, entry.requests)
        if why is None and entry.namespace in self.limits:
            why = quota_check(self.limits[entry.namespace], self.namespaces[entry.namespace], entry)
        return why

    def admit(self, line: _Line, entry: Entry) -> None:
        self.admitted.append(entry.key)
        line.take(entry, self.fleet)
        if entry.namespace in self.namespaces:
            self.namespaces[entry.namespace].add(entry)


def _serve_one(line: _Line, done: _Pass) -> bool:
    """Judges the queue's next entry; whether the queue has more to judge in this pass."""
    name = line.queue.name
    at = line.next
    entry = line.pending[at]
    line.next += 1
    why = done.why_not(line, entry)
    if why is None and done.fits(entry):
        done.admit(line, entry)
        line.outcome.admit(at)
    else:
        if why is None:
            why = line.no_room()
        line.outcome.hold(at, at + 1, why)
        if line.queue.strategy is QueueingStrategy.STRICT_FIFO:
            behind = QueueHold(
                QUEUED_BEHIND,
                f"{name}: behind {entry.key} (the queue is StrictFIFO: its head goes first)",
            )
            line.outcome.hold(line.next, len(line.pending), behind)
            return False
        if entry.likeness and done.alike is not None and done.alike(entry):
            _hold_alike(line, entry, why)
    return line.next < len(line.pending)


def _hold_alike(line: _Line, held: Entry, why: QueueHold) -> None:
    """Holds the entries right after ``held`` in its queue that would be judged as it was,
    for the same reason, without judging each: nothing was admitted in between, so its
    queue's usage and its namespace's are as they were, and room only shrinks during a
    pass. (Ninety-nine thousand held workloads are mostly long runs of one template.)"""
    pending, at = line.pending, line.next
    end = len(pending)
    likeness, namespace, preemptible = held.likeness, held.namespace, held.preemptible
    requests, limits = held.requests, held.limits
    while at < end:
        then = pending[at]
        if not (  # what fits reads of it, then what the quotas read (inline: a hot loop)
            then.likeness == likeness  # interned: a template's entries share one object
            and then.namespace == namespace
            and then.preemptible == preemptible
            and (then.requests is requests or then.requests == requests)
            and (then.limits is limits or then.limits == limits)
        ):
            break
        at += 1
    line.outcome.hold(line.next, at, why)
    line.next = at


def _serve_first(lines: dict[str, _Line], first: Collection[str], done: _Pass) -> dict[str, _Line]:
    """Admits the entries of ``first`` that may be admitted and fit, in their queues'
    order; the lines left with pending entries."""
    for line in lines.values():
        if line.queue.weight <= 0:
            continue
        taken = []
        for entry in line.pending:
            if entry.key in first and done.why_not(line, entry) is None and done.fits(entry):
                done.admit(line, entry)
                taken.append(entry)
        if taken:
            line.pending = [e for e in line.pending if e not in taken]
            line.outcome = LineOutcome(line.pending)
    return {name: line for name, line in lines.items() if line.pending}


def admission_pass(
    queues: Mapping[str, QueueSpec],
    entries: Iterable[Entry],
    fleet: Fleet,
    *,
    fits: Callable[[Entry], bool],
    namespace_quotas: Mapping[str, NamespaceLimits] | None = None,
    first: Collection[str] = (),
    alike: Alike | None = None,
    ordered: Mapping[str, Sequence[Entry]] | None = None,
    queue_of: Mapping[str, str] | None = None,
) -> AdmissionPass:
    """Which of the pending ``entries`` to admit now, in order, and why the others wait.

    Admitted entries count as their queues' usage; entries of a queue not in ``queues``
    are left out (the caller holds them: QueueNotFound). A queue of weight <= 0 admits
    nothing (the CRD refuses one). ``namespace_quotas``: the manager ResourceQuotas'
    hard values by namespace; every admitted entry of such a namespace counts against
    them (whatever its queue: pass the namespace's unqueued admitted workloads too, under
    a queue name that is no queue), and so does each one this pass admits. ``first``:
    keys served before the fair order, each if its quotas allow and it fits (winners
    whose victims are leaving or have left: the room they made is theirs).

    ``alike(held)``: once ``held``, an entry of a BestEffortFIFO queue with a likeness,
    waits, whether the entries right behind it that share its likeness and ask the quotas
    the same may wait for the same reason without being judged. That holds when ``fits``
    answers alike for entries of one namespace and likeness while room only shrinks
    (placement does: see ``Entry.likeness``); ``alike`` says no where ``fits`` tells each
    entry something of its own. The same outcome, without asking placement ninety-nine
    thousand times.

    ``ordered``: each queue's pending entries among ``entries``, already in their queue's
    order (:func:`queue_order`), as a caller that keeps them between passes has them.
    ``queue_of``: each pending entry's queue by entry key, where the caller has it (the
    holds and positions are looked up through it; default: made from the queues' entries)."""
    limits = namespace_quotas or {}
    done = _Pass(
        fits, fleet, limits, {namespace: NamespaceUsage() for namespace in limits}, alike=alike
    )
    lines = _lines(queues, entries, fleet, done.namespaces, ordered)
    if first:
        lines = _serve_first(lines, first, done)
    heap = [(line.order(fleet), name) for name, line in lines.items() if line.queue.weight > 0]
    heapq.heapify(heap)
    for name, line in lines.items():
        if line.queue.weight <= 0:
            weightless = QueueHold(
                QUEUE_QUOTA_EXCEEDED, f"{name}: the queue's weight is not above 0"
            )
            line.outcome.hold(0, len(line.pending), weightless)
    while heap:
        _, name = heapq.heappop(heap)
        line = lines[name]
        # Serve this queue while it stays first (saves a heap round per entry).
        while _serve_one(line, done):
            order = (line.order(fleet), name)
            if heap and heap[0] < order:
                heapq.heappush(heap, order)
                break
    outcomes = {name: line.outcome for name, line in lines.items()}
    if queue_of is None:
        queue_of = {entry.key: name for name, line in lines.items() for entry in line.pending}
    return AdmissionPass(
        tuple(done.admitted), Holds(outcomes, queue_of), Positions(outcomes, queue_of), outcomes
    )
