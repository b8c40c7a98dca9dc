"""A reconcile's verdict from the last admission plan, pure: may this workload be placed now?

Asked for a workload not placed yet (not finished, not suspended): its queue must exist
and take its namespace, the last plan must have admitted it (a queued one), and its
namespace's quotas must allow it beside those admitted and those being placed. A workload
the last plan has not judged waits for the next pass (:data:`UNJUDGED`: held, told
nothing; the caller wakes the pass). Nothing is changed: the caller marks a workload
"being placed" when its reconcile decides to place it.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobrelay.admission.namespace_quota import NamespaceLimits, quota_verdict
from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.queue_choice import QueueChoice, Queued, refusal
from jobrelay.admission.queue_model import Entry, QueueHold
from jobrelay.admission.workload_reads import WorkloadRead
from jobrelay.kinds.base import WorkloadKey

__all__ = ["UNJUDGED", "bound", "queue_verdict"]

# Not judged yet: the next admission pass (a moment) says.
UNJUDGED = QueueHold("", "", settled=False)


def bound(choice: QueueChoice, limits: NamespaceLimits | None) -> bool:
    """Whether admission decides the workload's first placement at all: it is queued, or
    its namespace has a ResourceQuota (else it is placed as it comes)."""
    return isinstance(choice, Queued) or limits is not None


def queue_verdict(
    key: WorkloadKey,
    read: WorkloadRead,
    choice: QueueChoice,
    *,
    last: AdmissionPlan | None,
    limits: NamespaceLimits | None,
    admitting: Mapping[WorkloadKey, Entry],
) -> QueueHold | None:
    """Why ``key`` may not be placed now (None: it may). ``choice``: its queue as the
    queues and its namespace's labels now say; ``limits``: its namespace's quotas;
    ``admitting``: the workloads being placed (told to place, their placement not
    in the caches yet), which count as admitted."""
    entry = read.entry
    if entry is None:
        return None  # templates placement cannot read: it says why
    refused = refusal(choice)
    if refused is not None:
        return refused
    if key in admitting or not bound(choice, limits):
        return None  # admitted already (its placement is on its way), or no bounds
    queued = isinstance(choice, Queued)
    if last is None or (
        queued and entry.key not in last.admitted_entries and not last.waits(entry.key)
    ):
        return UNJUDGED
    if queued and entry.key not in last.admitted_entries:
        return last.hold(entry.key)
    if limits is not None:
        counted = [e for e in last.by_namespace.get(key.namespace, []) if e.key != entry.key]
        seen = {e.key for e in counted}
        for other, being_placed in admitting.items():
            if other.namespace == key.namespace and being_placed.key not in seen:
                counted.append(being_placed)
        verdict = quota_verdict(limits, counted, entry)
        if verdict is not None:
            return verdict
    return None
