"""A worker's capacity as the pool keeps it, against a real worker of the local fleet."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.fleet.workers import PoolOptions, Worker, WorkerPool
from jobrelay.kinds.catalog import kinds_from_names
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import NODES, PODS, WORKER_CLUSTERS
from jobrelay.placement.units import resources_of
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME
from tests.conftest import FleetHandle
from tests.kubetools import eventually


@pytest.fixture
async def pool(clients: dict[str, ApiClient]) -> AsyncIterator[tuple[WorkerPool, list[str]]]:
    told: list[str] = []
    options = PoolOptions(
        namespace="jobrelay-system", controller_name=DEFAULT_CONTROLLER_NAME,
        origin=f"capacity-test-{uuid.uuid4().hex[:6]}", sync_timeout=20.0,
        status_interval=1.0, health_timeout=30.0, lost_timeout=900.0,
    )  # fmt: skip
    made = WorkerPool(
        clients["manager"], kinds_from_names(["Job.v1.batch"]), lambda key: None, options,
        on_capacity_change=told.append,
    )  # fmt: skip
    await made.start()
    try:
        yield made, told
    finally:
        await made.stop()


def bound_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"fleet.jobrelay.dev/outcome": "run-forever"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "3", "memory": "5Gi"}},
                }
            ],
        },
    }


async def test_capacity_follows_the_workers_nodes_and_pods(
    fleet: FleetHandle, clients: dict[str, ApiClient], namespace: str,
    pool: tuple[WorkerPool, list[str]],
) -> None:  # fmt: skip
    workers, told = pool
    name = fleet.workers[0]
    worker_api = clients[name]

    # Its Nodes and Pods may list before its Jobs do (and before the first probe
    # answers): wait for both, not for one and then assert the other.
    async def capacity_known_and_connected() -> Worker | None:
        worker = workers.get(name)
        if worker is None or worker.capacity() is None or not worker.connected:
            return None
        return worker

    worker = await eventually(
        capacity_known_and_connected, timeout=60, what="capacity listed, worker connected"
    )
    assert worker.capacity_error is None
    nodes = (await worker_api.list(NODES)).items
    capacity = worker.capacity()
    assert capacity is not None
    assert {n.name: dict(n.allocatable) for n in capacity.nodes} == {
        n["metadata"]["name"]: resources_of(n["status"]["allocatable"]) for n in nodes
    }
    await eventually(lambda: _async(name in told), timeout=10, what="on_capacity_change")

    node = capacity.nodes[0].name
    before = dict(capacity.nodes[0].requested)
    await worker_api.create(PODS, bound_pod("hog", node), namespace=namespace)

    def requested() -> dict[str, int]:
        now = worker.capacity()
        assert now is not None
        return dict(next(n for n in now.nodes if n.name == node).requested)

    raised = {
        "cpu": before.get("cpu", 0) + 3000,
        "memory": before.get("memory", 0) + 5 * 2**30,
        "pods": before.get("pods", 0) + 1,
    }
    await eventually(lambda: _async(requested() == raised), timeout=30, what="pod counted")

    async def published() -> dict[str, Any] | None:
        registration = await clients["manager"].get(WORKER_CLUSTERS, name)
        found = (registration.get("status") or {}).get("capacity")
        return found if found and found.get("requested", {}).get("cpu") else None

    status = await eventually(published, timeout=30, what="status.capacity")
    assert status["nodes"] == len(nodes)

    await worker_api.delete(PODS, "hog", namespace=namespace)
    lowered = {k: v for k, v in before.items() if v}
    await eventually(lambda: _async(requested() == lowered), timeout=30, what="pod uncounted")


async def _async(value: Any) -> Any:
    return value
