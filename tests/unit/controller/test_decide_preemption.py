"""decide() and preemption: a running workload an admission pass chose as a victim is
marked (restart-safe) and told why, its mirror is deleted and waited for, what its run
did is counted, and it waits in its queue unplaced, its placements kept, until admitted
again as a new run; the user's spec.suspend is never touched."""

from __future__ import annotations

import dataclasses

from tests.unit.controller.builders import RUNNING, RV, job, mirror, snapshot, summary, worker

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    Annotate,
    DeleteMirror,
    Done,
    PatchMirror,
    Place,
    RecordEvent,
    Retry,
    WriteStatus,
)
from jobrelay.controller.relay.snapshot import Preempt, QueueHold, Snapshot
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PREEMPTED_BY_ANNOTATION,
    REDISPATCH_ANNOTATION,
)

WINNER = "Job team-b/urgent"
PREEMPT = Preempt(WINNER, f"preempted by {WINNER} to reclaim b's nominal quota; it waits in a")
ONE_DONE = {"startTime": RUNNING["startTime"], "active": 1, "ready": 1, "succeeded": 1}
AT_REST_ONE_DONE = {"startTime": RUNNING["startTime"], "active": 0, "ready": 0, "succeeded": 1}
MARK = {PREEMPTED_BY_ANNOTATION: WINNER}


def marked(**kwargs: object) -> JsonObj:
    annotations = {**MARK, **dict(kwargs.pop("annotations", {}) or {})}  # type: ignore[call-overload]
    return job(annotations=annotations, **kwargs)  # type: ignore[arg-type]


def with_(s: Snapshot, **changes: object) -> Snapshot:
    return dataclasses.replace(s, **changes)  # type: ignore[arg-type]


def test_a_chosen_victim_is_marked_and_told_first() -> None:
    placed = job(placed="w1", history=("w1",), status=RUNNING)
    s = snapshot(placed, worker("w1", mirror=mirror(placed, status=RUNNING)), fresh=True)
    plan = decide(with_(s, preempt=PREEMPT))
    assert [summary(a) for a in plan.actions] == [
        ("Annotate", PREEMPTED_BY_ANNOTATION),
        ("Event", "Warning", "Preempted"),
        ("Log", "warning"),
    ]
    event = plan.actions[1]
    assert isinstance(event, RecordEvent) and event.message == PREEMPT.message
    assert plan.outcome == Done()


def test_a_marked_victim_has_its_mirror_deleted_and_waits_for_its_pods() -> None:
    obj = marked(placed="w1", history=("w1",), status=RUNNING)
    s = snapshot(obj, worker("w1", mirror=mirror(obj, status=RUNNING)), worker("w2"), fresh=True)
    plan = decide(s)
    deletes = [a for a in plan.actions if isinstance(a, DeleteMirror)]
    assert len(deletes) == 1 and deletes[0].cluster == "w1" and deletes[0].wait_for_pods
    assert isinstance(plan.outcome, Retry)
    # Never by suspending it: the user's spec.suspend is the user's.
    assert not any(isinstance(a, PatchMirror | WriteStatus) for a in plan.actions)


def test_once_its_mirror_is_gone_what_it_did_is_counted() -> None:
    obj = marked(placed="w1", history=("w1",), completions=3, status=RUNNING)
    s = snapshot(obj, worker("w1", vanished=mirror(job(), status=ONE_DONE)), worker("w2"),
                 fresh=True)  # fmt: skip
    plan = decide(s)
    writes = [a for a in plan.actions if isinstance(a, WriteStatus)]
    assert len(writes) == 1 and writes[0].status["succeeded"] == 1
    assert writes[0].status["active"] == 0
    assert not any(isinstance(a, Place) for a in plan.actions)


def test_then_it_waits_in_its_queue_unplaced_with_its_placements_kept() -> None:
    obj = marked(placed="w1", history=("w1",), completions=3, status=AT_REST_ONE_DONE)
    s = snapshot(obj, worker("w1", vanished=mirror(job(), status=ONE_DONE)), worker("w2"),
                 fresh=True)  # fmt: skip
    plan = decide(s)
    unplace = [a for a in plan.actions if isinstance(a, Annotate)]
    assert unplace and unplace[-1].annotations == {CLUSTER_ANNOTATION: None}
    assert not any(isinstance(a, Place) for a in plan.actions)
    assert plan.outcome == Done()


