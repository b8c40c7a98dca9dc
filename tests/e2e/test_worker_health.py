"""Worker health that tells the truth: a silent worker and refused credentials show in
``WorkerCluster.status`` (Connected=False with the reason), and a silent worker takes
no new workloads until it answers again.

One worker's kube-apiserver is frozen with SIGSTOP (by the PID the fleet's
state.json records, checked against its start time) and always thawed with
SIGCONT before the test ends; the extra registration with a bogus token is
always removed, so the other modules see the fleet as it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import pytest

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, WORKER_CLUSTERS
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, DEFAULT_CONTROLLER_NAME
from tests.conftest import FleetHandle
from tests.e2e.support import ControllerProcess, apiserver_record, frozen
from tests.kubetools import condition, eventually, job_manifest

pytestmark = pytest.mark.e2e

HEALTH_TIMEOUT = 12  # seconds: probes every 2 s, each bounded by 4 s
CONTROLLER_ARGS = ("--worker-health-timeout", str(HEALTH_TIMEOUT))
BAD_TOKEN_WORKER = "health-bad-token"


async def connected_condition(manager: ApiClient, worker: str) -> Mapping[str, Any] | None:
    try:
        found = await manager.get(WORKER_CLUSTERS, worker)
    except ApiError:
        return None
    return condition(found, "Connected")


async def wait_connected(
    manager: ApiClient, worker: str, status: str, reason: str, *, timeout: float
) -> Mapping[str, Any]:
    async def check() -> Mapping[str, Any] | None:
        found = await connected_condition(manager, worker)
        if found and (found.get("status"), found.get("reason")) == (status, reason):
            return found
        return None

    return await eventually(
        check, timeout=timeout, interval=0.5, what=f"{worker}: Connected={status} ({reason})"
    )


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        yield client


async def test_a_frozen_worker_turns_not_connected_takes_nothing_and_recovers(
    controller: ControllerProcess,
    fleet: FleetHandle,
    manager: ApiClient,
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
) -> None:
    healthy, silent = fleet.workers[0], fleet.workers[-1]
    namespace = await make_namespace(["manager", healthy])
    before = await wait_connected(manager, silent, "True", "Connected", timeout=30)
    status = (await manager.get(WORKER_CLUSTERS, silent))["status"]
    assert status.get("kubernetesVersion", "").startswith("v1."), status
    assert status.get("lastContactTime"), status
    record = apiserver_record(fleet.state_dir, silent)
    with frozen(record):
        controller.mark(f"froze {silent}'s kube-apiserver (pid {record.pid})")
        down = await wait_connected(manager, silent, "False", "Timeout", timeout=45)
        assert down["lastTransitionTime"] >= before["lastTransitionTime"]
        # No new workload goes to it while it is silent.
        names = [f"while-frozen-{index}" for index in range(4)]
        for name in names:
            await manager.create(
                JOBS, job_manifest(name, managed_by=DEFAULT_CONTROLLER_NAME), namespace=namespace
            )
        for name in names:

            async def placed(name: str = name) -> str | None:
                job = await manager.get(JOBS, name, namespace=namespace)
                annotations = job["metadata"].get("annotations") or {}
                return annotations.get(CLUSTER_ANNOTATION)

            assert await eventually(placed, timeout=30, what=f"{name} placed") == healthy
    controller.mark(f"thawed {silent}'s kube-apiserver")
    await wait_connected(manager, silent, "True", "Connected", timeout=45)


async def test_a_refused_token_shows_unauthorized(
    controller: ControllerProcess, fleet: FleetHandle, manager: ApiClient
) -> None:
    del controller  # running: it is what writes the status
    kubeconfig = workerclusters.inline_kubeconfig(fleet.kubeconfig(fleet.workers[0]))
    for user in kubeconfig["users"]:
        user["user"] = {"token": "not-a-valid-token"}
    try:
        await workerclusters.register(manager, BAD_TOKEN_WORKER, kubeconfig)
        found = await wait_connected(manager, BAD_TOKEN_WORKER, "False", "Unauthorized", timeout=45)
        assert "401" in found.get("message", ""), found
    finally:
        await workerclusters.unregister(manager, BAD_TOKEN_WORKER)
