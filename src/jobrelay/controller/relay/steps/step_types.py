"""The types the decision's steps share: what one decision has found so far
(:class:`Progress`), what a step answers (:class:`Continue` or :class:`Stop`), and
what a hold rule answers (:class:`Hold`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from jobrelay.controller.relay.leaving import Leaving
from jobrelay.controller.relay.plan import Action, Annotate, Outcome, Plan
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.vocabulary.json_types import JsonObj

__all__ = ["Continue", "DecideStep", "Hold", "HoldRule", "Progress", "StepAnswer", "Stop"]


@dataclass(slots=True)
class Progress:
    """What the steps before have found and asked for, handed to the next.

    Each step reads what the steps before it set and adds its own: the fields
    below are in the order the steps set them.
    """

    # The management object, with the placement made in this decision ({} when it is
    # gone: the deletion step, first, ends the decision then).
    obj: JsonObj
    # The actions asked for so far, in order.
    actions: list[Action] = field(default_factory=list)
    # Conflicts: its placements (the last is where it runs), its placement annotation,
    # and the workers where a mirror it follows runs and is not going.
    history: tuple[str, ...] = ()
    cluster: str = ""
    live: list[WorkerSnapshot] = field(default_factory=list)
    # Preempted, its run ended: unplaced with its placements kept, back in its queue.
    requeued: bool = False
    # Placing: placed by this decision (a Place action is in ``actions``).
    placed_now: bool = False
    # Moves: the worker it is placed on (None: not registered, and then it moves).
    worker: WorkerSnapshot | None = None
    # Mirror: the mirror followed there, and the copies of what its pods need that
    # follow the manager's (asked for last, after its status).
    mirror: JsonObj | None = None
    sync: tuple[Action, ...] = ()
    # The followed mirror's record, when this process created it and has not written it
    # yet, and the mirror's age in seconds (written off the dispatch path: mirror_record.py).
    record: tuple[Annotate, float] | None = None

    def plan(
        self,
        outcome: Outcome,
        *,
        release: bool = False,
        held: str | None = None,
        leaving: Leaving | None = None,
        echo_needed: bool = True,
    ) -> Stop:
        """End the decision with the actions so far and ``outcome``."""
        return Stop(
            Plan(tuple(self.actions), outcome, release, held, leaving, echo_needed=echo_needed)
        )

    def held(self, hold: Hold, *, release: bool = False) -> Stop:
        """End the decision held: the actions so far, then what the hold tells."""
        self.actions.extend(hold.actions)
        return self.plan(hold.outcome, release=release, held=hold.held)


@dataclass(frozen=True, slots=True)
class Continue:
    """The step is done: the next one decides on."""


@dataclass(frozen=True, slots=True)
class Stop:
    """The decision ends with this plan."""

    plan: Plan


StepAnswer = Continue | Stop


class DecideStep(Protocol):
    """One rule module of the decision, run in the pipeline's order (decide.py)."""

    name: str

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer: ...


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a workload may not go on now: what to tell (actions), how the decision ends,
    and the signature of why (the reconciler tells it again only when that changes)."""

    actions: tuple[Action, ...]
    outcome: Outcome
    held: str | None = None


class HoldRule(Protocol):
    """One reason a workload waits before it is placed, before its mirror is created, or
    before new pods of it reach its mirror (steps/holds/)."""

    name: str

    def hold(self, s: Snapshot, obj: JsonObj) -> Hold | None:
        """Why ``obj`` waits now; None if this rule lets it go on."""
        ...