def test_the_end_of_its_run_is_told_only_when_the_mark_was_not_told_by_this_process() -> None:
    obj = marked(placed="w1", history=("w1",), completions=3, status=AT_REST_ONE_DONE)
    s = snapshot(obj, worker("w1", vanished=mirror(job(), status=ONE_DONE)), worker("w2"),
                 fresh=True)  # fmt: skip
    told_here = decide(with_(s, told_preempted=True))
    assert not any(isinstance(a, RecordEvent) for a in told_here.actions)
    # A controller restarted since the mark: its Warning may have been lost with the old one.
    after_restart = decide(s)
    events = [a for a in after_restart.actions if isinstance(a, RecordEvent)]
    assert [(e.type, e.reason) for e in events] == [("Warning", "Preempted")]
    assert f"preempted by {WINNER}" in events[0].message and "w1 ended" in events[0].message


def requeued() -> JsonObj:
    return marked(history=("w1",), completions=3, status=AT_REST_ONE_DONE)


def test_back_in_its_queue_it_is_held_there_not_restored() -> None:
    hold = QueueHold("QueueQuotaExceeded", "a: 17 of 16 cpu (nominal 16, borrowing limit 0)")
    plan = decide(with_(snapshot(requeued(), worker("w1"), worker("w2")), queue_hold=hold))
    assert [summary(a)[:3] for a in plan.actions] == [
        ("Annotate", NOT_PLACED_ANNOTATION),
        ("Event", "Warning", "QueueQuotaExceeded"),
        ("Log", "warning"),
    ]


def test_admitted_again_it_is_placed_as_a_new_run() -> None:
    plan = decide(snapshot(requeued(), worker("w1", load=3), worker("w2")))
    places = [a for a in plan.actions if isinstance(a, Place)]
    assert [(p.cluster, p.history) for p in places] == [("w2", ("w1", "w2"))]
    assert places[0].resource_version == RV
    assert not any(isinstance(a, RecordEvent) and a.reason == "PlacementRestored"
                   for a in plan.actions)  # fmt: skip


def test_a_workload_that_runs_at_most_once_is_never_stopped_by_a_mark() -> None:
    obj = marked(placed="w1", history=("w1",), status=RUNNING,
                 annotations={REDISPATCH_ANNOTATION: "never"})  # fmt: skip
    s = snapshot(obj, worker("w1", mirror=mirror(obj, status=RUNNING)), fresh=True)
    assert not any(isinstance(a, DeleteMirror) for a in decide(s).actions)


def test_not_yet_placed_is_never_marked() -> None:
    plan = decide(with_(snapshot(job(), worker("w1")), preempt=PREEMPT))
    assert not any(isinstance(a, Annotate) and PREEMPTED_BY_ANNOTATION in a.annotations
                   for a in plan.actions)  # fmt: skip


def test_the_winner_is_told_it_is_preempting_as_a_normal_event() -> None:
    hold = QueueHold("Preempting", "preempting Job team-a/a31 to make room in b",
                     event_type="Normal")  # fmt: skip
    plan = decide(with_(snapshot(job(), worker("w1")), queue_hold=hold))
    assert [summary(a)[:3] for a in plan.actions] == [
        ("Annotate", NOT_PLACED_ANNOTATION),
        ("Event", "Normal", "Preempting"),
    ]


def test_a_mark_and_no_placement_while_its_mirror_runs_keeps_that_run() -> None:
    # Annotations edited by hand where no admission policy stops it: the mirror that
    # runs is followed, not restarted as a new run.
    obj = marked(history=("w1",), status=RUNNING)
    s = snapshot(obj, worker("w1", mirror=mirror(job(), status=RUNNING)), worker("w2"),
                 fresh=True)  # fmt: skip
    places = [a for a in decide(s).actions if isinstance(a, Place)]
    assert [(p.cluster, p.history) for p in places] == [("w1", ("w1",))]
