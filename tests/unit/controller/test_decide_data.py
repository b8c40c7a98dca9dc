"""decide() when data decides the place: a Job mounting PersistentVolumeClaim ``data`` goes
only where it is Bound, and is held with every worker explained where it is not."""

from __future__ import annotations

import dataclasses

from tests.unit.controller.builders import NAMESPACE, job, snapshot, worker
from tests.unit.placement.support import node

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import Annotate, Place, Plan, RecordEvent, RequeueAfter
from jobrelay.controller.relay.snapshot import WorkerSnapshot
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.claims import WorkerClaims
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

ROOMY = WorkerCapacity((node("n1", "16", "64Gi"),))
BUSY = WorkerCapacity((node("n1", "16", "64Gi", used={"cpu": "15"}),))


def mounting(claim: str = "data") -> JsonObj:
    obj = job()
    spec = obj["spec"]["template"]["spec"]
    spec["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    spec["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    return obj


def with_claims(name: str, capacity: WorkerCapacity, claims: WorkerClaims) -> WorkerSnapshot:
    return dataclasses.replace(worker(name, capacity=capacity), claims=claims)


def bound(*names: str) -> WorkerClaims:
    return WorkerClaims(True, {NAMESPACE: dict.fromkeys(names, "Bound")})


def placed_on(p: Plan) -> str | None:
    return next((a.cluster for a in p.actions if isinstance(a, Place)), None)


def test_it_goes_where_its_data_is_though_the_other_worker_is_emptier() -> None:
    p = decide(snapshot(mounting(), with_claims("worker-1", ROOMY, bound()),
                        with_claims("worker-2", BUSY, bound("data"))))  # fmt: skip
    assert placed_on(p) == "worker-2"


def test_no_worker_has_the_data_it_is_held_and_each_worker_is_named() -> None:
    pending = WorkerClaims(True, {NAMESPACE: {"data": "Pending"}})
    p = decide(snapshot(mounting(), with_claims("worker-1", ROOMY, pending),
                        with_claims("worker-2", ROOMY, bound("other"))))  # fmt: skip
    assert placed_on(p) is None and isinstance(p.outcome, RequeueAfter)
    (event,) = [a for a in p.actions if isinstance(a, RecordEvent)]
    assert event.reason == "NotPlaced"  # data may come: never NeverFits
    assert (
        "worker-1: PersistentVolumeClaim data in team-a is Pending; "
        "worker-2: no PersistentVolumeClaim data in team-a"
    ) in event.message
    (note,) = [a for a in p.actions if isinstance(a, Annotate)]
    assert note.annotations[NOT_PLACED_ANNOTATION] == (
        "NotPlaced: worker-1: PersistentVolumeClaim data in team-a is Pending; "
        "worker-2: no PersistentVolumeClaim data in team-a"
    )


def test_while_the_claims_are_read_nothing_is_told() -> None:
    p = decide(snapshot(mounting(), with_claims("worker-1", ROOMY, WorkerClaims(synced=False))))
    assert placed_on(p) is None and isinstance(p.outcome, RequeueAfter)
    assert not [a for a in p.actions if isinstance(a, RecordEvent)]


def test_a_worker_whose_claims_cannot_be_read_is_said_so_never_used_blind() -> None:
    unreadable = WorkerClaims(unreadable="list persistentvolumeclaims: Forbidden")
    p = decide(snapshot(mounting(), with_claims("worker-1", ROOMY, unreadable)))
    assert placed_on(p) is None
    (event,) = [a for a in p.actions if isinstance(a, RecordEvent)]
    assert "worker-1: its PersistentVolumeClaims cannot be read" in event.message


def test_a_job_without_claims_goes_anywhere() -> None:
    obj = job()
    unreadable = WorkerClaims(unreadable="list persistentvolumeclaims: Forbidden")
    assert (
        placed_on(decide(snapshot(obj, with_claims("worker-1", ROOMY, unreadable)))) == "worker-1"
    )
