"""Which lane a watch event goes to, and which keys a resync looks at."""

from __future__ import annotations

import pytest
from tests.unit.controller.builders import COMPLETE, FAILED, JOB, RUNNING, job

from jobrelay.controller.lanes import lane_of_change, needs_resync, resync_keys
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.queueing import Lane
from jobrelay.vocabulary.json_types import JsonObj

UNPLACED = job()
PLACED = job(placed="w1", history=("w1",), status=RUNNING)
MOVED = job(placed="w2", history=("w1", "w2"), status=RUNNING)
RESUMED = {**PLACED, "metadata": {**PLACED["metadata"], "generation": 2}}
SUSPENDED = job(suspend=True)


def test_the_echo_of_a_placement_made_here_does_not_hold_its_key_in_fresh() -> None:
    # The reconcile that placed it creates its mirror: the echo is a look only.
    assert lane_of_change(JOB, UNPLACED, PLACED, mirrored=False, placed_here="w1") is Lane.STATUS
    # Placed elsewhere than this process placed it (another replica, a user): work.
    assert lane_of_change(JOB, UNPLACED, PLACED, mirrored=False, placed_here="w2") is Lane.FRESH
    # A spec change with it is work, whoever placed it.
    assert lane_of_change(JOB, PLACED, RESUMED, mirrored=True, placed_here="w1") is Lane.FRESH


@pytest.mark.parametrize(
    ("old", "new", "mirrored", "lane"),
    [
        pytest.param(None, UNPLACED, False, Lane.FRESH, id="created: to place"),
        pytest.param(None, SUSPENDED, False, Lane.STATUS, id="created suspended: a status only"),
        pytest.param(SUSPENDED, UNPLACED, False, Lane.FRESH, id="resumed: to place"),
        pytest.param(UNPLACED, UNPLACED, False, Lane.FRESH, id="still unplaced"),
        pytest.param(UNPLACED, PLACED, False, Lane.FRESH, id="just placed: mirror to create"),
        pytest.param(PLACED, MOVED, True, Lane.FRESH, id="moved: mirror to create"),
        pytest.param(PLACED, RESUMED, True, Lane.FRESH, id="spec changed: to the mirror"),
        pytest.param(PLACED, PLACED, False, Lane.FRESH, id="placed, no mirror anywhere"),
        pytest.param(PLACED, PLACED, True, Lane.STATUS, id="a status write of a running one"),
        pytest.param(None, PLACED, False, Lane.STATUS, id="listed placed: mirror caches may lag"),
        pytest.param(None, PLACED, True, Lane.STATUS, id="listed placed with its mirror"),
        pytest.param(PLACED, None, True, Lane.STATUS, id="deleted: mirrors to collect"),
    ],
)
def test_lane_of_change(
    old: JsonObj | None, new: JsonObj | None, mirrored: bool, lane: Lane
) -> None:
    assert lane_of_change(JOB, old, new, mirrored=mirrored) is lane


@pytest.mark.parametrize(
    ("obj", "mirrored", "needed"),
    [
        pytest.param(UNPLACED, False, True, id="unplaced: a placement (held or lost event)"),
        pytest.param(PLACED, False, True, id="placed, no mirror: one to create"),
        pytest.param(PLACED, True, True, id="running: status drift"),
        pytest.param(SUSPENDED, False, False, id="suspended, never placed: waits for an event"),
        pytest.param(SUSPENDED, True, True, id="suspended with a mirror somewhere"),
        pytest.param(
            job(suspend=True, placed="w1", history=("w1",)),
            False,
            True,
            id="suspended after its placement: its mirror is to be there",
        ),
        pytest.param(job(status=COMPLETE), False, False, id="succeeded"),
        pytest.param(job(status=FAILED, placed="w1"), False, False, id="failed"),
        pytest.param(job(status=COMPLETE), True, True, id="finished, mirror kept or left"),
        pytest.param(job(deleting=True), False, True, id="being deleted"),
    ],
)
def test_needs_resync(obj: JsonObj, mirrored: bool, needed: bool) -> None:
    assert needs_resync(JOB, obj, mirrored=mirrored) is needed


def key(name: str) -> WorkloadKey:
    return WorkloadKey(JOB.name, f"team-a/{name}")


def test_resync_keys_are_the_mirrored_and_those_that_may_need_work() -> None:
    objects = [
        (key("held"), JOB, SUSPENDED),
        (key("done"), JOB, job(status=COMPLETE)),
        (key("new"), JOB, UNPLACED),
        (key("running"), JOB, PLACED),
        (key("kept"), JOB, job(status=COMPLETE)),
    ]
    orphan = WorkloadKey("JobSet.v1alpha2.jobset.x-k8s.io", "team-b/gone")
    mirrored = {key("running"), key("kept"), orphan}
    assert resync_keys(objects, mirrored) == {key("new"), key("running"), key("kept"), orphan}


def test_a_resync_over_many_held_jobs_queues_none_of_them() -> None:
    objects = [(key(f"held-{index}"), JOB, SUSPENDED) for index in range(50_000)]
    assert resync_keys(objects, set()) == set()
