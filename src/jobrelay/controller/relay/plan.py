"""What a decision asks for: a few actions, then one outcome for the work queue.

The outcomes the queue acts on (Done, RequeueAfter, Retry, Terminal) are the
project's own (jobrelay.vocabulary.outcome); :class:`ReadFresh` stays here: the
reconciler handles it within one reconcile, and the queue never sees it.

Actions run in order and the first that fails stops the rest (its error
decides the outcome instead), so a plan can say "place, then create": the
create never runs if the compare-and-swap that places lost a race.

An action says all of what it writes, and what the user is told if the write is
refused (refusal_wording.py): the executor carries it out and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jobrelay.controller.relay.leaving import Leaving
from jobrelay.controller.relay.refusal_wording import (
    DEPENDENCY_NOT_COPIED,
    MIRROR_REJECTED,
    MIRROR_UPDATE_REJECTED,
    STATUS_REFUSED,
    IfRefused,
)
from jobrelay.dependencies.template_references import Dependency
from jobrelay.placement.workload import PodGroup
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION, PREEMPTED_BY_ANNOTATION
from jobrelay.vocabulary.outcome import Done, QueueOutcome, RequeueAfter, Retry, Terminal

__all__ = [
    "ENDED_BY_PLACING",
    "Action",
    "Annotate",
    "CopyDependencies",
    "CreateMirror",
    "CreateProvisioning",
    "DeleteMirror",
    "DeleteProvisioning",
    "Done",
    "Log",
    "Outcome",
    "PatchMirror",
    "Place",
    "Plan",
    "ReadFresh",
    "RecordEvent",
    "RequeueAfter",
    "Retry",
    "Terminal",
    "WriteStatus",
]

EventType = Literal["Normal", "Warning"]

# What a placement ends, removed in the same write: the annotations that said why the
# workload waited (not placed; preempted, back in its queue).
ENDED_BY_PLACING = (NOT_PLACED_ANNOTATION, PREEMPTED_BY_ANNOTATION)


# -- actions --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Place:
    """Record ``cluster`` in the placement annotation and ``history`` (every placement,
    in order, ``cluster`` last) beside it; compare-and-swap on ``resource_version``."""

    cluster: str
    resource_version: str
    history: tuple[str, ...] = ()  # () when ``cluster`` is its first placement
    # The pods it will ask for there, reserved until the worker has made them, so a
    # burst of placements does not over-commit a cluster.
    demand: tuple[PodGroup, ...] = ()
    # Annotations removed in the same write (what the placement ends).
    clears: tuple[str, ...] = ENDED_BY_PLACING
    # Annotations set in the same write (a move's record of why it left a worker).
    sets: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CreateMirror:
    """Create ``body`` on ``cluster`` (its namespace too, when allowed and missing), then
    record its UID on the management object as run ``run``'s mirror: only a recorded
    mirror is followed."""

    cluster: str
    body: JsonObj
    origin_uid: str
    run: int = 1
    if_refused: IfRefused = MIRROR_REJECTED


@dataclass(frozen=True, slots=True)
class CopyDependencies:
    """Copy these dependencies from the manager into ``namespace`` on ``cluster`` (created
    or brought up to date; the namespace too, like a mirror's). A worker object of one
    of these names that jobrelay did not make is never written: the plan stops there."""

    cluster: str
    namespace: str
    dependencies: tuple[Dependency, ...]
    if_refused: IfRefused = DEPENDENCY_NOT_COPIED


@dataclass(frozen=True, slots=True)
class PatchMirror:
    cluster: str
    name: str
    namespace: str
    patch: JsonObj
    if_refused: IfRefused = MIRROR_UPDATE_REJECTED


@dataclass(frozen=True, slots=True)
class DeleteMirror:
    """Delete a mirror, preconditioned on its UID (never a newer namesake)."""

    cluster: str
    name: str
    namespace: str
    uid: str
    why: str
    # Keep the mirror until its pods are gone (foreground deletion), so that a
    # workload moved off a reachable worker never runs in two places at once.
    wait_for_pods: bool = False


@dataclass(frozen=True, slots=True)
class CreateProvisioning:
    """Create a workload's PodTemplates, then the ProvisioningRequest naming them, on an
    autoscaled worker (in the workload's namespace there): a claim on capacity it can add."""

    cluster: str
    namespace: str
    templates: tuple[JsonObj, ...]
    request: JsonObj


@dataclass(frozen=True, slots=True)
class DeleteProvisioning:
    """Delete one of jobrelay's ProvisioningRequests on a worker, and its PodTemplates."""

    cluster: str
    namespace: str
    name: str
    templates: tuple[str, ...]
    why: str


@dataclass(frozen=True, slots=True)
class WriteStatus:
    """Merge-patch the management object's status, compare-and-swap on ``resource_version``."""

    patch: JsonObj
    resource_version: str
    status: JsonObj  # the whole status the patch leads to
    if_refused: IfRefused = STATUS_REFUSED


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """An Event on the management object."""

    type: EventType
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Log:
    """A line for the operator's log (what users see goes in Events)."""

    level: Literal["info", "warning"]
    message: str


@dataclass(frozen=True, slots=True)
class Annotate:
    """Merge-patch annotations of the management object (None removes one): what
    jobrelay shows on the object itself, such as why it is not placed."""

    annotations: dict[str, str | None]


Action = (
    Place
    | CopyDependencies
    | CreateMirror
    | PatchMirror
    | DeleteMirror
    | CreateProvisioning
    | DeleteProvisioning
    | WriteStatus
    | RecordEvent
    | Log
    | Annotate
)


# -- outcomes ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadFresh:
    """Decide again with fresher input: the management object from the apiserver
    (``obj``), this name read on every connected worker (``probe``), or the manager's
    admission's verdict on the workload's pods (``admission``)."""

    obj: bool = False
    probe: bool = False
    admission: bool = False


# What a decision ends with: an outcome for the work queue, or fresher input first.
Outcome = QueueOutcome | ReadFresh


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...] = ()
    outcome: Outcome = field(default_factory=Done)
    # Drop any placement reservation of this key: its mirror is visible, or it needs none.
    release: bool = False
    # Not placed: the signature of why (the reconciler remembers it, to report a held
    # workload again only when the reason changes, and to retry it when capacity frees).
    held: str | None = None
    # A move off a worker began (its mirror is being deleted).
    leaving: Leaving | None = None
    # A transitional status step waits to be copied with the next (the relay's memory
    # keeps since when, so that it waits at most the batch period).
    batching: bool = False
    # Whether the echo (watch event) of this plan's status write must bring the key back:
    # not when the decision ends with the status it copied (own_writes.py).
    echo_needed: bool = True
