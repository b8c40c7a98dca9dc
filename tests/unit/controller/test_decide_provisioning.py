"""decide() with autoscaled workers (issue 37, part 1): a workload that fits no worker now
but fits the nodes an autoscaled worker can add claims them (a ProvisioningRequest on up
to N such workers), waits held naming them, goes to the first that provisions it (the
others' requests deleted in the same plan, its mirror's pods consuming the capacity), is
held with their refusals when all refuse, and leaves no request behind it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.controller.builders import (
    COMPLETE,
    NAME,
    NAMESPACE,
    RUNNING,
    SETTINGS,
    UID,
    job,
    key_of,
    mirror,
    snapshot,
    worker,
)
from tests.unit.controller.test_decide_placement import BIG, SMALL, asking

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    Annotate,
    CreateMirror,
    CreateProvisioning,
    DeleteProvisioning,
    Place,
    Plan,
    RecordEvent,
    RequeueAfter,
    WriteStatus,
)
from jobrelay.controller.relay.snapshot import ProvisioningRequestSeen, Settings, WorkerSnapshot
from jobrelay.controller.relay.steps.claiming_capacity import (
    PROVISIONING_LOOK,
    WAITING_FOR_PROVISIONING,
)
from jobrelay.controller.relay.steps.provisioning import PROVISIONING_FAILED, request_name
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.autoscaling_spec import AddableNodeShape, WorkerAutoscaling
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

GROWS_16 = WorkerAutoscaling((AddableNodeShape("16", "64Gi", count=4),), api.CHECK_CAPACITY)
GROWS_8 = WorkerAutoscaling((AddableNodeShape("8", "32Gi", count=4),))
REQUEST = request_name(UID)
T1, T2 = "2026-03-01T12:05:00Z", "2026-03-01T12:06:00Z"


def big_job(**extra: Any) -> JsonObj:
    return asking("12", **extra)


def answer(state: str, *, reason: str = "", message: str = "", at: str = T1) -> JsonObj:
    """A slim request as the feed keeps it: Pending, Provisioned (at ``at``) or Failed."""
    conditions: list[JsonObj] = []
    if state == "Provisioned":
        conditions.append({"type": api.PROVISIONED, "status": "True", "lastTransitionTime": at})
    elif state == "Failed":
        conditions.append(
            {"type": api.FAILED, "status": "True", "reason": reason, "message": message}
        )
    return {
        "metadata": {"name": REQUEST, "namespace": NAMESPACE},
        "status": {"conditions": conditions},
    }


def seen(state: str = "Pending", *, uid: str = UID, **how: str) -> ProvisioningRequestSeen:
    return ProvisioningRequestSeen(
        name=REQUEST,
        namespace=NAMESPACE,
        workload_uid=uid,
        class_name=api.CHECK_CAPACITY,
        templates=(f"{REQUEST}-0",),
        request=answer(state, **how),
    )


def grows(
    name: str,
    autoscaling: WorkerAutoscaling = GROWS_16,
    *requests: ProvisioningRequestSeen,
    open_requests: int = 0,
    **fields: Any,
) -> WorkerSnapshot:
    """An autoscaled worker whose nodes now are SMALL (4 CPUs each)."""
    return dataclasses.replace(
        worker(name, capacity=fields.pop("capacity", SMALL), **fields),
        autoscaling=autoscaling,
        provisioning=requests,
        open_requests=open_requests or len(requests),
    )


def decided(obj: JsonObj | None, *workers: WorkerSnapshot, **fields: Any) -> Plan:
    return decide(dataclasses.replace(snapshot(obj, *workers), **fields))


def of_type(p: Plan, kind: type[Any]) -> list[Any]:
    return [a for a in p.actions if isinstance(a, kind)]


def test_a_workload_that_fits_only_added_nodes_claims_them_and_waits_told_where() -> None:
    p = decided(big_job(), worker("w-1", capacity=SMALL), grows("w-2"))
    (create,) = of_type(p, CreateProvisioning)
    assert (create.cluster, create.namespace) == ("w-2", NAMESPACE)
    (template,) = create.templates
    request = create.request
    assert request["spec"] == {
        "provisioningClassName": api.CHECK_CAPACITY,
        "podSets": [{"podTemplateRef": {"name": f"{REQUEST}-0"}, "count": 1}],
    }
    for made in (template, request):
        assert made["metadata"]["labels"] == {api.PROVISIONING_FOR_LABEL: UID}
        assert made["metadata"]["annotations"] == {
            api.PROVISIONING_WORKLOAD_ANNOTATION: f"{key_of().kind}:{NAMESPACE}/{NAME}"
        }
    assert template["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "12"
    assert not of_type(p, Place)
    (event,) = of_type(p, RecordEvent)
    assert (event.type, event.reason) == ("Normal", WAITING_FOR_PROVISIONING)
    assert "requested from w-2" in event.message
    (note,) = of_type(p, Annotate)
    assert note.annotations[NOT_PLACED_ANNOTATION].startswith(WAITING_FOR_PROVISIONING)
    assert p.outcome == RequeueAfter(PROVISIONING_LOOK) and p.held


@pytest.mark.parametrize(
    ("workers", "candidates", "asked", "reason"),
    [
        # No autoscaled worker's added nodes fit 12 CPUs on one node: NeverFits, as before.
        ((worker("w-1", capacity=SMALL), grows("w-2", GROWS_8)), 2, [], "NeverFits"),
        # Up to N, in name order.
        ((grows("w-3"), grows("w-2"), grows("w-1")), 2, ["w-1", "w-2"], WAITING_FOR_PROVISIONING),
        ((grows("w-3"), grows("w-2"), grows("w-1")), 1, ["w-1"], WAITING_FOR_PROVISIONING),
        # 0: never asks.
        ((grows("w-1"),), 0, [], "NeverFits"),
        # A worker at its maxRequests is not asked.
        ((grows("w-1", open_requests=10), grows("w-2")), 2, ["w-2"], WAITING_FOR_PROVISIONING),
        # A worker passed over for another reason than the fit (cordoned) is not asked.
        ((grows("w-1", cordoned=True), grows("w-2")), 2, ["w-2"], WAITING_FOR_PROVISIONING),
    ],
)
def test_which_workers_are_asked(
    workers: tuple[WorkerSnapshot, ...], candidates: int, asked: list[str], reason: str
) -> None:
    chosen: Settings = dataclasses.replace(SETTINGS, provisioning_candidates=candidates)
    p = decided(big_job(), *workers, settings=chosen)
    assert [c.cluster for c in of_type(p, CreateProvisioning)] == asked
    assert [e.reason for e in of_type(p, RecordEvent)] == [reason]


def test_pending_requests_are_not_made_again_and_the_wait_is_told_once() -> None:
    workers = (grows("w-1", GROWS_16, seen()), grows("w-2", GROWS_16, seen()))
    p = decided(big_job(), *workers)
    assert not of_type(p, CreateProvisioning) and not of_type(p, Place)
    assert [e.reason for e in of_type(p, RecordEvent)] == [WAITING_FOR_PROVISIONING]
    again = decided(big_job(), *workers, held=p.held)
    assert not again.actions and again.outcome == RequeueAfter(PROVISIONING_LOOK)


def test_the_first_to_provision_wins_and_the_others_go_in_the_same_plan() -> None:
    p = decided(
        big_job(),
        grows("w-1", GROWS_16, seen("Provisioned", at=T2)),
        grows("w-2", GROWS_16, seen("Provisioned", at=T1)),
        grows("w-3", GROWS_16, seen()),
        fresh=True,
    )
    (place,) = of_type(p, Place)
    assert place.cluster == "w-2"
    deletes = of_type(p, DeleteProvisioning)
    assert sorted(d.cluster for d in deletes) == ["w-1", "w-3"]
    assert all(d.templates == (f"{REQUEST}-0",) for d in deletes)
    # After the placement is written: a lost compare-and-swap deletes nothing.
    assert p.actions.index(place) < min(p.actions.index(d) for d in deletes)
    # Its mirror's pods consume the capacity provisioned there.
    (create,) = of_type(p, CreateMirror)
    annotations = create.body["spec"]["template"]["metadata"]["annotations"]
    assert annotations == api.consuming_annotations(REQUEST, api.CHECK_CAPACITY)


def test_a_provisioned_worker_that_may_not_take_it_now_does_not_win() -> None:
    p = decided(
        big_job(),
        grows("w-1", GROWS_16, seen("Provisioned"), cordoned=True),
        grows("w-2", GROWS_16, seen()),
    )
    assert not of_type(p, Place)


def test_every_refusal_holds_it_with_their_reasons_and_nothing_is_asked_again() -> None:
    p = decided(
        big_job(),
        grows("w-1", GROWS_16, seen("Failed", reason="NotProvisioned", message="no quota")),
        grows("w-2", GROWS_16, seen("Failed", reason="MaxNodesReached", message="4 nodes")),
    )
    assert not of_type(p, CreateProvisioning) and not of_type(p, DeleteProvisioning)
    (event,) = of_type(p, RecordEvent)
    assert (event.type, event.reason) == ("Warning", PROVISIONING_FAILED)
    assert "w-1: NotProvisioned: no quota; w-2: MaxNodesReached: 4 nodes" in event.message
    (note,) = of_type(p, Annotate)
    assert note.annotations[NOT_PLACED_ANNOTATION].startswith(PROVISIONING_FAILED)
    assert isinstance(p.outcome, RequeueAfter) and p.held


def test_one_refusal_while_another_is_pending_still_waits() -> None:
    p = decided(
        big_job(),
        grows("w-1", GROWS_16, seen("Failed", reason="NotProvisioned")),
        grows("w-2", GROWS_16, seen()),
    )
    assert [e.reason for e in of_type(p, RecordEvent)] == [WAITING_FOR_PROVISIONING]
    assert "requested from w-2" in of_type(p, RecordEvent)[0].message


def test_placed_where_it_fits_now_its_requests_elsewhere_go() -> None:
    p = decided(big_job(), grows("w-1", GROWS_16, seen()), worker("w-2", capacity=BIG), fresh=True)
    assert [a.cluster for a in of_type(p, Place)] == ["w-2"]
    assert [d.cluster for d in of_type(p, DeleteProvisioning)] == ["w-1"]
    template = of_type(p, CreateMirror)[0].body["spec"]["template"]
    assert "annotations" not in template.get("metadata", {})


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (None, "is gone"),
        (big_job(deleting=True), "is gone"),
        (big_job(placed="w-2", status=COMPLETE), "has finished"),
        (big_job(placed="w-2"), "was placed on w-2"),
    ],
)
def test_requests_never_outlive_their_workload(obj: JsonObj | None, why: str) -> None:
    workers = (
        grows("w-1", GROWS_16, seen()),
        grows("w-2", GROWS_16, seen("Provisioned"), capacity=BIG, mirror=mirror(job(placed="w-2"))),
    )
    p = decided(obj, *workers)
    deletes = of_type(p, DeleteProvisioning)
    expected = ["w-1"] if why.startswith("was placed") else ["w-1", "w-2"]
    assert [d.cluster for d in deletes] == expected
    assert all(why in d.why for d in deletes)


def test_a_request_of_an_earlier_object_of_the_name_goes() -> None:
    p = decided(big_job(), grows("w-1", GROWS_16, seen(uid="uid-0")), worker("w-2", capacity=SMALL))
    (delete,) = of_type(p, DeleteProvisioning)
    assert "earlier object" in delete.why
    # Its answer is not this workload's: a new claim is made in the same decision.
    assert [c.cluster for c in of_type(p, CreateProvisioning)] == ["w-1"]


STATES = st.sampled_from(["none", "Pending", "Provisioned", "Failed"])


@settings(max_examples=150, deadline=None)
@given(st.lists(STATES, min_size=1, max_size=4), st.booleans())
def test_never_two_placements_and_the_winner_keeps_its_request(
    states: list[str], fits_now: bool
) -> None:
    workers = [
        grows(f"w-{i}", GROWS_16, *([] if state == "none" else [seen(state, at=f"T{i}")]))
        for i, state in enumerate(states)
    ]
    if fits_now:
        workers.append(worker("w-big", capacity=BIG))
    p = decided(big_job(), *workers, fresh=True)
    places = of_type(p, Place)
    assert len(places) <= 1
    assert len(of_type(p, CreateMirror)) <= 1
    deleted = {d.cluster for d in of_type(p, DeleteProvisioning)}
    if places:
        assert places[0].cluster not in deleted
        assert not of_type(p, CreateProvisioning)
        # Every other request goes with the placement.
        assert deleted == {w.name for w in workers if w.provisioning} - {places[0].cluster}
    else:
        assert not deleted and not fits_now


def test_added_nodes_seen_before_the_answer_wait_for_it_so_the_pods_consume_it() -> None:
    grown = grows("w-2", GROWS_16, seen(), capacity=BIG)
    p = decided(big_job(), worker("w-1", capacity=SMALL), grown, fresh=True)
    assert not of_type(p, Place) and p.outcome == RequeueAfter(PROVISIONING_LOOK)
    answered = grows("w-2", GROWS_16, seen("Provisioned"), capacity=BIG)
    p = decided(big_job(), worker("w-1", capacity=SMALL), answered, fresh=True)
    assert [a.cluster for a in of_type(p, Place)] == ["w-2"]
    template = of_type(p, CreateMirror)[0].body["spec"]["template"]
    assert template["metadata"]["annotations"][api.CONSUME_ANNOTATION] == REQUEST


def test_the_status_copy_that_finishes_it_deletes_its_requests() -> None:
    done = mirror(job(placed="w-2"), status=COMPLETE)
    workers = (
        grows("w-2", GROWS_16, seen("Provisioned"), capacity=BIG, mirror=done),
        grows("w-3", GROWS_16, seen()),
    )
    p = decided(big_job(placed="w-2", status=RUNNING), *workers)
    assert of_type(p, WriteStatus)
    assert sorted(d.cluster for d in of_type(p, DeleteProvisioning)) == ["w-2", "w-3"]
    whys = {d.cluster: d.why for d in of_type(p, DeleteProvisioning)}
    assert "has finished" in whys["w-2"] and "placed on w-2" in whys["w-3"]
