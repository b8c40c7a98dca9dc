"""Where a workload goes now (placement's filters and scores over the workers), or
why it waits unplaced; used by every step that places: a first placement, a move,
and a workload that must leave a worker holding what is not jobrelay's. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobrelay.controller.relay.leaving import Leaving
from jobrelay.controller.relay.mirror_standing import Standing, standing
from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    Log,
    Plan,
    RecordEvent,
    RequeueAfter,
    Terminal,
)
from jobrelay.controller.relay.snapshot import Snapshot, placement_cluster
from jobrelay.controller.relay.steps.facts import namespace
from jobrelay.controller.relay.steps.plan_parts import bounded, without_details
from jobrelay.controller.relay.steps.worker_failures import avoided_workers
from jobrelay.kinds.mirrors import is_ours
from jobrelay.placement.decision import Decision, place
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.placement.workload import Invalid, PodGroup, read_workload
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, NOT_PLACED_ANNOTATION

# Why a worker is left out of a placement that placement's filters do not know of.
NAMESAKE = "holds a namesake jobrelay did not create"
LEAVING = "the workload is leaving it"
# The name of placement's fit filter (placement/filters/fit.py), the last one.
FIT_FILTER = "fit"
FORGED = "holds a mirror of this workload that jobrelay did not create"


@dataclass(frozen=True, slots=True)
class PlacedOn:
    cluster: str
    # Its pods, reserved on that cluster until the worker has made them.
    demand: tuple[PodGroup, ...]


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """No cluster can take the workload now: the explanation, and a signature of it
    that stays the same while the reasons do (numbers and details left out)."""

    explanation: str
    signature: str
    never_fits: bool = False
    # Only because some cluster's capacity is not known yet (the controller is starting).
    unknown: bool = False
    # The workers passed over only because it does not fit their nodes now (fit is the
    # last filter): where capacity an autoscaled worker adds could take it.
    misfits: tuple[str, ...] = ()

    @classmethod
    def of(cls, decision: Decision) -> Unplaceable:
        signature = ";".join(
            f"{p.cluster}:{p.by}:{without_details(p.reason)}" for p in decision.passed_over
        )
        # What a controller that is starting does not know yet: a moment's wait.
        unknown = any(isinstance(p.reason, NotKnownYet) for p in decision.passed_over)
        return cls(
            decision.explain(),
            ("NeverFits|" if decision.never_fits else "NotPlaced|") + signature,
            decision.never_fits,
            unknown,
            tuple(p.cluster for p in decision.passed_over if p.by == FIT_FILTER),
        )


def foreign_holders(s: Snapshot) -> dict[str, str]:
    """The workers a fresh read showed holding a namesake jobrelay did not create, and
    those holding a mirror of this workload jobrelay did not create (never placed there)."""
    holders = {
        w.name: NAMESAKE
        for w in s.workers
        if w.read_done
        and w.read is not None
        and not is_ours(w.read, s.settings.controller_name, s.settings.origin)
    }
    obj = s.obj
    for w in s.workers:
        seen = w.seen
        if (
            obj is not None
            and seen is not None
            and w.name not in holders
            and standing(s, obj, w.name, seen) is Standing.FOREIGN
        ):
            holders[w.name] = FORGED
    return holders


def excluded_workers(s: Snapshot) -> dict[str, str]:
    """The workers placement passes over for this workload, and why: those holding
    what jobrelay did not create, and those it moved away from after a worker-side
    failure a short while ago (worker_failures.py)."""
    return {**avoided_workers(s), **foreign_holders(s)}


def placement(
    s: Snapshot, obj: JsonObj, excluded: Mapping[str, str], actions: list[Action]
) -> PlacedOn | Unplaceable | Plan:
    """Where the workload goes now (filter, then score), or why it cannot go anywhere.

    A workload whose own placement annotations cannot be read is the user's to fix
    (Terminal, until it changes); a namespace policy that cannot be read holds it.
    """
    workload = read_workload(s.kind, obj)
    if isinstance(workload, Invalid):
        message = f"cannot place this {s.kind.ref.kind}: {workload}; fix it and jobrelay places it"
        return Plan(tuple(actions), Terminal(workload.reason, message))
    if isinstance(s.policy, Invalid):
        return Unplaceable(
            f"the placement policy of namespace {namespace(obj)} cannot be read "
            f"({s.policy}); a cluster admin must fix the namespace's annotations",
            "policy-invalid",
        )
    clusters = [placement_cluster(w) for w in s.workers]
    decision = place(clusters, workload, s.policy, excluded=excluded)
    if decision.cluster is None:
        return Unplaceable.of(decision)
    return PlacedOn(decision.cluster, workload.groups)


def not_placed(
    s: Snapshot,
    why: Unplaceable,
    actions: list[Action],
    *,
    leaving: Leaving | None = None,
) -> Plan:
    """The workload waits on the manager, unplaced: no mirror anywhere.

    The user is told why (a Warning Event, and the annotation jobrelay.dev/not-placed
    on the object) when the reason changes, not on every retry; the reconciler
    brings held workloads back as soon as a cluster's capacity changes.
    """
    kind = s.kind.ref.kind
    prefix = f"{leaving.why}, and " if leaving is not None else ""
    if why.never_fits:
        reason = "NeverFits"
        message = (
            f"{prefix}no worker cluster this {kind} may use could run it even if it were "
            f"empty: {why.explanation}. It waits until such a cluster is registered; "
            f"change its requests or its {CLUSTER_ANNOTATION}s annotations to run it"
        )
    else:
        reason = "NotPlaced"
        message = (
            f"{prefix}no worker cluster can take this {kind} now: {why.explanation}. "
            f"It waits on the management cluster and is placed as soon as one can"
        )
    if why.unknown and not why.never_fits:
        # Capacities are being read (a start-up): their arrival brings it back; no
        # warning for what is only a moment's wait.
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry), held=s.held,
                    leaving=leaving)  # fmt: skip
    if why.signature != s.held:
        # The annotation first: the Event is written in the background, and whoever sees
        # it should find the object saying the same.
        actions.append(Annotate({NOT_PLACED_ANNOTATION: bounded(f"{reason}: {why.explanation}")}))
        actions.append(RecordEvent("Warning", reason, message))
        actions.append(Log("info", message))
    return Plan(
        tuple(actions),
        RequeueAfter(s.settings.unplaceable_retry),
        held=why.signature,
        leaving=leaving,
    )
