"""What fleet-wide queueing reasons about: queues as their RelayQueues define them, the
workloads in them, the fleet's real capacity, and what it says of a workload (why it
waits, who preempts it). Pure values, read once at the edge.

Quantities are the integers of :mod:`jobrelay.placement.units` (CPU in milli-cores,
memory in bytes, devices whole). A workload's ``requests`` are all its pods at once
(``Workload.demand``: the same requests placement counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from jobrelay.placement.units import Resources

__all__ = [
    "Entry",
    "Fleet",
    "LabelSelector",
    "Preempt",
    "QueueHold",
    "QueueSpec",
    "QueueingStrategy",
    "Reclaim",
    "WithinQueue",
]


class QueueingStrategy(StrEnum):
    """Kueue's meanings: a head that fits nowhere now does not block the queue
    (BestEffortFIFO), or does (StrictFIFO)."""

    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class Reclaim(StrEnum):
    """``spec.preemption.reclaimWithinFleet``: whom a queue below its nominal quota may
    take capacity back from (queues above theirs)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class WithinQueue(StrEnum):
    """``spec.preemption.withinQueue``: whether a workload may displace lower-priority
    ones of its own queue."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector (``matchLabels`` and ``matchExpressions``); the empty
    selector matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    # (key, operator In|NotIn|Exists|DoesNotExist, values)
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def selects_all(self) -> bool:
        """The empty selector: every namespace (a catch-all queue's)."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        for key, operator, values in self.match_expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One RelayQueue's spec, read and checked (the CRD's validation refuses the rest)."""

    name: str
    weight: float = 1.0
    namespace_selector: LabelSelector = field(default_factory=LabelSelector)
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    # Guaranteed over the fleet; a resource not listed: 0.
    nominal: Resources = field(default_factory=dict)
    # How far above nominal it may go on unused capacity; a resource not listed: no limit.
    borrowing_limit: Resources = field(default_factory=dict)
    reclaim: Reclaim = Reclaim.NEVER
    within_queue: WithinQueue = WithinQueue.NEVER
    # ``spec.allowedPriorityClasses``: the PriorityClasses its workloads may name (None:
    # any the manager has, but a ``system-`` one).
    allowed_priority_classes: frozenset[str] | None = None

    def ceiling(self, resource: str) -> int | None:
        """The most this queue may use of ``resource`` (None: no limit)."""
        limit = self.borrowing_limit.get(resource)
        return None if limit is None else self.nominal.get(resource, 0) + limit


@dataclass(frozen=True, slots=True)
class Entry:
    """One workload in a queue: ``key`` is the work queue's (``Kind namespace/name``)."""

    key: str
    queue: str
    namespace: str
    # The pod template's priorityClassName's value on the manager (0 without one).
    priority: int
    # RFC 3339 creation time (sorts as time); ties broken by ``key``.
    created: str
    # All its pods at once (placement's ``Workload.demand``).
    requests: Resources
    # Their limits (a ResourceQuota's ``limits.*`` counts them; empty when none are set).
    limits: Resources = field(default_factory=dict)
    # Admitted: placed (it has a placement, or a live mirror) and not finished. Its
    # requests count as its queue's usage.
    admitted: bool = False
    # The worker it is placed on (admitted ones; "" when not known): preemption makes
    # room on one cluster.
    cluster: str = ""
    # Whether it may be preempted (a workload that asks to run at most once may not).
    preemptible: bool = True
    # Admitted and being preempted: its mirror is going. It still counts as its queue's
    # usage until it is gone, but is never chosen again, and its room is as good as free.
    leaving: bool = False
    # What placement reads of it, as one text (:func:`~jobrelay.admission.workload_reads.
    # fit_likeness`; "" when not said): placement fits entries of one likeness alike.
    # Interned, so entries of one template share it and compare it by identity.
    likeness: str = ""


@dataclass(frozen=True, slots=True)
class Fleet:
    """The fleet's real capacity: allocatable summed over the workers that take new work."""

    allocatable: Resources = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueHold:
    """Why fleet-wide queueing (or the namespace's ResourceQuota) keeps a workload from
    its first placement: the reason an Event carries and the message it says.

    ``settled`` False: not judged yet (a new workload waits for the next admission pass,
    a moment): held without a warning."""

    reason: str
    message: str
    settled: bool = True
    # Normal for what is no fault (it is preempting others to run), else Warning.
    event_type: Literal["Normal", "Warning"] = "Warning"


@dataclass(frozen=True, slots=True)
class Preempt:
    """An admission pass chose this running workload as a victim: by whom and why."""

    by: str  # the winner, ``Kind namespace/name``
    message: str
