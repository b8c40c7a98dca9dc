"""The rules for claiming capacity autoscaled workers can add: the fit to added nodes, the
workers asked, the objects made, and how the race between them settles."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.controller.relay.steps import provisioning as rules
from jobrelay.controller.relay.steps.provisioning import (
    AutoscaledCandidate,
    ProvisioningAnswer,
    ProvisioningState,
)
from jobrelay.placement.workload import PodGroup
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.autoscaling_spec import AddableNodeShape, WorkerAutoscaling

GI = 2**30
GROWS_16 = WorkerAutoscaling((AddableNodeShape("16", "64Gi", count=4),))
GROWS_GPU = WorkerAutoscaling((AddableNodeShape("32", "256Gi", gpu=8, count=1),), max_requests=1)


def pods(cpu: int, count: int = 1, memory: int = GI, gpu: int = 0) -> PodGroup:
    requests = {"cpu": cpu * 1000, "memory": memory, "pods": 1}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    return PodGroup("main", count, requests)


def test_fits_added_nodes_by_resources_and_counts() -> None:
    assert rules.fits_added_nodes([pods(12)], GROWS_16)  # the issue's 12-CPU Job
    assert rules.fits_added_nodes([pods(12, count=4)], GROWS_16)
    assert not rules.fits_added_nodes([pods(12, count=5)], GROWS_16)  # 4 nodes at most
    assert not rules.fits_added_nodes([pods(17)], GROWS_16)
    assert not rules.fits_added_nodes([pods(1, gpu=1)], GROWS_16)
    assert rules.fits_added_nodes([pods(4, count=8, gpu=1)], GROWS_GPU)
    # A second group fills what the first left.
    assert rules.fits_added_nodes([pods(12, count=4), pods(4, count=4)], GROWS_16)
    assert not rules.fits_added_nodes([pods(12, count=4), pods(4, count=5)], GROWS_16)


def test_candidates_are_the_fitting_workers_with_room_in_name_order_up_to_the_limit() -> None:
    workers = [
        AutoscaledCandidate("worker-3", GROWS_16),
        AutoscaledCandidate("worker-2", GROWS_16),
        AutoscaledCandidate("worker-gpu", GROWS_GPU, open_requests=1),  # maxRequests 1
        AutoscaledCandidate("worker-1", GROWS_16, open_requests=9),
    ]
    assert rules.candidate_workers([pods(12)], workers, limit=2) == ("worker-1", "worker-2")
    assert rules.candidate_workers([pods(12)], workers, limit=9) == (
        "worker-1", "worker-2", "worker-3",
    )  # fmt: skip
    assert rules.candidate_workers([pods(17)], workers) == ()
    assert rules.candidate_workers([pods(1, gpu=1)], workers) == ()  # its only worker is full
    assert rules.candidate_workers([pods(12)], workers, limit=0) == ()


def test_the_objects_name_each_other_and_carry_the_workloads_uid() -> None:
    spec = {"spec": {"containers": [{"name": "main", "image": "x"}]}}
    templates, request = rules.provisioning_objects(
        "uid-1", "team-a", [(spec, 1), (spec, 3)], api.BEST_EFFORT_ATOMIC_SCALE_UP
    )
    assert [t["metadata"]["name"] for t in templates] == ["jobrelay-uid-1-0", "jobrelay-uid-1-1"]
    assert all(t["template"] == spec and t["metadata"]["namespace"] == "team-a" for t in templates)
    assert request["metadata"]["name"] == rules.request_name("uid-1") == "jobrelay-uid-1"
    assert request["spec"] == {
        "provisioningClassName": api.BEST_EFFORT_ATOMIC_SCALE_UP,
        "podSets": [{"podTemplateRef": {"name": "jobrelay-uid-1-0"}, "count": 1},
                    {"podTemplateRef": {"name": "jobrelay-uid-1-1"}, "count": 3}],
    }  # fmt: skip
    for made in [*templates, request]:
        assert made["metadata"]["labels"] == {rules.PROVISIONING_FOR_LABEL: "uid-1"}


def condition(
    kind: str, reason: str = "R", message: str = "m", since: str = "T1"
) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": since}  # fmt: skip


def test_answers_are_read_from_the_conditions() -> None:
    assert rules.answer_of({}) == ProvisioningAnswer(ProvisioningState.PENDING)
    accepted = {"status": {"conditions": [condition(api.ACCEPTED)]}}
    assert rules.answer_of(accepted).state is ProvisioningState.PENDING
    provisioned = {"status": {"conditions": [condition(api.PROVISIONED, since="T5")]}}
    assert rules.answer_of(provisioned) == ProvisioningAnswer(
        ProvisioningState.PROVISIONED, since="T5"
    )
    refused = {"status": {"conditions": [
        condition(api.PROVISIONED, since="T5"),
        condition(api.FAILED, "ScaleUpRefused", "no quota in the zone"),
    ]}}  # fmt: skip
    assert rules.answer_of(refused) == ProvisioningAnswer(
        ProvisioningState.GONE, why="ScaleUpRefused: no quota in the zone"
    )
    expired = {"status": {"conditions": [condition(api.BOOKING_EXPIRED, "", "")]}}
    assert rules.answer_of(expired).why == api.BOOKING_EXPIRED


PENDING = ProvisioningAnswer(ProvisioningState.PENDING)


def won(since: str) -> ProvisioningAnswer:
    return ProvisioningAnswer(ProvisioningState.PROVISIONED, since=since)


def gone(why: str) -> ProvisioningAnswer:
    return ProvisioningAnswer(ProvisioningState.GONE, why=why)


def test_the_race_settles_on_the_first_provisioned() -> None:
    outcome = rules.settle_race({"worker-1": PENDING, "worker-2": won("T2"), "worker-3": won("T1")})
    assert outcome == rules.RaceOutcome(winner="worker-3")
    # The same moment: the name decides.
    assert rules.settle_race({"b": won("T1"), "a": won("T1")}).winner == "a"


def test_refusals_hold_the_workload_once_all_went() -> None:
    waiting = rules.settle_race({"worker-1": gone("Refused: no"), "worker-2": PENDING})
    assert waiting == rules.RaceOutcome()
    held = rules.settle_race(
        {"worker-1": gone("Refused: no"), "worker-2": gone("MaxNodesReached: 5")}
    )
    assert held.winner is None
    assert held.held_reason == rules.PROVISIONING_FAILED
    assert held.held_message == "worker-1: Refused: no; worker-2: MaxNodesReached: 5"
    assert rules.settle_race({}) == rules.RaceOutcome()


answers = st.dictionaries(
    st.sampled_from(["w1", "w2", "w3", "w4"]),
    st.one_of(
        st.just(PENDING),
        st.sampled_from(["T1", "T2", "T3"]).map(won),
        st.sampled_from(["a", "b"]).map(gone),
    ),
)


@given(answers)
def test_the_race_places_on_the_earliest_provisioned_and_holds_only_when_all_went(
    found: dict[str, ProvisioningAnswer],
) -> None:
    outcome = rules.settle_race(found)
    won_at = sorted(
        (a.since, n) for n, a in found.items() if a.state is ProvisioningState.PROVISIONED
    )
    assert outcome.winner == (won_at[0][1] if won_at else None)
    every_one_went = bool(found) and all(a.state is ProvisioningState.GONE for a in found.values())
    assert (outcome.held_reason is not None) == every_one_went
    if outcome.held_reason is not None:
        assert all(name in outcome.held_message for name in found)


@given(
    cpu=st.integers(1, 20),
    count=st.integers(1, 6),
    shapes=st.lists(st.tuples(st.integers(1, 32), st.integers(1, 3)), min_size=1, max_size=3),
)
def test_a_fit_never_needs_more_than_the_shapes_hold_and_fewer_pods_fit_too(
    cpu: int, count: int, shapes: list[tuple[int, int]]
) -> None:
    grows = WorkerAutoscaling(tuple(AddableNodeShape(str(c), "64Gi", count=n) for c, n in shapes))
    if rules.fits_added_nodes([pods(cpu, count=count)], grows):
        assert cpu * count <= sum(c * n for c, n in shapes)
        assert rules.fits_added_nodes([pods(cpu, count=count - 1 or 1)], grows)
    elif all(c >= cpu for c, _n in shapes):
        # Every node takes a pod: it fails only for want of nodes.
        assert count > sum(n * (c // cpu) for c, n in shapes)


def test_what_a_worker_says_of_a_refusal_is_one_bounded_line() -> None:
    said = {
        "type": api.FAILED,
        "status": "True",
        "reason": "Quota",
        "message": "a\nb\t" + "x" * 5000,
    }
    answer = rules.answer_of({"status": {"conditions": [said]}})
    assert answer.state is ProvisioningState.GONE
    assert answer.why.startswith("Quota: a b x") and "\n" not in answer.why
    assert len(answer.why) == 300
