"""Table tests of each rule module of the decision (controller/relay/steps/), on its own.

Each row sets up a snapshot, runs the steps before the one under test (each must
go on), then that step alone: it goes on (``CONTINUE``, having added the actions
the row names) or stops with a plan (those actions, and its outcome).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from tests.unit.controller.builders import (
    COMPLETE,
    CREATED_LOOK,
    KEEP,
    OLD_UID,
    RUNNING,
    RV,
    SETTINGS,
    UID,
    foreign,
    job,
    mirror,
    snapshot,
    summary,
    worker,
)

from jobrelay.admission.preemption_rules import PREEMPTED
from jobrelay.controller.relay.decide import STEPS
from jobrelay.controller.relay.plan import (
    Action,
    CreateMirror,
    Done,
    Outcome,
    PatchMirror,
    Place,
    ReadFresh,
    RequeueAfter,
    Retry,
    WriteStatus,
)
from jobrelay.controller.relay.refusal_wording import (
    MIRROR_REJECTED,
    MIRROR_UPDATE_REJECTED,
    STATUS_REFUSED,
)
from jobrelay.controller.relay.snapshot import Preempt, QueueHold, Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer, Stop
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PREEMPTED_BY_ANNOTATION,
)

CONTINUE = "continue"
UNPLACEABLE = RequeueAfter(SETTINGS.unplaceable_retry)
UNLISTED = WorkerNamespaces("manager", synced=False)
w = worker


def before(name: str, s: Snapshot) -> Progress:
    """What the steps before step ``name`` leave (each of them goes on)."""
    progress = Progress(obj=s.obj if s.obj is not None else {})
    for step in STEPS:
        if step.name == name:
            return progress
        assert isinstance(step.run(s, progress), Continue), f"{step.name} stopped"
    raise AssertionError(f"no step {name}")


def run_step(name: str, s: Snapshot) -> tuple[StepAnswer, tuple[Action, ...], Progress]:
    """Step ``name``'s answer, the actions it added, and what it leaves for the next."""
    progress = before(name, s)
    (step,) = [step for step in STEPS if step.name == name]
    start = len(progress.actions)
    answer = step.run(s, progress)
    added = answer.plan.actions if isinstance(answer, Stop) else tuple(progress.actions)
    return answer, added[start:], progress


@dataclass(frozen=True)
class Row:
    step: str
    obj: Any
    workers: tuple[WorkerSnapshot, ...] = ()
    # What the step asked for (builders.summary), and how it ends: CONTINUE or an outcome.
    actions: tuple[tuple[Any, ...], ...] = ()
    answer: Outcome | str = CONTINUE
    fresh: bool = False
    probed: bool = False
    record: bool = True
    fields: tuple[tuple[str, Any], ...] = ()  # more Snapshot fields


def snapshot_of(row: Row) -> Snapshot:
    s = snapshot(row.obj, *row.workers, fresh=row.fresh, probed=row.probed, record=row.record)
    return dataclasses.replace(s, **dict(row.fields))


PLACED = job(placed="w1", status=RUNNING)
ITS_MIRROR = mirror(job(), status=RUNNING)
QUOTA = QueueHold("QueueQuotaExceeded", "team-a's queue is over its quota (cpu 4 of 4)")


