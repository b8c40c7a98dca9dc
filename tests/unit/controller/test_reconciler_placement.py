"""The reconciler's side of placement: capacity in the snapshot, reservations, held
workloads woken when capacity frees, namespace policies, unschedulable mirrors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.unit.controller.builders import JOB, NAMESPACE, NOW, SETTINGS, job
from tests.unit.controller.fakes import (
    FakeClaimFeed,
    FakeCluster,
    FakeEvents,
    FakeInformer,
    FakePool,
    executor_over,
)
from tests.unit.controller.test_reconciler import KEY, Env, make_env, workers
from tests.unit.placement.support import node
from tests.unit.placement.test_tracker_hops import (
    NS,
    RAY_CLUSTER,
    RAYCLUSTER,
    RAYJOB_M,
    T1,
    feed_hop,
    feed_pod,
    made,
    pod,
)

from jobrelay.controller.relay.admission import Admission
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.reconciler import KindRuntime, Reconciler
from jobrelay.controller.relay.snapshot import WorkerSnapshot, placement_cluster
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.catalog import dedicated_by_kind
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.filters.state import Connected
from jobrelay.placement.model import Request
from jobrelay.placement.tracker import OwnedPods
from jobrelay.placement.workload import Workload
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

FULL = WorkerCapacity((node("n1", "4", used={"cpu": "4"}),))
FREE = WorkerCapacity((node("n1", "4"),))


def asking(cpu: str, name: str = "train") -> JsonObj:
    obj = job()
    obj["metadata"]["name"] = name
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return obj


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    (w1,) = workers("w1", capacity_forbidden=False)
    w1.nodes = FULL
    async for value in make_env(w1):
        yield value


def annotations(env: Env) -> dict[str, str]:
    stored = env.stored()
    assert stored is not None
    return dict(stored["metadata"].get("annotations") or {})


async def test_a_held_workload_is_told_once_and_woken_when_capacity_frees(env: Env) -> None:
    env.submit(asking("1"))
    await env.reconcile()
    assert env.placement() is None
    assert env.events.reasons() == ["NotPlaced"]
    assert annotations(env)[NOT_PLACED_ANNOTATION].startswith("NotPlaced: w1: no node has")
    assert env.reconciler.held() == [KEY]
    assert env.reconciler.placeable_held() == []
    env.catch_up()
    await env.reconcile()  # the same reason: not told again
    assert env.events.reasons() == ["NotPlaced"]
    env.workers["w1"].nodes = FREE
    assert env.reconciler.placeable_held() == [KEY]
    await env.reconcile()
    assert env.placement() == "w1"
    assert NOT_PLACED_ANNOTATION not in annotations(env)
    assert env.reconciler.held() == []


async def test_placements_reserve_their_pods_until_the_worker_binds_them(env: Env) -> None:
    env.workers["w1"].nodes = FREE
    reconciler = env.reconciler
    env.submit(asking("3", "first"))
    await reconciler.reconcile(WorkloadKey(JOB.name, f"{NAMESPACE}/first"))
    env.submit(asking("3", "second"))
    second = WorkloadKey(JOB.name, f"{NAMESPACE}/second")
    await reconciler.reconcile(second)
    # The worker shows nothing bound yet, but the first Job's pod has its room.
    assert reconciler.held() == [second]
    # Once the worker has bound it, the node's own sums count it instead.
    env.workers["w1"].pods[(NAMESPACE, "first")] = OwnedPods(total=1, bound=1, started=True)
    env.later(1.0)  # reservations are looked at again when they change or a second passes
    assert env.memory.reserved_on(env.workers["w1"]) == ()  # type: ignore[arg-type]


async def test_a_namespace_policy_holds_then_lets_go(env: Env) -> None:
    env.workers["w1"].nodes = FREE
    env.reconciler.policy_changed(NAMESPACE, {"jobrelay.dev/clusters": "w9"})
    env.submit(asking("1"))
    await env.reconcile()
    assert env.placement() is None
    assert "w1: excluded by namespace policy" in annotations(env)[NOT_PLACED_ANNOTATION]
    assert env.reconciler.placeable_held() == []
    env.reconciler.policy_changed(NAMESPACE, {})
    assert env.reconciler.placeable_held() == [KEY]
    env.catch_up()
    await env.reconcile()
    assert env.placement() == "w1"


async def test_mirrors_with_unschedulable_pods_are_found(env: Env) -> None:
    w1 = env.workers["w1"]
    w1.nodes = FREE
    env.submit(asking("1"))
    await env.reconcile()
    env.catch_up()
    mirror = w1.mirror(KEY)
    assert mirror is not None

    def pod(name: str, uid: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": NAMESPACE,
                             "labels": {"batch.kubernetes.io/job-name": "train",
                                        "batch.kubernetes.io/controller-uid": uid}},
                "requests": (), "unschedulableSince": "2026-03-01T12:00:00Z"}  # fmt: skip

    # A namesake pod (the mirror's name, another owner UID) is nobody's.
    w1.tracker.set_pod(f"{NAMESPACE}/train-fake", pod("train-fake", "someone-else"))
    assert env.reconciler.unschedulable() == []
    w1.tracker.set_pod(f"{NAMESPACE}/train-abc", pod("train-abc", mirror["metadata"]["uid"]))
    assert env.reconciler.unschedulable() == [KEY]


@pytest.mark.parametrize("ours", [True, False], ids=["its RayCluster", "a namesake's"])
async def test_a_rayjobs_pods_are_found_through_the_raycluster_it_controls(ours: bool) -> None:
    """A RayJob's pods are its RayCluster's (and its submitter Job's): one that no node
    takes brings the RayJob to the pending timeout, unless that RayCluster is someone
    else's of the same name."""
    rayjob = dedicated_by_kind("RayJob")
    assert rayjob is not None
    (w1,) = workers("w1")
    manager = FakeCluster("manager")
    client = manager.client()
    pool = FakePool(w1)
    memory = RelayMemory()
    reconciler = Reconciler(
        {rayjob.name: KindRuntime(rayjob, FakeInformer())},  # type: ignore[arg-type]
        pool,  # type: ignore[arg-type]
        executor_over(client, pool, FakeEvents(), memory=memory),
        SETTINGS, manager=client, memory=memory, admission=Admission(client), clock=lambda: NOW,
    )  # fmt: skip
    key = WorkloadKey(rayjob.name, f"{NS}/train")
    w1.cache[key] = made(*RAYJOB_M)
    feed_hop(w1.tracker, RAYCLUSTER, made(*RAY_CLUSTER, RAYJOB_M if ours else None))
    feed_pod(w1.tracker, pod("train-x8k2p-worker-a", RAY_CLUSTER, since=T1))
    try:
        assert reconciler.unschedulable() == ([key] if ours else [])
    finally:
        await client.aclose()
        await pool.aclose()


# -- one meaning of "connected" ------------------------------------------------------

STATES: dict[str, dict[str, Any]] = {
    "connected": {},
    "its Job cache not listed": {"synced_kinds": set()},
    "not answering": {"connected": False, "lost_in": 30.0},
    "lost": {"connected": False, "lost_in": 0.0},
    "cordoned": {"cordoned": True},
    "draining": {"drain": "All"},
}


@pytest.mark.parametrize("state", STATES)
async def test_the_held_pass_wakes_exactly_what_a_reconcile_would_place(
    env: Env, state: str
) -> None:
    """Both see the worker through one mapping (snapshot.placement_cluster): the pass
    wakes a held workload when, and only when, its next reconcile places it."""
    env.submit(asking("1"))
    await env.reconcile()
    assert env.reconciler.held() == [KEY]
    w1 = env.workers["w1"]
    w1.nodes = FREE
    for field_name, value in STATES[state].items():
        setattr(w1, field_name, value)
    woken = env.reconciler.placeable_held() == [KEY]
    env.catch_up()
    await env.reconcile()
    placed = env.placement() == "w1"
    assert woken == placed
    assert placed == (state == "connected")


@pytest.mark.parametrize(
    ("worker", "connected"),
    [
        (WorkerSnapshot("w1", synced=True, connected=True), True),
        (WorkerSnapshot("w1", synced=False, connected=True), False),
        (WorkerSnapshot("w1", synced=True, connected=False), False),
        (WorkerSnapshot("w1", synced=True, connected=False, lost=True), False),
        # Lost wins even over a stale "connected": a lost worker takes nothing new.
        (WorkerSnapshot("w1", synced=True, connected=True, lost=True), False),
    ],
)
def test_a_worker_is_connected_for_placement_only_answering_listed_and_not_lost(
    worker: WorkerSnapshot, connected: bool
) -> None:
    cluster = placement_cluster(worker)
    assert cluster.connected is connected
    assert cluster.lost is worker.lost
    rejected = Connected().reject(Request(Workload(())), cluster)
    assert (rejected is None) is connected


async def test_a_workload_held_for_its_data_is_woken_when_the_claim_binds(env: Env) -> None:
    w1 = env.workers["w1"]
    w1.nodes = FREE
    w1.claim_feed = FakeClaimFeed(phases={NAMESPACE: {"data": "Pending"}})
    obj = asking("1")
    obj["spec"]["template"]["spec"]["volumes"] = [
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
    ]
    env.submit(obj)
    await env.reconcile()
    assert env.placement() is None
    assert annotations(env)[NOT_PLACED_ANNOTATION] == (
        f"NotPlaced: w1: PersistentVolumeClaim data in {NAMESPACE} is Pending"
    )
    assert env.reconciler.placeable_held() == []
    w1.claim_feed.phases = {NAMESPACE: {"data": "Bound"}}
    assert env.reconciler.placeable_held() == [KEY]
    env.catch_up()
    await env.reconcile()
    assert env.placement() == "w1"
