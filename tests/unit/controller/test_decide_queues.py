"""decide() and fleet-wide queues: a workload not placed yet waits until its queue admits
it (and its namespace's ResourceQuota on the manager allows it), told once per reason;
a placed one is never held by them."""

from __future__ import annotations

import dataclasses

import pytest
from tests.unit.controller.builders import job, mirror, snapshot, summary, worker

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import Annotate, Place, RecordEvent, RequeueAfter
from jobrelay.controller.relay.snapshot import QueueHold, Snapshot
from jobrelay.controller.relay.steps.holds import QUEUE_UNJUDGED
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

QUOTA = QueueHold(
    "QueueQuotaExceeded", "team-a: 40 of 32 cpu (nominal 32, borrowing limit 0); position 3"
)


def holding(s: Snapshot, hold: QueueHold | None, held: str | None = None) -> Snapshot:
    return dataclasses.replace(s, queue_hold=hold, held=held)


@pytest.mark.parametrize(
    "hold",
    [
        QueueHold("QueueNotFound", "queue team-x does not exist"),
        QueueHold("QueueNotAllowed", "queue team-b does not admit namespace default"),
        QUOTA,
        QueueHold("NamespaceQuotaExceeded", "requests.cpu: 3 of 2 (quota q)"),
        QueueHold("ExceedsNamespaceQuota", "asks 10 cpu; quota q allows 2"),
    ],
)
def test_held_unplaced_with_the_reason_in_an_event_and_the_annotation(hold: QueueHold) -> None:
    plan = decide(holding(snapshot(job(), worker("w1")), hold))
    assert [summary(a) for a in plan.actions] == [
        ("Annotate", NOT_PLACED_ANNOTATION),
        ("Event", "Warning", hold.reason),
        ("Log", "warning"),
    ]
    annotate, event = plan.actions[0], plan.actions[1]
    assert isinstance(annotate, Annotate) and isinstance(event, RecordEvent)
    assert annotate.annotations[NOT_PLACED_ANNOTATION] == f"{hold.reason}: {hold.message}"
    assert event.message == hold.message
    assert not any(isinstance(a, Place) for a in plan.actions)
    assert isinstance(plan.outcome, RequeueAfter)
    assert plan.held is not None and plan.held.startswith(hold.reason)


def test_told_once_per_reason_not_per_number() -> None:
    first = decide(holding(snapshot(job(), worker("w1")), QUOTA))
    moved = QueueHold(QUOTA.reason, QUOTA.message.replace("40 of", "44 of").replace("3", "2"))
    again = decide(holding(snapshot(job(), worker("w1")), moved, held=first.held))
    assert again.actions == ()
    assert again.held == first.held
    other = QueueHold("NamespaceQuotaExceeded", "requests.cpu: 3 of 2 (quota q)")
    changed = decide(holding(snapshot(job(), worker("w1")), other, held=first.held))
    assert [summary(a)[:3] for a in changed.actions][1] == ("Event", "Warning", other.reason)


def test_not_judged_yet_waits_a_moment_without_a_word() -> None:
    plan = decide(holding(snapshot(job(), worker("w1")), QueueHold("", "", settled=False)))
    assert plan.actions == ()
    assert plan.outcome == RequeueAfter(1.0)
    assert plan.held == QUEUE_UNJUDGED


def test_held_before_the_manager_admission_is_asked() -> None:
    # A workload its queue holds costs no dry-run probe.
    plan = decide(holding(snapshot(job(), worker("w1"), admission=None), QUOTA))
    assert isinstance(plan.outcome, RequeueAfter)


def test_admitted_is_placed_as_today() -> None:
    plan = decide(holding(snapshot(job(), worker("w1")), None, held="QueueQuotaExceeded|x"))
    assert any(isinstance(a, Place) for a in plan.actions)


def test_a_placed_workload_is_never_held_by_its_queue() -> None:
    placed = job(placed="w1", history=("w1",))
    plan = decide(holding(snapshot(placed, worker("w1", mirror=mirror(placed)), fresh=True), QUOTA))
    assert not any(isinstance(a, RecordEvent) and a.reason == QUOTA.reason for a in plan.actions)


def test_a_suspended_workload_is_not_held_by_its_queue() -> None:
    plan = decide(holding(snapshot(job(suspend=True), worker("w1")), QUOTA))
    assert not any(isinstance(a, RecordEvent) for a in plan.actions)
