"""A workload restored from a backup (a new UID) while its mirror runs for the old one
(named by its record, or, backed up before the record, by its placement): held until an
admin adopts or stops that mirror; never run twice, never its mirror lost. Table rows
through decide(), and properties over every annotation value and every placement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import (
    NAME,
    NAMESPACE,
    OLD_UID,
    RUNNING,
    RV,
    UID,
    job,
    mirror,
    outcome_summary,
    snapshot,
    summary,
    worker,
)

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    Annotate,
    CreateMirror,
    DeleteMirror,
    Done,
    Outcome,
    PatchMirror,
    Place,
    ReadFresh,
    Retry,
)
from jobrelay.controller.relay.snapshot import WorkerSnapshot
from jobrelay.kinds.restored import is_restored_mirror
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    MIRRORS_ANNOTATION,
    ORIGIN_UID_LABEL,
    RESTORED_ANNOTATION,
    RESTORED_HELD_ANNOTATION,
)

# The old object's mirror on w1 (run 1, uid m-0): what ran when the backup was taken.
OLD_RUN = mirror(job(uid=OLD_UID, placed="w1"), uid="m-0", status=RUNNING)
ADOPTED = mirror(job(uid=UID, placed="w1"), uid="m-0", status=RUNNING)
RECORD = {MIRRORS_ANNOTATION: "1:w1:m-0"}


def restored(**annotations: str) -> JsonObj:
    """The restored copy: a new UID, the old one's placement and record."""
    return job(placed="w1", status=RUNNING, annotations={**RECORD, **annotations})


HELD = (
    ("Annotate", RESTORED_HELD_ANNOTATION),
    ("Event", "Warning", "RestoredMirror"),
    ("Log", "warning"),
)
PATCH = {"metadata": {"uid": "m-0", "labels": {ORIGIN_UID_LABEL: UID}}}


@dataclass(frozen=True)
class Case:
    obj: JsonObj
    workers: tuple[WorkerSnapshot, ...]
    actions: tuple[tuple[Any, ...], ...]
    outcome: Outcome
    fresh: bool = False
    deleting: frozenset[str] = frozenset()


