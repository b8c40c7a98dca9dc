"""decide() as a pipeline: its steps in order, the first that stops decides, and the
hold rules (steps/holds/) asked in their order, like placement's filters."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from tests.unit.controller.builders import RUNNING, job, mirror, snapshot, worker

from jobrelay.controller.relay.decide import STEPS, decide
from jobrelay.controller.relay.plan import Done, Log, Plan, ReadFresh, RequeueAfter, Retry
from jobrelay.controller.relay.snapshot import Needed, QueueHold, Snapshot
from jobrelay.controller.relay.steps.holds import (
    BEFORE_CREATING,
    BEFORE_NEW_PODS,
    BEFORE_PLACING,
    QUEUE_UNJUDGED,
    HeldByAdmission,
    HeldByDependencies,
    HeldByQueue,
    first_hold,
)
from jobrelay.controller.relay.steps.step_types import (
    Continue,
    Hold,
    HoldRule,
    Progress,
    StepAnswer,
    Stop,
)
from jobrelay.dependencies.template_references import Dependency
from jobrelay.placement.admission_probes import AdmissionVerdict
from jobrelay.vocabulary.json_types import JsonObj

QUOTA = QueueHold("QueueQuotaExceeded", "over its quota")


def test_the_steps_run_in_the_order_of_the_issue() -> None:
    names = [step.name for step in STEPS]
    assert names == [
        "restore",
        "deletions",
        "conflicts",
        "holds",
        "placing",
        "moves",
        "mirror",
        "status",
    ]


@dataclass
class Recorder:
    """A step that notes it ran, adds a log line, and goes on or stops."""

    name: str
    ran: list[str]
    stops: bool = False
    seen: list[int] = field(default_factory=list)

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        del s
        self.ran.append(self.name)
        self.seen.append(len(progress.actions))
        progress.actions.append(Log("info", self.name))
        return progress.plan(Done()) if self.stops else Continue()


def test_the_first_step_that_stops_decides_and_the_rest_do_not_run() -> None:
    ran: list[str] = []
    steps = (Recorder("a", ran), Recorder("b", ran, stops=True), Recorder("c", ran))
    plan = decide(snapshot(job()), steps)
    assert ran == ["a", "b"]
    assert plan == Plan((Log("info", "a"), Log("info", "b")), Done())


def test_each_step_sees_what_the_ones_before_asked_for() -> None:
    ran: list[str] = []
    first, second = Recorder("a", ran), Recorder("b", ran, stops=True)
    decide(snapshot(job()), (first, second))
    assert (first.seen, second.seen) == ([0], [1])


def test_a_pipeline_that_never_stops_is_a_bug() -> None:
    with pytest.raises(AssertionError, match="no step ended"):
        decide(snapshot(job()), (Recorder("a", []),))


def test_a_running_workload_goes_through_every_step_to_its_status() -> None:
    s = snapshot(job(placed="w1"), worker("w1", mirror=mirror(job(), status=RUNNING)))
    progress = Progress(obj=s.obj or {})
    answers = [step.run(s, progress) for step in STEPS]
    assert answers[:-1] == [Continue()] * (len(STEPS) - 1)
    assert isinstance(answers[-1], Stop)
    assert answers[-1].plan == decide(s)


# -- the hold rules ------------------------------------------------------------------


REFUSED = AdmissionVerdict(allowed=False, reason="PodSecurity", message="violates PodSecurity")


def held(s: Snapshot, rules: tuple[HoldRule, ...] = BEFORE_PLACING) -> Hold | None:
    obj: JsonObj = s.obj or {}
    return first_hold(rules, s, obj)


def test_the_hold_lists() -> None:
    assert [type(r) for r in BEFORE_PLACING] == [HeldByQueue, HeldByDependencies, HeldByAdmission]
    assert [type(r) for r in BEFORE_CREATING] == [HeldByQueue, HeldByDependencies, HeldByAdmission]
    assert [type(r) for r in BEFORE_NEW_PODS] == [HeldByAdmission]


def test_the_queue_is_asked_before_the_admission() -> None:
    s = snapshot(job(), admission=None)
    assert held(s) == Hold((), ReadFresh(admission=True))
    s = dataclasses.replace(s, queue_hold=QUOTA)
    hold = held(s)
    assert hold is not None and hold.held is not None and hold.held.startswith(QUOTA.reason)
    # Before a mirror is created the queue is asked too: the snapshot says its verdict
    # only of a workload jobrelay has not placed (unplaced, or a preset placement).
    creating = held(s, BEFORE_CREATING)
    assert creating is not None and creating.held == hold.held
    s = dataclasses.replace(s, queue_hold=None)
    assert held(s, BEFORE_CREATING) == Hold((), ReadFresh(admission=True))


def test_a_queue_that_has_not_judged_holds_without_a_word() -> None:
    s = dataclasses.replace(snapshot(job()), queue_hold=QueueHold("Q", "m", settled=False))
    assert held(s) == Hold((), RequeueAfter(1.0), held=QUEUE_UNJUDGED)


def test_a_refused_admission_is_told() -> None:
    hold = held(snapshot(job(), admission=REFUSED))
    assert hold is not None
    assert [type(a).__name__ for a in hold.actions] == ["RecordEvent", "Log"]


def test_dependencies_not_listed_yet_hold_for_a_moment() -> None:
    s = dataclasses.replace(snapshot(job()), dependencies=(), dependencies_listed=False)
    assert held(s, (HeldByDependencies(),)) is None  # needs nothing: nothing to wait for
    needs = (Needed(Dependency("configmap", "settings"), None),)
    s = dataclasses.replace(s, dependencies=needs)
    hold = held(s, (HeldByDependencies(),))
    assert hold is not None and isinstance(hold.outcome, Retry)


def test_nothing_holds_an_admitted_workload() -> None:
    assert held(snapshot(job())) is None
