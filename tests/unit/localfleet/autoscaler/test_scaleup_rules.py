"""The stand-in autoscaler's rules: which requests it answers, how many nodes a request
takes, when it adds them, when it refuses, and which added nodes it scales down."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.localfleet.autoscaler import scaleup_rules as rules
from jobrelay.localfleet.autoscaler.scaleup_rules import ScaleUpSettings, WorkerNodes
from jobrelay.vocabulary import provisioning_api as api

CREATED = datetime.datetime(2026, 11, 29, 10, 0, 0, tzinfo=datetime.UTC)
SETTINGS = ScaleUpSettings(delay_seconds=20, max_nodes=4, cpu="16", memory="64Gi")
NODE = SETTINGS.node_resources()
NO_NODES = WorkerNodes()


def template(cpu: str = "12", memory: str = "8Gi") -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"template": {"spec": {"containers": [container]}}}


def request(
    count: int = 1,
    class_name: str = api.BEST_EFFORT_ATOMIC_SCALE_UP,
    conditions: list[dict[str, str]] | None = None,
    parameters: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "ns", "uid": "u1",
                     "creationTimestamp": "2026-11-29T10:00:00Z"},
        "spec": {
            "provisioningClassName": class_name,
            "podSets": [{"podTemplateRef": {"name": "t"}, "count": count}],
            **({"parameters": parameters} if parameters else {}),
        },
        "status": {"conditions": conditions or []},
    }  # fmt: skip


def step(
    obj: dict[str, Any],
    *,
    after: float = 30,
    nodes: WorkerNodes = NO_NODES,
    settings: ScaleUpSettings = SETTINGS,
    templates: dict[str, Any] | None = None,
) -> rules.ScaleUpStep:
    found = {"t": template()} if templates is None else templates
    now = CREATED + datetime.timedelta(seconds=after)
    return rules.next_scaleup_step(settings, obj, found, nodes, now)


def true_of(result: rules.ScaleUpStep) -> dict[str, str]:
    """The conditions set True, with their reasons."""
    return {c.type: c.reason for c in result.conditions or () if c.status == "True"}


def test_before_the_delay_it_is_accepted_and_looked_at_again_when_the_delay_is_over() -> None:
    result = step(request(), after=5)
    assert true_of(result) == {api.ACCEPTED: "Accepted"}
    assert result.add_nodes == 0 and result.recheck_after == 15


def test_after_the_delay_it_adds_the_nodes_then_waits_for_them_ready_then_is_provisioned() -> None:
    adding = step(request(count=3))  # 12 CPUs a pod: one pod a node
    assert adding.add_nodes == 3 and api.PROVISIONED not in true_of(adding)
    waiting = step(request(count=3), nodes=WorkerNodes(3, 3, 1))
    assert waiting.add_nodes == 0 and waiting.recheck_after == rules.RECHECK_SECONDS
    done = step(request(count=3), nodes=WorkerNodes(3, 3, 3))
    assert true_of(done) == {api.ACCEPTED: "Accepted", api.PROVISIONED: "Provisioned"}
    assert done.add_nodes == 0 and done.recheck_after is None


@pytest.mark.parametrize(
    ("settings", "count", "nodes", "reason"),
    [
        (ScaleUpSettings(refuse="no quota in the zone"), 1, WorkerNodes(), rules.REFUSED),
        (SETTINGS, 5, WorkerNodes(), rules.MAX_REACHED),
        # Three added for others already: two more would make five.
        (SETTINGS, 2, WorkerNodes(added_in_all=3), rules.MAX_REACHED),
        (ScaleUpSettings(cpu="8"), 1, WorkerNodes(), rules.TOO_LARGE),
    ],
)
def test_refusals_are_failed_with_a_reason(
    settings: ScaleUpSettings, count: int, nodes: WorkerNodes, reason: str
) -> None:
    result = step(request(count=count), nodes=nodes, settings=settings)
    assert true_of(result) == {api.ACCEPTED: "Accepted", api.FAILED: reason}
    assert result.add_nodes == 0
    if reason == rules.REFUSED:
        assert "no quota in the zone" in {c.message for c in result.conditions or ()}


def test_its_own_nodes_count_towards_the_request_not_against_the_maximum() -> None:
    assert step(request(count=4), nodes=WorkerNodes(4, 4, 4)).conditions is not None
    assert api.PROVISIONED in true_of(step(request(count=4), nodes=WorkerNodes(4, 4, 4)))


def test_valid_until_seconds_shorter_than_the_delay_fails_it_once_passed() -> None:
    obj = request(parameters={api.VALID_UNTIL_SECONDS: "10"})
    assert step(obj, after=4).recheck_after == 6
    assert true_of(step(obj, after=11))[api.FAILED] == rules.EXPIRED


@pytest.mark.parametrize(
    "conditions",
    [
        [{"type": api.PROVISIONED, "status": "True"}],
        [{"type": api.FAILED, "status": "True"}],
        [{"type": api.BOOKING_EXPIRED, "status": "True"}],
    ],
)
def test_a_settled_request_is_left_alone(conditions: list[dict[str, str]]) -> None:
    assert step(request(conditions=conditions)) == rules.ScaleUpStep()


def test_other_classes_are_left_alone_as_cluster_autoscaler_leaves_them() -> None:
    assert step(request(class_name="queued-provisioning.gke.io")) == rules.ScaleUpStep()


def test_a_missing_template_is_not_accepted_yet_and_looked_at_again() -> None:
    result = step(request(), templates={})
    assert [(c.type, c.status, c.reason) for c in result.conditions or ()] == [
        (api.ACCEPTED, "False", rules.TEMPLATE_MISSING)
    ]
    assert result.recheck_after == rules.RECHECK_SECONDS


def test_check_capacity_answers_from_the_nodes_there_and_adds_none() -> None:
    obj = request(count=2, class_name=api.CHECK_CAPACITY)
    big = WorkerNodes(allocatable=(NODE, NODE))
    small = WorkerNodes(allocatable=({"cpu": 8000, "memory": 2**35, "pods": 110},) * 4)
    assert true_of(step(obj, nodes=big))[api.PROVISIONED] == rules.CAPACITY_FOUND
    refused = step(obj, nodes=small)
    assert api.PROVISIONED not in true_of(refused) and refused.add_nodes == 0
    answered = request(class_name=api.CHECK_CAPACITY,
                       conditions=[{"type": api.PROVISIONED, "status": "False"}])  # fmt: skip
    assert step(answered, nodes=big) == rules.ScaleUpStep()


@pytest.mark.parametrize(
    ("pod_sets", "needed"),
    [
        ([({"cpu": 12000, "pods": 1}, 3)], 3),
        ([({"cpu": 4000, "pods": 1}, 9)], 3),
        # The second set fills what the first left: 12 + 4 on one node.
        ([({"cpu": 12000, "pods": 1}, 2), ({"cpu": 4000, "pods": 1}, 2)], 2),
        ([({"cpu": 1, "pods": 1}, 111)], 2),  # 110 pods a node
    ],
)
def test_nodes_needed(pod_sets: list[tuple[dict[str, int], int]], needed: int) -> None:
    assert rules.nodes_needed(pod_sets, NODE, limit=10) == needed


def test_nodes_needed_stops_counting_past_the_limit_and_names_a_pod_too_large() -> None:
    assert rules.nodes_needed([({"cpu": 16000, "pods": 1}, 2**31)], NODE, limit=4) == 5
    with pytest.raises(ValueError, match="asks for 17 cpu; a node has 16"):
        rules.nodes_needed([({"cpu": 17000, "pods": 1}, 1)], NODE, limit=4)


@given(
    sets=st.lists(
        st.tuples(st.integers(1, 16000), st.integers(0, 2**36), st.integers(1, 40)),
        min_size=1, max_size=4,
    )
)  # fmt: skip
def test_nodes_needed_is_enough_and_never_more_than_one_pod_a_node(
    sets: list[tuple[int, int, int]],
) -> None:
    pod_sets = [({"cpu": cpu, "memory": memory, "pods": 1}, count) for cpu, memory, count in sets]
    try:
        needed = rules.nodes_needed(pod_sets, NODE, limit=1000)
    except ValueError:
        assert any(memory > NODE["memory"] for _cpu, memory, _count in sets)
        return
    pods = sum(count for _cpu, _memory, count in sets)
    assert 1 <= needed <= pods
    assert rules._fits_nodes(pod_sets, [NODE] * needed)
    cpu = sum(c * n for c, _m, n in sets)
    assert needed >= -(-cpu // NODE["cpu"])  # never fewer than the CPU alone takes


def test_conditions_are_merged_keeping_the_transition_time_while_the_status_holds() -> None:
    stored = {"status": {"conditions": [
        {"type": api.ACCEPTED, "status": "True", "reason": "Accepted", "message": "",
         "lastTransitionTime": "T0"},
        {"type": "Other", "status": "True", "reason": "X", "message": "", "lastTransitionTime": "T0"},
    ]}}  # fmt: skip
    wanted = (
        api.RequestCondition(api.ACCEPTED, "True", "Accepted", "took it"),
        api.RequestCondition(api.PROVISIONED, "True", "Provisioned", "2 nodes"),
    )
    merged = {c["type"]: c for c in rules.merged_conditions(stored, wanted, "T1")}
    assert merged[api.ACCEPTED]["lastTransitionTime"] == "T0"
    assert merged[api.ACCEPTED]["message"] == "took it"
    assert merged[api.PROVISIONED]["lastTransitionTime"] == "T1"
    assert merged["Other"]["reason"] == "X"


def test_new_node_indices_fill_the_gaps_first() -> None:
    assert rules.new_node_indices([1, 3], 3) == [2, 4, 5]
    assert rules.new_node_indices([], 0) == []


def test_nodes_of_requests_gone_are_removed_unless_a_pod_is_on_them() -> None:
    added = {"w-scaleup-1": "u1", "w-scaleup-2": "u2", "w-scaleup-3": "u2"}
    assert rules.nodes_to_remove(added, ["u1"], ["w-scaleup-3"]) == ["w-scaleup-2"]


def provisioned_at(seconds: int) -> dict[str, Any]:
    at = (CREATED + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    done = {"type": api.PROVISIONED, "status": "True", "reason": "Provisioned", "message": "",
            "lastTransitionTime": at}  # fmt: skip
    return request(conditions=[done])


def test_a_booking_no_pod_consumes_in_time_expires_and_a_consumed_one_is_kept() -> None:
    booked = dataclasses.replace(SETTINGS, booking_seconds=60)
    assert step(provisioned_at(20), after=50, settings=booked).recheck_after == 30
    expired = step(provisioned_at(20), after=81, settings=booked)
    assert true_of(expired) == {api.BOOKING_EXPIRED: rules.EXPIRED_BOOKING}
    consumed = WorkerNodes(consumed=True)
    assert (
        step(provisioned_at(20), after=81, settings=booked, nodes=consumed) == rules.ScaleUpStep()
    )
    # Without a booking time, kept for ever (the default).
    assert step(provisioned_at(20), after=10_000) == rules.ScaleUpStep()


@pytest.mark.parametrize(
    ("data", "refuse"),
    [
        (None, None),  # no ConfigMap
        ({}, None),
        ({"other": "x"}, None),
        ({"refuse": "no 16-CPU nodes left"}, "no 16-CPU nodes left"),
        ({"refuse": "two\nlines\t here"}, "two lines here"),
        ({"refuse": ""}, ""),  # told to refuse, with the stand-in's own words
        ({"refuse": "x" * 1000}, "x" * rules.REFUSAL_MAX),
    ],
)
def test_told_to_refuse_by_its_configmap(data: dict[str, Any] | None, refuse: str | None) -> None:
    assert rules.told_to_refuse(ScaleUpSettings(), data).refuse == refuse


def test_a_refusal_told_while_it_runs_fails_a_request_not_provisioned_yet() -> None:
    told = rules.told_to_refuse(SETTINGS, {"refuse": "zone full"})
    # During the delay (accepted, nodes not added yet): refused at its next look.
    refused = step(request(), after=5, settings=told)
    assert true_of(refused).get(api.FAILED) == rules.REFUSED
    assert api.PROVISIONED not in true_of(refused)
    assert [c.message for c in refused.conditions or () if c.type == api.FAILED] == ["zone full"]
    assert not refused.add_nodes
    # Provisioned already: left as it is.
    provisioned = [{"type": api.PROVISIONED, "status": "True", "reason": "Provisioned"}]
    assert not true_of(step(request(conditions=provisioned), settings=told)).get(api.FAILED)
