"""A finished mirror is kept ``--finished-mirror-ttl`` after its workload finished, then
deleted by one look at the deadline (a RequeueAfter, no polling); sooner when the
management object goes or its own ttlSecondsAfterFinished is shorter. Pure tables,
and properties over any ttl and finish time."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import (
    COMPLETE,
    FAILED,
    JOB,
    KEEP,
    NOW,
    RUNNING,
    SETTINGS,
    job,
    mirror,
    snapshot,
    worker,
)

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import DeleteMirror, Done, Outcome, RequeueAfter
from jobrelay.controller.relay.snapshot import Settings
from jobrelay.kinds.finish_times import finished_for
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.outcome import Lane

DONE = Done()
HOUR = dataclasses.replace(SETTINGS, finished_mirror_ttl=3600.0)
TWENTY = dataclasses.replace(SETTINGS, finished_mirror_ttl=20.0)
KEEP_HOUR = dataclasses.replace(KEEP, finished_mirror_ttl=3600.0)


def _with_ttl(obj: JsonObj, seconds: int) -> JsonObj:
    return {**obj, "spec": {**obj["spec"], "ttlSecondsAfterFinished": seconds}}


@dataclass(frozen=True)
class Case:
    obj: JsonObj | None
    settings: Settings
    # Seconds since it finished (None: the snapshot's own, from the status and NOW).
    finished_for: float | None = None
    failed: bool = False  # the mirror failed (else it completed)
    deleted: bool = False
    outcome: Outcome = DONE


CASES = {
    "finished 5 min ago, ttl 1h: kept, looked at again when the hour is up": Case(
        job(placed="w1", status=COMPLETE),
        HOUR,
        outcome=RequeueAfter(3300.0, Lane.BACKGROUND),
    ),
    "failed 5 min ago, ttl 1h: kept (its logs are what the user wants)": Case(
        job(placed="w1", status=FAILED),
        HOUR,
        failed=True,
        outcome=RequeueAfter(3300.0, Lane.BACKGROUND),
    ),
    "finished 2 h ago, ttl 1h: deleted": Case(
        job(placed="w1", status=COMPLETE),
        HOUR,
        finished_for=7200.0,
        deleted=True,
    ),
    "finished exactly ttl ago: deleted": Case(
        job(placed="w1", status=COMPLETE),
        HOUR,
        finished_for=3600.0,
        deleted=True,
    ),
    "ttl 20s, finished 5 min ago: deleted": Case(
        job(placed="w1", status=COMPLETE),
        TWENTY,
        deleted=True,
    ),
    "ttl 0: deleted at once": Case(job(placed="w1", status=COMPLETE), SETTINGS, deleted=True),
    "its own ttlSecondsAfterFinished (60) is shorter: deleted after 60 s": Case(
        _with_ttl(job(placed="w1", status=COMPLETE), 60),
        HOUR,
        deleted=True,
    ),
    "its own ttlSecondsAfterFinished (600) is shorter: kept until then": Case(
        _with_ttl(job(placed="w1", status=COMPLETE), 600),
        HOUR,
        outcome=RequeueAfter(300.0, Lane.BACKGROUND),
    ),
    "its own ttlSecondsAfterFinished is longer: the setting wins": Case(
        _with_ttl(job(placed="w1", status=COMPLETE), 7200),
        HOUR,
        finished_for=3700.0,
        deleted=True,
    ),
    "--keep-finished-mirrors: kept for ever": Case(job(placed="w1", status=COMPLETE), KEEP_HOUR),
    "--keep-finished-mirrors, own ttl 60 s: not past it": Case(
        _with_ttl(job(placed="w1", status=COMPLETE), 60),
        KEEP_HOUR,
        deleted=True,
    ),
    "a finish time ahead of our clock: kept no longer than the ttl from now": Case(
        job(placed="w1", status=COMPLETE),
        HOUR,
        finished_for=-600.0,
        outcome=RequeueAfter(3600.0, Lane.BACKGROUND),
    ),
    "the management object is being deleted: its kept mirror goes now": Case(
        job(placed="w1", status=COMPLETE, deleting=True),
        HOUR,
        deleted=True,
    ),
    "the management object is gone: its kept mirror goes now": Case(None, HOUR, deleted=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_finished_mirror_is_kept_for_the_ttl(name: str) -> None:
    case = CASES[name]
    made = mirror(job(), status=FAILED if case.failed else COMPLETE)
    s = snapshot(case.obj, worker("w1", mirror=made), settings=case.settings)
    s = dataclasses.replace(
        s,
        finished_for=case.finished_for
        if case.finished_for is not None
        else finished_for(JOB, case.obj, NOW),
    )
    plan = decide(s)
    deletes = [a for a in plan.actions if isinstance(a, DeleteMirror)]
    assert bool(deletes) is case.deleted, plan
    assert plan.outcome == case.outcome


def test_the_deadline_comes_from_the_status_not_from_memory() -> None:
    # A restarted controller reads the same finish time: 12:05 + 1h, from NOW 12:10.
    assert finished_for(JOB, job(status=COMPLETE), NOW) == 300.0
    assert finished_for(JOB, job(status=FAILED), NOW) == 300.0
    assert finished_for(JOB, job(status=RUNNING), NOW) is None
    assert finished_for(JOB, None, NOW) is None


def test_the_mirror_finishing_now_is_kept_and_looked_at_when_the_ttl_is_up() -> None:
    running = job(placed="w1", status=RUNNING)
    s = snapshot(running, worker("w1", mirror=mirror(job(), status=FAILED)), settings=HOUR)
    plan = decide(s)
    assert not [a for a in plan.actions if isinstance(a, DeleteMirror)]
    assert plan.outcome == RequeueAfter(3600.0, Lane.BACKGROUND)


def test_the_mirror_finishing_now_with_ttl_0_is_deleted_at_once() -> None:
    running = job(placed="w1", status=RUNNING)
    s = snapshot(running, worker("w1", mirror=mirror(job(), status=FAILED)), settings=SETTINGS)
    plan = decide(s)
    assert [a.cluster for a in plan.actions if isinstance(a, DeleteMirror)] == ["w1"]
    assert plan.outcome == Done()


def test_no_look_again_when_no_mirror_is_kept() -> None:
    s = snapshot(job(placed="w1", status=COMPLETE), worker("w1"), settings=HOUR)
    s = dataclasses.replace(s, finished_for=10.0)
    assert decide(s).outcome == Done()


@given(
    ttl=st.floats(0, 10 * 86400),
    own=st.none() | st.integers(0, 10 * 86400),
    since=st.floats(-86400, 20 * 86400),
)
def test_never_kept_past_the_ttl_nor_its_own_ttl(ttl: float, own: int | None, since: float) -> None:
    obj = job(placed="w1", status=COMPLETE)
    if own is not None:
        obj = _with_ttl(obj, own)
    s = snapshot(obj, worker("w1", mirror=mirror(job(), status=COMPLETE)),
                 settings=dataclasses.replace(SETTINGS, finished_mirror_ttl=ttl))  # fmt: skip
    plan = decide(dataclasses.replace(s, finished_for=since))
    limit = min(ttl, own) if own is not None else ttl
    deleted = any(isinstance(a, DeleteMirror) for a in plan.actions)
    if isinstance(plan.outcome, RequeueAfter):
        # Kept: looked at again no later than the deadline, and no sooner than needed.
        assert not deleted
        assert 0 < plan.outcome.seconds <= limit
        assert plan.outcome.seconds == pytest.approx(min(limit, limit - since))
    else:
        assert deleted and (since >= limit or limit <= 0)