ROWS = {
    # -- deletions ------------------------------------------------------------------
    "deletions: gone, its mirrors go and the decision ends": Row(
        "deletions",
        None,
        (w("w1", mirror=ITS_MIRROR),),
        actions=(("Delete", "w1", "m-1"),),
        answer=Done(),
    ),
    "deletions: being deleted, likewise": Row(
        "deletions",
        job(placed="w1", deleting=True),
        (w("w1", mirror=ITS_MIRROR),),
        actions=(("Delete", "w1", "m-1"),),
        answer=Done(),
    ),
    "deletions: finished, its mirror has served its purpose": Row(
        "deletions",
        job(placed="w1", status=COMPLETE),
        (w("w1", mirror=mirror(job(), status=COMPLETE)),),
        actions=(("Delete", "w1", "m-1"),),
        answer=Done(),
    ),
    "deletions: finished, the finished run's mirror kept on request": Row(
        "deletions",
        job(placed="w1", status=COMPLETE),
        (w("w1", mirror=mirror(job(), status=COMPLETE)),),
        answer=Done(),
        fields=(("settings", KEEP),),
    ),
    "deletions: a worker that does not answer is left for its return": Row(
        "deletions", None, (w("w1", connected=False, mirror=ITS_MIRROR),), answer=Done()
    ),
    "deletions: created again, an earlier object's mirror goes and the decision goes on": Row(
        "deletions",
        job(),
        (w("w1", mirror=mirror(job(), origin_uid=OLD_UID)),),
        actions=(("Delete", "w1", "m-1"),),
    ),
    "deletions: running, its own mirror stays": Row(
        "deletions", PLACED, (w("w1", mirror=ITS_MIRROR),)
    ),
    # -- conflicts ------------------------------------------------------------------
    "conflicts: a mirror it did not create, in a cache: the object is read afresh": Row(
        "conflicts",
        job(placed="w1"),
        (w("w1"), w("w2", mirror=ITS_MIRROR)),
        record=False,
        answer=ReadFresh(obj=True),
    ),
    "conflicts: a mirror it did not create, read afresh: told of, left alone": Row(
        "conflicts",
        job(placed="w1"),
        (w("w1"), w("w2", mirror=ITS_MIRROR)),
        record=False,
        fresh=True,
        actions=(("Event", "Warning", "ForeignMirror"), ("Log", "warning")),
    ),
    "conflicts: its mirror runs off its placement: the placement follows it": Row(
        "conflicts",
        job(placed="w1"),
        (w("w1"), w("w2", mirror=ITS_MIRROR)),
        actions=(
            ("Event", "Warning", "PlacementConflict"),
            ("Log", "warning"),
            ("Place", "w2", RV),
        ),
        answer=Done(),
    ),
    "conflicts: its mirror runs off its placement, namespaces not known there: waits": Row(
        "conflicts",
        job(placed="w1"),
        (w("w1"), w("w2", namespaces=UNLISTED, mirror=ITS_MIRROR)),
        answer=Retry("the namespaces of w2 are not known yet"),
    ),
    "conflicts: its mirror runs off its placement on a cordoned worker: stopped there": Row(
        "conflicts",
        job(placed="w1"),
        (w("w1"), w("w2", cordoned=True, mirror=ITS_MIRROR)),
        actions=(
            ("Event", "Warning", "PlacementConflict"),
            ("Log", "warning"),
            ("Delete", "w2", "m-1"),
        ),
        answer=Retry("waiting for its mirror on w2 to be gone"),
    ),
    "conflicts: its followed mirror is going off its placement: waits": Row(
        "conflicts",
        job(placed="w1"),
        (w("w1"), w("w2", mirror=mirror(job(), deleting=True))),
        fresh=True,
        answer=Retry("waiting for its mirror on w2 to be gone"),
    ),
    "conflicts: its placement annotation edited: set back": Row(
        "conflicts",
        job(placed="w2", history=("w1",), status=RUNNING),
        (w("w1", mirror=ITS_MIRROR), w("w2")),
        actions=(
            ("Event", "Warning", "PlacementRestored"),
            ("Log", "warning"),
            ("Place", "w1", RV),
        ),
        answer=Done(),
    ),
    "conflicts: placed where its placements end: goes on": Row(
        "conflicts", PLACED, (w("w1", mirror=ITS_MIRROR),)
    ),
    # -- holds ----------------------------------------------------------------------
    "holds: placed, not asked": Row(
        "holds", PLACED, (w("w1", mirror=ITS_MIRROR),), fields=(("queue_hold", QUOTA),)
    ),
    "holds: suspended, not asked": Row(
        "holds", job(suspend=True), (w("w1"),), fields=(("queue_hold", QUOTA),)
    ),
    "holds: its queue holds it: told on the object, in an Event and the log": Row(
        "holds",
        job(),
        (w("w1"),),
        fields=(("queue_hold", QUOTA),),
        actions=(
            ("Annotate", NOT_PLACED_ANNOTATION),
            ("Event", "Warning", QUOTA.reason),
            ("Log", "warning"),
        ),
        answer=UNPLACEABLE,
    ),
    "holds: the manager's admission not asked yet": Row(
        "holds",
        job(),
        (w("w1"),),
        fields=(("admission", None),),
        answer=ReadFresh(admission=True),
    ),
    "holds: nothing holds it": Row("holds", job(), (w("w1"),)),
    # -- placing --------------------------------------------------------------------
    "placing: placed already, nothing to place": Row(
        "placing", PLACED, (w("w1", mirror=ITS_MIRROR),)
    ),
    "placing: suspended, never placed (its status says so)": Row(
        "placing", job(suspend=True), (w("w1"),), actions=(("Status", "Suspended"),), answer=Done()
    ),
    "placing: the one worker that can take it": Row(
        "placing", job(), (w("w1"),), actions=(("Place", "w1", RV),)
    ),
    "placing: no worker at all, it waits told why": Row(
        "placing",
        job(),
        (),
        actions=(
            ("Annotate", NOT_PLACED_ANNOTATION),
            ("Event", "Warning", "NotPlaced"),
            ("Log", "info"),
        ),
        answer=UNPLACEABLE,
    ),
    "placing: a capacity not known yet is a moment's wait, not told": Row(
        "placing", job(), (dataclasses.replace(w("w1"), blind=False),), answer=UNPLACEABLE
    ),
    "placing: its placement lost, its live mirror keeps it where it runs": Row(
        "placing",
        job(status=RUNNING),
        (w("w1"), w("w2", load=3, read=ITS_MIRROR)),
        fresh=True,
        actions=(("Place", "w2", RV),),
    ),
    # -- moves ----------------------------------------------------------------------
    "moves: nothing to leave for": Row("moves", PLACED, (w("w1", mirror=ITS_MIRROR),)),
    "moves: chosen as a victim: marked preempted first": Row(
        "moves",
        PLACED,
        (w("w1", mirror=ITS_MIRROR),),
        fields=(("preempt", Preempt("Job team-a/urgent", "preempted by a higher priority")),),
        actions=(
            ("Annotate", PREEMPTED_BY_ANNOTATION),
            ("Event", "Warning", PREEMPTED),
            ("Log", "warning"),
        ),
        answer=Done(),
    ),
    "moves: its worker is no longer registered: run elsewhere": Row(
        "moves",
        job(placed="w9"),
        (w("w1"),),
        fresh=True,
        actions=(
            ("Event", "Warning", "WorkerLost"),
            ("Place", "w1", RV, ("w9", "w1")),
            ("Event", "Normal", "Redispatched"),
            ("Log", "info"),
        ),
        answer=Done(),
    ),
    "moves: drained with All, its mirror runs: deleted, pods first": Row(
        "moves",
        PLACED,
        (w("w1", drain="All", mirror=ITS_MIRROR), w("w2")),
        actions=(("Delete", "w1", "m-1"),),
        answer=Retry("waiting for its mirror on w1 to be gone"),
    ),
    # -- mirror ---------------------------------------------------------------------
    "mirror: its worker does not answer: looked at again later": Row(
        "mirror", PLACED, (w("w1", lost_in=100.0),), answer=UNPLACEABLE
    ),
    "mirror: its worker's cache has not listed": Row(
        "mirror",
        PLACED,
        (w("w1", synced=False),),
        answer=Retry("the mirror cache of w1 has not listed yet"),
    ),
    "mirror: none, from a cache: the object is read afresh first": Row(
        "mirror", job(placed="w1"), (w("w1"),), answer=ReadFresh(obj=True)
    ),
    "mirror: none, read afresh: created": Row(
        "mirror",
        job(placed="w1"),
        (w("w1"),),
        fresh=True,
        actions=(("Create", "w1", UID), ("Event", "Normal", "Dispatched")),
        answer=CREATED_LOOK,
    ),
    "mirror: a namesake it did not create: every worker read afresh": Row(
        "mirror",
        job(placed="w1"),
        (w("w1", read=foreign(job())),),
        fresh=True,
        answer=ReadFresh(probe=True),
    ),
    "mirror: its mirror followed: on to its status": Row(
        "mirror", PLACED, (w("w1", mirror=ITS_MIRROR),)
    ),
    "mirror: suspended, its mirror runs: suspended there": Row(
        "mirror",
        job(placed="w1", suspend=True, status=RUNNING),
        (w("w1", mirror=ITS_MIRROR),),
        actions=(("Patch", "w1", {"spec": {"suspend": True}}), ("Event", "Normal", "Suspended")),
    ),
    # -- status ---------------------------------------------------------------------
    "status: the mirror's copied": Row(
        "status",
        job(placed="w1"),
        (w("w1", mirror=ITS_MIRROR),),
        actions=(("Status",),),
        answer=Done(),
    ),
    "status: nothing changed": Row("status", PLACED, (w("w1", mirror=ITS_MIRROR),), answer=Done()),
    "status: finished there: its status says it, and its mirror goes": Row(
        "status",
        PLACED,
        (w("w1", mirror=mirror(job(), status=COMPLETE)),),
        actions=(
            ("Status", "Complete", "SuccessCriteriaMet"),
            ("Delete", "w1", "m-1"),
        ),
        answer=Done(),
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_step(row: Row) -> None:
    answer, added, _ = run_step(row.step, snapshot_of(row))
    assert tuple(summary(a) for a in added) == row.actions
    if row.answer == CONTINUE:
        assert answer == Continue()
    else:
        assert isinstance(answer, Stop)
        assert answer.plan.outcome == row.answer


def test_placing_leaves_the_placement_for_the_steps_after() -> None:
    _, _, progress = run_step("placing", snapshot(job(), w("w1")))
    assert (progress.cluster, progress.history, progress.placed_now) == ("w1", ("w1",), True)
    assert progress.obj["metadata"]["annotations"][CLUSTER_ANNOTATION] == "w1"


def test_a_placement_ends_what_said_why_it_waited() -> None:
    _, (place,), _ = run_step("placing", snapshot(job(), w("w1")))
    assert isinstance(place, Place)
    assert place.clears == (NOT_PLACED_ANNOTATION, PREEMPTED_BY_ANNOTATION)


def test_the_mirror_step_leaves_the_mirror_followed_and_its_copies() -> None:
    _, _, progress = run_step("mirror", snapshot(PLACED, w("w1", mirror=ITS_MIRROR)))
    assert progress.mirror == ITS_MIRROR
    assert progress.sync == ()  # nothing its pods need (dependencies not judged)


def test_writes_name_what_their_refusal_says() -> None:
    _, (create, _), _ = run_step("mirror", snapshot(job(placed="w1"), w("w1"), fresh=True))
    assert isinstance(create, CreateMirror) and create.if_refused is MIRROR_REJECTED
    s = snapshot(job(placed="w1", suspend=True, status=RUNNING), w("w1", mirror=ITS_MIRROR))
    _, (patch, _), _ = run_step("mirror", s)
    assert isinstance(patch, PatchMirror) and patch.if_refused is MIRROR_UPDATE_REJECTED
    _, (write,), _ = run_step("status", snapshot(job(placed="w1"), w("w1", mirror=ITS_MIRROR)))
    assert isinstance(write, WriteStatus) and write.if_refused is STATUS_REFUSED
