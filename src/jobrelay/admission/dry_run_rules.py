"""`jobrelay simulate`'s verdict on one workload not submitted: the queue it would join,
whether it would be admitted now, the worker it would go to or why each refuses, and
whether it can never run. Pure: the same rules as the controller's admission pass and
placement (:mod:`jobrelay.admission.queue_choice`, :mod:`jobrelay.admission.fair_order`'s
quota, :mod:`jobrelay.admission.namespace_quota`, :func:`jobrelay.placement.decision.place`).

What it cannot tell, it does not claim: the clusters are judged from their capacity
figures as the caller built them, the queue's turn among others waiting is the
estimate's (:mod:`jobrelay.admission.start_estimate`), not this verdict's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from jobrelay.admission.fair_order import EXCEEDS_QUEUE_QUOTA, quota_excess
from jobrelay.admission.namespace_quota import (
    EXCEEDS_NAMESPACE_QUOTA,
    NamespaceLimits,
    quota_verdict,
)
from jobrelay.admission.queue_choice import Queued, queue_for, refusal
from jobrelay.admission.queue_model import Entry, QueueHold, QueueSpec
from jobrelay.placement.decision import place
from jobrelay.placement.model import Cluster
from jobrelay.placement.workload import Choice, Workload

__all__ = ["NEVER_FITS", "DryRunVerdict", "WorkerRefusal", "judge_dry_run"]

NEVER_FITS: Final = "NeverFits"


@dataclass(frozen=True, slots=True)
class WorkerRefusal:
    """A worker that would not take the workload, and why (placement's words)."""

    worker: str
    reason: str


@dataclass(frozen=True, slots=True)
class DryRunVerdict:
    """What would become of the workload were it submitted now."""

    queue: str  # the RelayQueue it would join ("": none)
    admitted_now: bool
    worker: str | None  # where it would go now (None: nowhere now)
    refusals: tuple[WorkerRefusal, ...] = ()
    # Why it would wait now, or why it can never run (``never``), as a held workload's
    # reason and message say it.
    hold: QueueHold | None = None
    never: bool = False


def judge_dry_run(
    entry: Entry,
    workload: Workload,
    *,
    named: str | None,
    namespace_labels: Mapping[str, str],
    specs: Mapping[str, QueueSpec],
    queue_usage: Mapping[str, Mapping[str, int]],
    quota: NamespaceLimits | None,
    namespace_admitted: Sequence[Entry],
    clusters: Sequence[Cluster],
    policy: Choice | None = None,
) -> DryRunVerdict:
    """The verdict on ``entry`` (its queue label ``named``; see the module doc)."""
    choice = queue_for(named, entry.namespace, namespace_labels, specs)
    refused = refusal(choice)
    if refused is not None:  # a queue that does not exist, or does not take the namespace
        return DryRunVerdict("", False, None, hold=refused, never=True)
    queue = choice.queue if isinstance(choice, Queued) else ""
    hold: QueueHold | None = None
    spec = specs.get(queue)
    if spec is not None:
        hold = quota_excess(spec, queue_usage.get(queue, {}), entry.requests)
        if hold is not None and hold.reason == EXCEEDS_QUEUE_QUOTA:
            return DryRunVerdict(queue, False, None, hold=hold, never=True)
    if quota is not None:
        verdict = quota_verdict(quota, namespace_admitted, entry)
        if verdict is not None and verdict.reason == EXCEEDS_NAMESPACE_QUOTA:
            return DryRunVerdict(queue, False, None, hold=verdict, never=True)
        hold = hold or verdict
    decision = place(clusters, workload, policy)
    refusals = tuple(WorkerRefusal(p.cluster, str(p.reason)) for p in decision.passed_over)
    if decision.never_fits:
        never = QueueHold(NEVER_FITS, "no worker it may go to could take it, even empty")
        return DryRunVerdict(queue, False, None, refusals, hold=never, never=True)
    if decision.cluster is None and hold is None:
        hold = QueueHold("NotPlaced", decision.explain())
    return DryRunVerdict(
        queue, hold is None and decision.cluster is not None, decision.cluster, refusals, hold
    )
