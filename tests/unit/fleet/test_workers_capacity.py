"""A worker's capacity in the pool: Node and Pod informers feeding its tracker, the
debounced capacity callback and status.capacity, against in-memory apiservers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.unit.fleet.fakekube import collection_path
from tests.unit.fleet.test_workers import (
    NAMESPACE,
    WIDGET,
    WORKER,
    Fleet,
    kubeconfig,
    mirror,
    until,
)

from jobrelay.fleet.workers import PoolOptions, WorkerPool
from jobrelay.kinds.job.pod_labels import JOB_NAME_LABEL, JOB_UID_LABEL
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.resources import NODES, PODS
from jobrelay.placement.tracker import OwnedPods
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

NODES_PATH = collection_path(NODES)
PODS_PATH = collection_path(PODS)


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, node_name: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {JOB_NAME_LABEL: "j", JOB_UID_LABEL: "uid-j"},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Fleet, WorkerPool, list[str]]]:
    fleet = Fleet()
    server = fleet.server("w", mirror("a"))
    server.serve(NODES_PATH)
    server.serve(PODS_PATH)
    server.put(NODES_PATH, node("n1", "4"))
    server.put(PODS_PATH, pod("p0", "n1"))
    told: list[str] = []
    options = PoolOptions(
        namespace=NAMESPACE, controller_name=DEFAULT_CONTROLLER_NAME, origin="hq",
        sync_timeout=30.0, status_interval=0.05, health_timeout=30.0, lost_timeout=900.0,
        api=ApiOptions(connect_timeout=0.1, request_timeout=0.3),
    )  # fmt: skip
    pool = WorkerPool(
        fleet.manager.client(), [WIDGET], fleet.changed.append, options,
        client_factory=fleet.client_for, on_capacity_change=told.append,
    )  # fmt: skip
    fleet.register("w")
    yield fleet, pool, told
    await pool.stop()
    await fleet.manager.clients[0].aclose()


async def test_capacity_follows_nodes_and_pods(setup: tuple[Fleet, WorkerPool, list[str]]) -> None:
    fleet, pool, told = setup
    server = fleet.servers["w"]
    await pool.start()  # here: the test's event loop runs the informers
    worker = await until(lambda: pool.get(WORKER), what="the worker")
    capacity = await until(worker.capacity, what="its capacity")
    assert capacity.summary.columns() == "nodes 1/1, cpu 1/4, memory 0/8Gi"
    assert worker.capacity() is capacity  # the same object while nothing changed
    await until(lambda: told == [WORKER], what="the callback once listed")
    # The field selector keeps finished pods out on a real apiserver.
    assert worker.pods is not None
    assert worker.pods.name == "w/pods [status.phase!=Succeeded,status.phase!=Failed]"
    # (This fake replays nothing to a watch opened late.)
    await until(
        lambda: server.open_watches(PODS_PATH) and server.open_watches(NODES_PATH),
        what="the watches open",
    )
    server.put(PODS_PATH, pod("p1", "n1", "Running"))
    server.put(NODES_PATH, node("n2", "2"))
    await until(
        lambda: (
            (c := worker.capacity()) and c.summary.columns() == "nodes 2/2, cpu 2/6, memory 0/16Gi"
        ),
        what="the new pod and node counted",
    )
    assert worker.capacity_feed.pods_of("team-a", "j", "uid-j") == OwnedPods(2, 2, True, None)
    # The worker counts them for its mirror of that name only if that mirror's UID owns them.
    assert worker.pods_of("team-a", "j") == OwnedPods(), "no mirror: nobody's pods"
    informers = dict(worker.mirrors)
    worker.mirrors["Job.v1.batch"] = {"team-a/j": {"metadata": {"uid": "uid-other"}}}
    assert worker.pods_of("team-a", "j") == OwnedPods(), "a namesake mirror: not its pods"
    worker.mirrors["Job.v1.batch"] = {"team-a/j": {"metadata": {"uid": "uid-j"}}}
    assert worker.pods_of("team-a", "j") == OwnedPods(2, 2, True, None)
    worker.mirrors.clear()
    worker.mirrors.update(informers)
    # A pod that finishes frees its node.
    server.put(PODS_PATH, pod("p1", "n1", "Succeeded"))
    await until(
        lambda: (c := worker.capacity()) and c.summary.requested.get("cpu") == 1000,
        what="the finished pod no longer counted",
    )
    # Told again, but debounced: a burst of events is one or two calls, not one each.
    await until(lambda: len(told) >= 2, what="the callback after the changes")
    assert len(told) <= 3
    await until(
        lambda: fleet.status().get("capacity", {}).get("nodes") == 2,
        what="status.capacity published",
    )
    assert fleet.status()["capacity"]["allocatable"] == {
        "cpu": "6",
        "memory": "16Gi",
        "pods": "220",
    }
    assert worker.connected and worker.capacity_error is None


async def test_a_worker_without_node_rights_runs_mirrors_but_has_no_capacity(
    setup: tuple[Fleet, WorkerPool, list[str]],
) -> None:
    fleet, pool, _ = setup
    await pool.start()
    worker = await until(lambda: pool.get(WORKER), what="the worker")
    await until(worker.capacity, what="its capacity")
    # Reconnect to a worker that serves mirrors but not nodes nor pods (as with RBAC).
    bare = fleet.server("bare", mirror("a"))
    bare.forbid(NODES_PATH)
    bare.forbid(PODS_PATH)
    fleet.rotate(kubeconfig("bare"))
    new = await until(lambda: (w := pool.get(WORKER)) is not worker and w, what="reconnected")
    await until(lambda: new.capacity_error, what="why capacity is not known")
    assert new.capacity() is None and new.pods_of("team-a", "j") is None
    assert new.connected
