"""The kinds the stand-in drives and the decisions it makes per object (pure): whether
the object is its to drive (managedBy absent or the operator's own value, as the real
operators decide), and if so the next step of that kind's lifecycle and what the real
operator would have made of it by now (children_rules.py)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.kubeflow import MPIJobKind, PyTorchJobKind
from jobrelay.kinds.ray import RayClusterKind, RayJobKind
from jobrelay.kinds.trainjob import TrainJobKind
from jobrelay.localfleet.standin.children_rules import (
    Children,
    MakeChildren,
    mpijob_children,
    pytorchjob_children,
    raycluster_children,
    rayjob_children,
    trainjob_children,
)
from jobrelay.localfleet.standin.kubeflow_rules import (
    MPI_OPERATOR,
    TRAINER,
    TRAINING_OPERATOR,
    mpijob_step,
    pytorchjob_step,
    trainjob_step,
)
from jobrelay.localfleet.standin.lifecycle_rules import (
    OUTCOME_ANNOTATION,
    RUN_SECONDS_ANNOTATION,
    WAIT_FOR_A_CHANGE,
    LifecycleStep,
    Rule,
    Run,
    field,
    outcome_of,
    run_seconds_of,
)
from jobrelay.localfleet.standin.ray_rules import RAY_OPERATOR, raycluster_step, rayjob_step
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "KINDS",
    "OUTCOME_ANNOTATION",
    "RUN_SECONDS_ANNOTATION",
    "StandinKind",
    "next_children",
    "next_step",
]

SPEC = ("spec",)
RUN_POLICY = ("spec", "runPolicy")


@dataclass(frozen=True)
class StandinKind:
    """One kind the stand-in drives: where its managedBy and suspend fields are, the value
    its real operator claims, its lifecycle, and what its operator makes of an object."""

    resource: Resource
    own_manager: str
    fields_at: tuple[str, ...]  # the object holding managedBy and suspend
    rule: Rule
    makes: MakeChildren

    def is_ours(self, obj: Mapping[str, Any]) -> bool:
        """As ``ManagedByExternalController``: absent, empty or the operator's own value."""
        manager = field(obj, (*self.fields_at, "managedBy"))
        return not manager or manager == self.own_manager

    def suspended(self, obj: Mapping[str, Any]) -> bool:
        return field(obj, (*self.fields_at, "suspend")) is True


KINDS = (
    StandinKind(RayJobKind.ref, RAY_OPERATOR, SPEC, rayjob_step, rayjob_children),
    StandinKind(RayClusterKind.ref, RAY_OPERATOR, SPEC, raycluster_step, raycluster_children),
    StandinKind(TrainJobKind.ref, TRAINER, SPEC, trainjob_step, trainjob_children),
    StandinKind(
        PyTorchJobKind.ref, TRAINING_OPERATOR, RUN_POLICY, pytorchjob_step, pytorchjob_children
    ),
    StandinKind(MPIJobKind.ref, MPI_OPERATOR, RUN_POLICY, mpijob_step, mpijob_children),
)


def _run(kind: StandinKind, obj: Mapping[str, Any], now: datetime.datetime) -> Run | None:
    """``obj`` as a rule sees it; None for another controller's object or one being deleted."""
    if not kind.is_ours(obj) or obj["metadata"].get("deletionTimestamp"):
        return None
    annotations = obj["metadata"].get("annotations") or {}
    return Run(
        obj=obj,
        now=now,
        outcome=outcome_of(annotations),
        run_seconds=run_seconds_of(annotations),
        suspended=kind.suspended(obj),
    )


def next_step(kind: StandinKind, obj: Mapping[str, Any], now: datetime.datetime) -> LifecycleStep:
    """What the stand-in does next to ``obj`` at ``now``: nothing for another controller's
    object or one being deleted, else its lifecycle's next step."""
    run = _run(kind, obj, now)
    return WAIT_FOR_A_CHANGE if run is None else kind.rule(run)


def next_children(kind: StandinKind, obj: Mapping[str, Any], now: datetime.datetime) -> Children:
    """What of ``obj`` should exist on its cluster now (made when missing) and what should
    not (deleted): nothing for another controller's object or one being deleted (the
    garbage collector deletes what it controls)."""
    run = _run(kind, obj, now)
    return Children() if run is None else kind.makes(run)
