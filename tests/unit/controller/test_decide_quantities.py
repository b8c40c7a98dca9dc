"""A pod template asking for a quantity Kubernetes cannot count (``memory: 1e999999``):
the workload is refused with a Warning Event naming the container and the resource,
stays unplaced, and nothing is raised into the reconciler or its held passes."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.unit.controller.builders import JOB, JOBSET, NAMESPACE, job, jobset, snapshot, worker
from tests.unit.controller.test_reconciler import Env, make_env, workers
from tests.unit.placement.support import node

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import Place, Terminal
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.vocabulary.json_types import JsonObj

BIG = WorkerCapacity((node("b1", "16", "64Gi"),))
FULL = WorkerCapacity((node("n1", "4", used={"cpu": "4"}),))
UNUSABLE = ["1e999999", "1e1000000", "9" * 100_000, "-1Gi", "١٢", "1.5.5"]


def asking(memory: str, name: str = "train") -> JsonObj:
    obj = job()
    obj["metadata"]["name"] = name
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1", "memory": memory}}
    return obj


@pytest.mark.parametrize("memory", UNUSABLE, ids=lambda m: m[:12])
def test_an_unusable_quantity_refuses_the_job_and_names_where(memory: str) -> None:
    started = time.perf_counter()
    p = decide(snapshot(asking(memory), worker("w", capacity=BIG)))
    assert time.perf_counter() - started < 1.0  # was 24 s for 1e999999
    assert not [a for a in p.actions if isinstance(a, Place)]
    assert isinstance(p.outcome, Terminal) and p.outcome.reason == "InvalidQuantity"
    assert "container 'main', memory:" in p.outcome.message
    assert "fix it and jobrelay places it" in p.outcome.message
    assert len(p.outcome.message) < 400


def test_a_jobset_names_its_replicated_job() -> None:
    obj = jobset()
    template = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["spec"] = {
        "containers": [{"name": "trainer", "resources": {"limits": {"cpu": "1e30"}}}]
    }
    p = decide(dataclasses.replace(snapshot(obj, worker("w", capacity=BIG)), kind=JOBSET))
    assert isinstance(p.outcome, Terminal) and p.outcome.reason == "InvalidQuantity"
    assert "replicated job 'workers', container 'trainer', cpu: '1e30'" in p.outcome.message


def test_pods_together_beyond_what_kubernetes_counts_are_refused() -> None:
    obj = asking("8Ei")
    spec = obj["spec"]["template"]["spec"]
    spec["containers"].append({"name": "side", "resources": {"requests": {"memory": "8Ei"}}})
    p = decide(snapshot(obj, worker("w", capacity=BIG)))
    assert isinstance(p.outcome, Terminal) and p.outcome.reason == "InvalidQuantity"
    assert "all containers together, memory" in p.outcome.message


# -- the reconciler ---------------------------------------------------------------------


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    (w1,) = workers("w1", capacity_forbidden=False)
    w1.nodes = BIG
    async for value in make_env(w1):
        yield value


def key(name: str) -> WorkloadKey:
    return WorkloadKey(JOB.name, f"{NAMESPACE}/{name}")


def placement(env: Env, name: str) -> Any:
    stored = env.manager.get("jobs", f"{NAMESPACE}/{name}")
    assert stored is not None
    return (stored["metadata"].get("annotations") or {}).get("jobrelay.dev/cluster")


async def test_the_refused_workload_is_told_and_the_others_go_on(env: Env) -> None:
    env.submit(asking("1e1000000", "huge"))  # decimal.Overflow, uncaught, before
    outcome = await env.reconciler.reconcile(key("huge"))
    assert isinstance(outcome, Terminal)
    (event,) = env.events.recorded
    assert (event.name, event.type, event.reason) == ("huge", "Warning", "InvalidQuantity")
    assert "container 'main', memory: '1e1000000'" in event.message
    assert placement(env, "huge") is None
    assert env.workers["w1"].cluster.get("jobs", f"{NAMESPACE}/huge") is None
    env.submit(asking("1Gi", "fine"))
    await env.reconciler.reconcile(key("fine"))
    assert placement(env, "fine") == "w1"


async def test_a_held_workload_changed_to_an_unusable_quantity_is_skipped(env: Env) -> None:
    env.workers["w1"].nodes = FULL
    env.submit(asking("1Gi", "held"))
    await env.reconciler.reconcile(key("held"))
    assert env.reconciler.held() == [key("held")]
    # Edited while held: the runner's held pass reads it again, outside any reconcile.
    changed = asking("1e1000000", "held")
    changed["metadata"]["resourceVersion"] = "2"
    env.submit(changed)
    env.workers["w1"].nodes = BIG
    assert env.reconciler.placeable_held() == []