CASES = {
    "restored, nobody decided: held and told, its mirror left running": Case(
        obj=restored(), workers=(worker("w1", mirror=OLD_RUN),), actions=HELD, outcome=Done()
    ),
    "a value that is neither adopt nor stop: held, and told so": Case(
        obj=restored(**{RESTORED_ANNOTATION: "yes"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=HELD,
        outcome=Done(),
    ),
    "adopt, from the cache: read the admin's word fresh first": Case(
        obj=restored(**{RESTORED_ANNOTATION: "adopt"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=(),
        outcome=ReadFresh(obj=True),
    ),
    "adopt: the mirror's origin-uid moves to the new UID (the mirror's UID a precondition)": Case(
        obj=restored(**{RESTORED_ANNOTATION: "adopt"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        fresh=True,
        actions=(("Patch", "w1", PATCH), ("Event", "Normal", "MirrorAdopted"), ("Log", "info")),
        outcome=Done(),
    ),
    "adopt, backed up before its mirror was recorded: the annotation vouches, adopted": Case(
        obj=job(placed="w1", status=RUNNING, annotations={RESTORED_ANNOTATION: "adopt"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        fresh=True,
        actions=(("Patch", "w1", PATCH), ("Event", "Normal", "MirrorAdopted"), ("Log", "info")),
        outcome=Done(),
    ),
    "stop, backed up before its mirror was recorded: stopped": Case(
        obj=job(placed="w1", status=RUNNING, annotations={RESTORED_ANNOTATION: "stop"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        fresh=True,
        actions=(
            ("Delete", "w1", "m-0"),
            ("Event", "Normal", "RestoredMirrorStopped"),
            ("Log", "info"),
        ),
        outcome=Retry(""),
    ),
    "adopt while its worker does not answer: wait": Case(
        obj=restored(**{RESTORED_ANNOTATION: "adopt"}),
        workers=(worker("w1", mirror=OLD_RUN, connected=False),),
        fresh=True,
        actions=(),
        outcome=Retry(""),
    ),
    "adopted (the cache shows the new label): the annotations go": Case(
        obj=restored(**{RESTORED_ANNOTATION: "adopt", RESTORED_HELD_ANNOTATION: "x"}),
        workers=(worker("w1", mirror=ADOPTED),),
        actions=(("Annotate", RESTORED_ANNOTATION, RESTORED_HELD_ANNOTATION),),
        outcome=Done(),
    ),
    "stop: its mirror is deleted, its pods first, and waited for": Case(
        obj=restored(**{RESTORED_ANNOTATION: "stop"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        fresh=True,
        actions=(
            ("Delete", "w1", "m-0"),
            ("Event", "Normal", "RestoredMirrorStopped"),
            ("Log", "info"),
        ),
        outcome=Retry(""),
    ),
    "stop, the mirror going: waited for, not deleted twice": Case(
        obj=restored(**{RESTORED_ANNOTATION: "stop"}),
        workers=(
            worker("w1", mirror=mirror(job(uid=OLD_UID, placed="w1"), uid="m-0", deleting=True)),
        ),
        fresh=True,
        actions=(),
        outcome=Retry(""),
    ),
    "stopped (gone): the annotations go, then it runs again": Case(
        obj=restored(**{RESTORED_ANNOTATION: "stop"}),
        workers=(worker("w1"),),
        actions=(("Annotate", RESTORED_ANNOTATION),),
        outcome=Done(),
    ),
    "restored, backed up before its mirror was recorded: its placement names it, held": Case(
        obj=job(placed="w1", status=RUNNING),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=HELD,
        outcome=Done(),
    ),
    "re-created, not restored (no placement yet): the old one goes, the new one is placed": Case(
        obj=job(),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=(("Delete", "w1", "m-0"), ("Place", "w1", RV)),
        outcome=Retry(""),
    ),
    "re-created and placed, the old one's deletion under way: waited for, not held": Case(
        obj=job(placed="w1"),
        workers=(worker("w1", mirror=OLD_RUN),),
        deleting=frozenset({"m-0"}),
        actions=(),
        outcome=Retry(""),
    ),
    "re-created and placed, the old one going (deletionTimestamp): waited for, not held": Case(
        obj=job(placed="w1"),
        workers=(worker("w1", mirror=mirror(job(uid=OLD_UID), uid="m-0", deleting=True)),),
        actions=(),
        outcome=Retry(""),
    ),
    "a preset placement (no placements history), no record: not restored, the old one goes": Case(
        obj=job(annotations={CLUSTER_ANNOTATION: "w1"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=(("Delete", "w1", "m-0"),),
        outcome=Retry(""),
    ),
    "moved to w2 (run 2): run 1's mirror on w1 is not restored, it goes": Case(
        obj=job(history=("w1", "w2"), placed="w2", status=RUNNING),
        workers=(worker("w1", mirror=OLD_RUN), worker("w2")),
        actions=(("Delete", "w1", "m-0"),),
        outcome=ReadFresh(obj=True),  # then its run 2 mirror on w2, as always
    ),
    "a new run on the same worker (run 2): run 1's mirror is not restored, it goes": Case(
        obj=job(history=("w1", "w1"), placed="w1", status=RUNNING),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=(("Delete", "w1", "m-0"),),
        outcome=Retry(""),
    ),
    "its record names another mirror: not restored, the old one goes": Case(
        obj=job(placed="w1", status=RUNNING, annotations={MIRRORS_ANNOTATION: "1:w1:m-9"}),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=(("Delete", "w1", "m-0"),),
        outcome=Retry(""),
    ),
    "the restored workload deleted: its mirror goes with it": Case(
        obj=job(placed="w1", status=RUNNING, annotations=RECORD, deleting=True),
        workers=(worker("w1", mirror=OLD_RUN),),
        actions=(("Delete", "w1", "m-0"),),
        outcome=Done(),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_restored_workload_waits_for_its_admin(case: Case) -> None:
    plan = decide(snapshot(case.obj, *case.workers, fresh=case.fresh, deleting=case.deleting))
    assert [summary(a) for a in plan.actions] == list(case.actions)
    assert outcome_summary(plan.outcome) == outcome_summary(case.outcome)


def test_the_held_message_names_the_commands_and_is_told_once() -> None:
    plan = decide(snapshot(restored(), worker("w1", mirror=OLD_RUN)))
    (note,) = [a for a in plan.actions if isinstance(a, Annotate)]
    message = note.annotations[RESTORED_HELD_ANNOTATION]
    assert message is not None
    command = f"kubectl annotate -n {NAMESPACE} jobs.batch/{NAME} {RESTORED_ANNOTATION}="
    assert f"{command}adopt --overwrite" in message and f"{command}stop --overwrite" in message
    assert "m-0" in message and OLD_UID in message and "w1" in message
    # Told: the next decision writes nothing, and still holds it.
    again = decide(
        snapshot(restored(**{RESTORED_HELD_ANNOTATION: message}), worker("w1", mirror=OLD_RUN))
    )
    assert again.actions == () and again.outcome == Done()


@given(
    decision=st.one_of(st.none(), st.sampled_from(["adopt", "stop", "", "Adopt"]), st.text()),
    fresh=st.booleans(),
    connected=st.booleans(),
)
def test_a_restored_mirror_is_never_run_again_nor_deleted_unasked(
    decision: str | None, fresh: bool, connected: bool
) -> None:
    annotations = {} if decision is None else {RESTORED_ANNOTATION: decision}
    w1 = worker("w1", mirror=OLD_RUN, connected=connected)
    plan = decide(snapshot(restored(**annotations), w1, fresh=fresh))
    assert not any(isinstance(a, CreateMirror | Place) for a in plan.actions)
    deletes = [a for a in plan.actions if isinstance(a, DeleteMirror)]
    patches = [a for a in plan.actions if isinstance(a, PatchMirror)]
    chosen = (decision or "").strip()
    assert not deletes or (chosen == "stop" and fresh and connected)
    assert not patches or (chosen == "adopt" and fresh and connected)


@pytest.mark.parametrize(
    ("obj", "seen", "expected", "vouched"),
    [
        (restored(), OLD_RUN, True, True),
        (restored(), ADOPTED, False, False),  # its own: followed, not restored
        # No record (backed up young): its placement by jobrelay names it.
        (job(placed="w1"), OLD_RUN, True, True),
        # A preset cluster alone (no placements history): only when an admin vouches.
        (job(annotations={CLUSTER_ANNOTATION: "w1"}), OLD_RUN, False, True),
        # Being deleted (a namesake's predecessor): only when an admin vouches.
        (job(placed="w1"), mirror(job(uid=OLD_UID), uid="m-0", deleting=True), False, True),
        # An earlier run's, or never placed: never, vouched or not.
        (job(history=("w1", "w2"), placed="w2", annotations=RECORD), OLD_RUN, False, False),
        (job(annotations=RECORD), OLD_RUN, False, False),
        # A record naming another mirror: never, vouched or not.
        (job(placed="w1", annotations={MIRRORS_ANNOTATION: "1:w1:m-9"}), OLD_RUN, False, False),
    ],
)
def test_a_restored_mirror_is_the_recorded_one_of_the_current_run(
    obj: JsonObj, seen: JsonObj, expected: bool, vouched: bool
) -> None:
    def restored_there(where: str, *, origin: str = "manager", vouch: bool = False) -> bool:
        return is_restored_mirror(
            obj, where, seen, controller_name="jobrelay.dev/relay", origin=origin, vouched=vouch
        )

    assert restored_there("w1") is expected
    assert restored_there("w1", vouch=True) is vouched
    assert not restored_there("w2", vouch=True)
    assert not restored_there("w1", origin="other", vouch=True)


@given(
    history=st.lists(st.sampled_from(["w1", "w2"]), max_size=3),
    mirror_on=st.sampled_from(["w1", "w2"]),
    mirror_run=st.integers(min_value=1, max_value=3),
    going=st.booleans(),
    tombstoned=st.booleans(),
)
def test_an_unrecorded_mirror_is_held_exactly_when_the_placement_names_it(
    history: list[str], mirror_on: str, mirror_run: int, going: bool, tombstoned: bool
) -> None:
    """No record, no admin's word: an earlier UID's mirror is held iff jobrelay's
    placement names its worker and run and it is not being deleted; otherwise it goes
    (or is waited for), as a namesake's predecessor, and nothing is held."""
    placed = tuple(history)
    obj = job(history=placed, placed=placed[-1], status=RUNNING) if placed else job()
    old = mirror(job(uid=OLD_UID), uid="m-0", run=mirror_run, deleting=tombstoned)
    workers = tuple(
        worker(name, mirror=old if name == mirror_on else None) for name in ("w1", "w2")
    )
    plan = decide(snapshot(obj, *workers, deleting=frozenset({"m-0"} if going else ())))
    held = any(isinstance(a, Annotate) and RESTORED_HELD_ANNOTATION in a.annotations
               for a in plan.actions)  # fmt: skip
    named = bool(placed) and placed[-1] == mirror_on and len(placed) == mirror_run
    assert held is (named and not going and not tombstoned)
    if held:
        assert not any(isinstance(a, CreateMirror | Place | DeleteMirror) for a in plan.actions)
