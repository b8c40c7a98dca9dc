"""Capacity-aware placement on three differently shaped workers (tests/e2e/shapes/placement.yaml):

worker-small (2 nodes x 4 CPU, tier=onprem), worker-big (3 nodes x 16 CPU, tier=cloud,
region=west) and worker-gpu (1 node x 16 CPU with 4 GPUs, tainted nvidia.com/gpu).
Jobs go only where their pods fit, node by node; those that fit nowhere wait on the
manager, told why; a mirror stuck Pending moves after the pending timeout.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, NAMESPACES, NODES, PODS
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION
from tests.conftest import FleetHandle
from tests.e2e.support import Relay, placement
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

SMALL, BIG, GPU = "worker-small", "worker-big", "worker-gpu"
RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}
# Short, so the stuck-Pending scenario moves within the test.
CONTROLLER_ARGS = ("--pending-timeout", "6", "--unplaceable-retry", "60")


@pytest.fixture(scope="module")
def relay_fleet(placement_fleet: FleetHandle) -> FleetHandle:
    return placement_fleet


def sized(
    name: str,
    cpu: str,
    *,
    gpu: int = 0,
    parallelism: int = 1,
    annotations: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    body = job_manifest(
        name, cpu=cpu, parallelism=parallelism, completions=parallelism,
        annotations={**RUN_FOREVER, **(pod_annotations or {})},
    )  # fmt: skip
    body["metadata"]["annotations"] = dict(annotations or {})
    spec = body["spec"]["template"]["spec"]
    if gpu:
        spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpu)
        spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": str(gpu)}
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    return body


async def reasons(relay: Relay, name: str) -> list[tuple[str, str]]:
    job = await relay.get(name)
    return [(e["reason"], e["message"]) for e in await relay.events(job["metadata"]["uid"])]


async def wait_held(relay: Relay, name: str, reason: str = "NotPlaced") -> str:
    """The Warning Event ``reason`` on the Job, and no placement; its message."""
    job = await relay.get(name)
    event = await relay.wait_event(
        job["metadata"]["uid"], lambda e: e.get("reason") == reason, what=f"a {reason} Event"
    )
    job = await relay.get(name)
    assert not placement(job), f"{name} was placed on {placement(job)} yet told {reason}"
    note = (job["metadata"].get("annotations") or {}).get(NOT_PLACED_ANNOTATION, "")
    assert note.startswith(f"{reason}: "), note
    return str(event["message"])


async def delete_jobs(relay: Relay, *names: str) -> None:
    """Delete the Jobs and wait until their pods are gone from every worker too: the
    next test's placements must not meet a deleted Job's pods still holding room (under
    load a worker takes seconds to remove them)."""
    for name in names:
        await relay.manager.delete(
            JOBS, name, namespace=relay.namespace, propagation_policy="Background"
        )
    for name in names:
        await relay.wait_gone(name)
        for worker in relay.workers:
            await pods_gone(relay.clients[worker], relay.namespace, name)


async def test_gpu_jobs_land_only_where_gpus_are_free(relay: Relay) -> None:
    await relay.submit(sized("gpu-a", "1", gpu=2))
    await relay.submit(sized("gpu-b", "1", gpu=2))
    await relay.submit(sized("cpu-only", "1"))
    assert await relay.wait_placed("gpu-a") == GPU
    assert await relay.wait_placed("gpu-b") == GPU
    assert await relay.wait_placed("cpu-only") != GPU  # the GPU node's taint
    # Every GPU is taken now: a third GPU Job waits, told why.
    await relay.submit(sized("gpu-c", "1", gpu=2))
    message = await wait_held(relay, "gpu-c")
    assert "worker-gpu: no node has 2 nvidia.com/gpu free (largest free: 0)" in message, message
    await delete_jobs(relay, "gpu-a", "gpu-b", "gpu-c", "cpu-only")


async def test_pods_that_fit_a_clusters_total_but_no_node_are_not_sent_there(
    relay: Relay,
) -> None:
    # worker-small has 8 CPUs in all but 4 per node: a 6-CPU pod fits none of its nodes.
    order = {"jobrelay.dev/clusters": f"{SMALL},{BIG}", "jobrelay.dev/placement": "ordered"}
    await relay.submit(sized("six-cpu", "6", annotations=order))
    assert await relay.wait_placed("six-cpu") == BIG
    # Two 3-CPU pods at once fit worker-small, one per node.
    await relay.submit(sized("two-by-three", "3", parallelism=2, annotations=order))
    assert await relay.wait_placed("two-by-three") == SMALL
    await delete_jobs(relay, "six-cpu", "two-by-three")


async def test_ordered_spill_over_uses_the_second_cluster_only_while_the_first_is_full(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    order = {"jobrelay.dev/clusters": f"{SMALL},{BIG}", "jobrelay.dev/placement": "ordered"}
    for name in ("first-1", "first-2"):
        await relay.submit(sized(name, "3", annotations=order))
        assert await relay.wait_placed(name) == SMALL
    await relay.submit(sized("spilled", "3", annotations=order))
    assert await relay.wait_placed("spilled") == BIG
    # Room on the first again: the next one goes back there.
    await delete_jobs(relay, "first-1")
    await pods_gone(clients[SMALL], relay.namespace, "first-1")
    await relay.submit(sized("back", "3", annotations=order))
    assert await relay.wait_placed("back") == SMALL
    await delete_jobs(relay, "first-2", "spilled", "back")


async def test_a_namespace_restricted_to_one_worker_never_lands_elsewhere(
    relay: Relay,
) -> None:
    await relay.manager.patch(
        NAMESPACES, relay.namespace,
        {"metadata": {"annotations": {"jobrelay.dev/clusters": BIG}}},
    )  # fmt: skip
    try:
        names = [f"ns-{i}" for i in range(4)]
        for name in names:
            await relay.submit(sized(name, "500m"))
        # Asking for another worker does not widen the namespace's policy.
        await relay.submit(
            sized("asks-small", "500m", annotations={"jobrelay.dev/clusters": SMALL})
        )
        for name in names:
            assert await relay.wait_placed(name) == BIG
        message = await wait_held(relay, "asks-small")
        assert "worker-small: excluded by namespace policy" in message, message
        # A selector on WorkerCluster labels, set by the admin, holds the same way.
        await relay.manager.patch(
            NAMESPACES, relay.namespace,
            {"metadata": {"annotations": {"jobrelay.dev/clusters": None,
                                          "jobrelay.dev/cluster-selector": "tier=onprem"}}},
        )  # fmt: skip
        assert await relay.wait_placed("asks-small") == SMALL
        await delete_jobs(relay, *names, "asks-small")
    finally:
        await relay.manager.patch(
            NAMESPACES, relay.namespace,
            {"metadata": {"annotations": {"jobrelay.dev/clusters": None,
                                          "jobrelay.dev/cluster-selector": None}}},
        )  # fmt: skip


async def test_a_job_too_large_for_every_cluster_stays_held_with_never_fits(
    relay: Relay,
) -> None:
    await relay.submit(sized("huge", "64"))
    message = await wait_held(relay, "huge", "NeverFits")
    assert "no node has 64 cpu free" in message, message
    await relay.settled("huge")
    job = await relay.get("huge")
    assert not placement(job)
    assert not relay.mirror_uids(job["metadata"]["uid"]), "a mirror of a NeverFits Job exists"
    await delete_jobs(relay, "huge")


async def test_a_held_job_is_placed_within_5s_of_capacity_freeing(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    only_small = {"jobrelay.dev/clusters": SMALL}
    for name in ("fill-1", "fill-2"):
        await relay.submit(sized(name, "3", annotations=only_small))
        assert await relay.wait_placed(name) == SMALL
    await relay.submit(sized("waits", "3", annotations=only_small))
    await wait_held(relay, "waits")
    # Capacity frees when the worker's pod is gone; measured from then.
    await delete_jobs(relay, "fill-1")
    await pods_gone(clients[SMALL], relay.namespace, "fill-1")
    freed = time.monotonic()
    assert await relay.wait_placed("waits", timeout=30) == SMALL
    took = time.monotonic() - freed
    print(f"held Job placed {took:.2f} s after capacity freed")
    assert took < 5.0, f"placed {took:.1f} s after capacity freed"
    # Told once while it waited, not on every retry.
    told = [r for r, _ in await reasons(relay, "waits") if r == "NotPlaced"]
    assert len(told) == 1, told
    await delete_jobs(relay, "fill-2", "waits")


async def test_a_mirror_stuck_pending_after_its_cluster_lost_nodes_moves_after_the_timeout(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    order = {"jobrelay.dev/clusters": f"{SMALL},{BIG}", "jobrelay.dev/placement": "ordered"}
    await relay.submit(sized("stuck", "1", annotations=order))
    assert await relay.wait_placed("stuck") == SMALL
    small = clients[SMALL]
    await pod_running(small, relay.namespace, "stuck")
    async with cordoned(small):
        # Its node goes away under it: the pod is evicted; the worker's Job controller
        # makes another that no node will take.
        for pod in await pods_of(small, relay.namespace, "stuck"):
            await small.delete(PODS, pod["metadata"]["name"], namespace=relay.namespace)
        job = await relay.wait(
            "stuck", lambda j: placement(j) == BIG, timeout=60,
            what="moved to worker-big after the pending timeout",
        )  # fmt: skip
        annotations = job["metadata"]["annotations"]
        assert annotations["jobrelay.dev/placements"] == f"{SMALL},{BIG}"
        await relay.wait_event(
            job["metadata"]["uid"],
            lambda e: e.get("reason") == "Redispatched" and "unschedulable" in e["message"],
            what="a Redispatched Event saying why",
        )
        # One run at a time: the stuck mirror was gone before the new one was made.
        await relay.wait_mirror(job["metadata"]["uid"])
        assert not relay.jobs_named("stuck", SMALL) or all(
            j["metadata"].get("deletionTimestamp") for j in relay.jobs_named("stuck", SMALL)
        )
    await delete_jobs(relay, "stuck")


# -- helpers on the workers ------------------------------------------------------------


async def pods_of(client: ApiClient, namespace: str, job: str) -> list[dict[str, Any]]:
    listed = await client.list(
        PODS, namespace=namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
    )
    return listed.items


async def pods_gone(client: ApiClient, namespace: str, job: str) -> None:
    async def gone() -> bool:
        return not await pods_of(client, namespace, job)

    await eventually(gone, timeout=60, what=f"the pods of {job} gone")


async def pod_running(client: ApiClient, namespace: str, job: str) -> None:
    async def running() -> bool:
        pods = await pods_of(client, namespace, job)
        return any(p.get("status", {}).get("phase") == "Running" for p in pods)

    await eventually(running, timeout=60, what=f"a pod of {job} running")


class cordoned:
    """Every node of a worker unschedulable for the block, then schedulable again."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.nodes: list[str] = []

    async def __aenter__(self) -> None:
        self.nodes = [n["metadata"]["name"] for n in (await self.client.list(NODES)).items]
        await self._set(True)

    async def __aexit__(self, *exc_info: object) -> None:
        await self._set(False)

    async def _set(self, unschedulable: bool) -> None:
        for node in self.nodes:
            await self.client.patch(NODES, node, {"spec": {"unschedulable": unschedulable}})
