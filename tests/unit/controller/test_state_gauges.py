"""The state gauges a controller shows at each scrape (controller/state_gauges.py)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.unit.admission.support import figures
from tests.unit.controller.builders import COMPLETE, JOB, RUNNING, job

from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.queue_model import QueueSpec
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.controller.state_gauges import (
    StateGauges,
    capacity_figures,
    held_reason,
    labelled_resources,
)
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.queueing import WorkQueue
from jobrelay.observe.metrics import Metrics
from jobrelay.placement.capacity import Node, WorkerCapacity


class _Objects:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.resource_version = "1234"

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return [(f"ns/{o['metadata']['name']}", o) for o in self.objects]


class _Runtime:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.kind = JOB
        self.objects = _Objects(objects)


class _Memory:
    def __init__(self, held: dict[WorkloadKey, str]) -> None:
        self._held = held
        self.queues = QueueMemory()

    def held_keys(self) -> list[WorkloadKey]:
        return list(self._held)

    def held(self, key: WorkloadKey) -> str | None:
        return self._held.get(key)


class _Pool:
    def views(self) -> list[Any]:
        return []


def _named(obj: dict[str, Any], name: str, rv: str = "1") -> dict[str, Any]:
    obj["metadata"] = {**obj["metadata"], "name": name, "resourceVersion": rv}
    return obj


def _gauges(*, leader: bool, queued: int = 3) -> tuple[StateGauges, _Runtime]:
    queue: WorkQueue[WorkloadKey] = WorkQueue()
    for n in range(queued):
        queue.add(WorkloadKey(JOB.name, f"ns/job-{n}"))
    runtime = _Runtime(
        [
            _named(job(), "a"),
            _named(job(placed="w1", history=("w1",), status=RUNNING), "b"),
            _named(job(placed="w1", history=("w1",), status=COMPLETE), "c"),
        ]
    )
    held = {WorkloadKey(JOB.name, "ns/a"): "NeverFits|w1:resources:#"}
    gauges = StateGauges(
        kinds={JOB.name: runtime},  # type: ignore[dict-item]
        queue=queue,
        memory=_Memory(held),  # type: ignore[arg-type]
        pool=_Pool(),
        leader=lambda: leader,
        ready=lambda: True,
    )
    return gauges, runtime


def _samples(gauges: StateGauges) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = Metrics(gauges).render().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_standby_with_a_full_queue_reports_no_queue() -> None:
    """Issue 22: the standby's queue fills from informer events and is never drained;
    reported, it fired JobrelayQueueBackingUp on every 2-replica install."""
    gauges, _ = _gauges(leader=False)
    seen = _samples(gauges)
    assert seen[("jobrelay_leader", frozenset())] == 0
    assert not [name for name, _ in seen if name.startswith("jobrelay_workqueue_")]
    assert not [name for name, _ in seen if name == "jobrelay_held_workloads"]


def test_the_leader_reports_its_queue_held_workloads_and_states() -> None:
    gauges, _ = _gauges(leader=True)
    seen = _samples(gauges)
    assert seen[("jobrelay_workqueue_depth", frozenset())] == 3
    held = frozenset({("kind", JOB.name), ("reason", "NeverFits")})
    assert seen[("jobrelay_held_workloads", held)] == 1
    not_placed = frozenset({("kind", JOB.name), ("reason", "NotPlaced")})
    assert seen[("jobrelay_held_workloads", not_placed)] == 0
    for state, count in (("Pending", 1), ("Running", 1), ("Complete", 1), ("Failed", 0)):
        labels = frozenset({("kind", JOB.name), ("state", state)})
        assert seen[("jobrelay_workloads", labels)] == count, state


def test_states_follow_new_versions_of_objects() -> None:
    gauges, runtime = _gauges(leader=True)
    gauges()
    runtime.objects.objects[0] = _named(job(placed="w1", history=("w1",), status=COMPLETE),
                                        "a", rv="2")  # fmt: skip
    counts = gauges().workloads
    assert counts[JOB.name, "Pending"] == 0
    assert counts[JOB.name, "Complete"] == 2


def test_each_kinds_cache_version_is_shown_on_leader_and_standby_alike() -> None:
    """What the end-to-end tests' settled() barrier waits on (tests/e2e/support.py)."""
    for leader in (True, False):
        gauges, runtime = _gauges(leader=leader)
        seen = _samples(gauges)
        assert seen[("jobrelay_cache_resource_version", frozenset({("kind", JOB.name)}))] == 1234
        runtime.objects.resource_version = "not-a-revision"  # opaque, as Kubernetes allows
        assert not [n for n, _ in _samples(gauges) if n == "jobrelay_cache_resource_version"]
        runtime.objects.resource_version = ""  # not listed yet
        assert gauges().cache_versions == {}


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        ("NotPlaced|w1:resources:cpu", "NotPlaced"),
        ("NeverFits|w1:resources:cpu", "NeverFits"),
        ("something else", "NotPlaced"),
    ],
)
def test_held_reasons_are_the_events_reasons(signature: str, reason: str) -> None:
    assert held_reason(signature) == reason


def test_capacity_is_summed_over_nodes_in_base_units() -> None:
    nodes = (
        Node("n1", {"cpu": 4000, "memory": 2**33, "pods": 110}, {"cpu": 1500, "pods": 2}),
        Node("n2", {"cpu": 4000, "memory": 2**33, "pods": 110}, {"memory": 2**30}),
    )
    figures = capacity_figures("w1", WorkerCapacity(nodes))
    assert figures.allocatable == {"cpu": 8.0, "memory": 2.0**34, "pods": 220.0}
    assert figures.requested == {"cpu": 1.5, "pods": 2.0, "memory": 2.0**30}


def test_resources_no_queue_quota_names_are_one_other_series() -> None:
    """Issue 33: a tenant's made-up extended resources made a series each."""
    leader, _ = _gauges(leader=True)
    made_up = {f"example.com/r{n}": 1 for n in range(500)}
    leader._memory.queues.last = AdmissionPlan(
        figures={"team-a": figures(demand={"cpu": 2000, "example.com/gpu": 3, **made_up})},
        fairness_error=0.0,
    )
    leader._queue_specs = lambda: {
        "team-a": QueueSpec("team-a", nominal={"cpu": 4000, "example.com/gpu": 4})
    }
    queue = ("queue", "team-a")
    demand = {
        dict(labels)["resource"]: value
        for (name, labels), value in _samples(leader).items()
        if name == "jobrelay_queue_demand" and queue in labels
    }
    assert demand == {"cpu": 2.0, "example.com/gpu": 3, "other": 500}
    # Without a spec (a queue just deleted), CPU and memory keep their names.
    assert labelled_resources({"cpu": 500, "memory": 7, "x/y": 2}, ()) == {
        "cpu": 0.5, "memory": 7.0, "other": 2.0,
    }  # fmt: skip


def test_queue_gauges_come_from_the_last_admission_plan_in_base_units() -> None:
    leader, _ = _gauges(leader=True)
    planned = leader._memory.queues
    planned.last = AdmissionPlan(figures={"team-a": figures()}, fairness_error=0.125)
    seen = _samples(leader)
    queue = ("queue", "team-a")
    assert seen[("jobrelay_queue_fair_share", frozenset({queue}))] == pytest.approx(0.2500004)
    assert seen[("jobrelay_queue_admitted", frozenset({queue}))] == 10
    # placement's milli-CPU are cores on the gauge, bytes stay bytes.
    assert seen[("jobrelay_queue_usage", frozenset({queue, ("resource", "cpu")}))] == 40
    assert seen[("jobrelay_queue_demand", frozenset({queue, ("resource", "cpu")}))] == 52.5
    assert seen[("jobrelay_queue_usage", frozenset({queue, ("resource", "memory")}))] == 3 * 2**30
    assert seen[("jobrelay_fairness_error", frozenset())] == 0.125
    # Before the first plan, a plan without queues, and on a standby: no queue gauges.
    planned.last = None
    assert not [n for n, _ in _samples(leader) if n.startswith("jobrelay_queue_")]
    planned.last = AdmissionPlan()
    assert not [
        n for n, _ in _samples(leader) if n.startswith(("jobrelay_queue_", "jobrelay_fair"))
    ]
    standby, _ = _gauges(leader=False)
    standby._memory.queues.last = AdmissionPlan(figures={"team-a": figures()}, fairness_error=0.1)
    assert not [n for n, _ in _samples(standby) if "queue_" in n or "fairness" in n]
