"""A fleet shaped by a configuration file (tests/e2e/shapes/placement.yaml), as the apiservers
show it: each worker's nodes (count, allocatable, labels, taints) and its WorkerCluster's labels.

The fleet is the session's ``placement_fleet`` (a fleet of its own, not the shared one).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from click.testing import CliRunner

from jobrelay.cli.fleet import fleet as fleet_cli
from jobrelay.kube.resources import NODES, WORKER_CLUSTERS
from jobrelay.localfleet import nodes, shape
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.placement import units
from tests.conftest import PLACEMENT_SHAPE, FleetHandle

pytestmark = pytest.mark.integration

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# worker: (nodes, cpu, memory, gpu, node label nvidia.com/gpu.product, taints, WorkerCluster labels)
EXPECTED: dict[str, tuple[int, str, str, int, str | None, list[dict[str, str]], dict[str, str]]] = {
    "worker-small": (2, "4", "8Gi", 0, None, [], {"tier": "onprem"}),
    "worker-big": (3, "16", "64Gi", 0, None, [], {"tier": "cloud", "region": "west"}),
    "worker-gpu": (1, "16", "64Gi", 4, "H100", [GPU_TAINT], {"accelerator": "h100"}),
}


def quantity(resource: str, allocatable: dict[str, Any]) -> int:
    return units.to_units(resource, allocatable.get(resource, "0"))


async def test_each_worker_has_the_nodes_of_its_shape(placement_fleet: FleetHandle) -> None:
    assert placement_fleet.workers == list(EXPECTED)
    for worker, (count, cpu, memory, gpu, product, taints, _labels) in EXPECTED.items():
        async with placement_fleet.client(worker) as client:
            listed = (await client.list(NODES)).items
        assert sorted(n["metadata"]["name"] for n in listed) == [
            f"{worker}-node-{index}" for index in range(1, count + 1)
        ]
        for node in listed:
            allocatable = node["status"]["allocatable"]
            where = f"{worker} node {node['metadata']['name']}: {allocatable}"
            assert quantity("cpu", allocatable) == units.to_units("cpu", cpu), where
            assert quantity("memory", allocatable) == units.to_units("memory", memory), where
            assert quantity(units.GPU, allocatable) == gpu, where
            labels = node["metadata"]["labels"]
            assert labels.get("nvidia.com/gpu.product") == product, labels
            assert labels[nodes.FLEET_LABEL] == worker
            assert node.get("spec", {}).get("taints", []) == taints


async def test_the_manager_keeps_its_default_nodes(placement_fleet: FleetHandle) -> None:
    async with placement_fleet.client("manager") as client:
        listed = (await client.list(NODES)).items
    assert len(listed) == shape.DEFAULT.nodes
    for node in listed:
        assert quantity("cpu", node["status"]["allocatable"]) == units.to_units("cpu", "8")
        assert "taints" not in node.get("spec", {})


async def test_worker_clusters_carry_the_configured_labels(placement_fleet: FleetHandle) -> None:
    async with placement_fleet.client("manager") as client:
        registered = {w["metadata"]["name"]: w for w in (await client.list(WORKER_CLUSTERS)).items}
    assert sorted(registered) == sorted(EXPECTED)
    for worker, expected in EXPECTED.items():
        labels = {**expected[-1], **nodes.LOCAL_WORKER_LABELS}
        assert registered[worker]["metadata"].get("labels") == labels


def test_up_again_with_the_same_config_reuses_the_fleet(placement_fleet: FleetHandle) -> None:
    state_dir = placement_fleet.state_dir
    before = placement_fleet.local.all_records()
    quiet = LocalFleet(state_dir, progress=lambda _message: None)
    assert asyncio.run(quiet.up(shape=shape.load(PLACEMENT_SHAPE))) is False
    assert asyncio.run(quiet.up()) is False  # no config: the recorded one
    assert LocalFleet(state_dir).all_records() == before


def test_fleet_status_shows_each_clusters_shape(placement_fleet: FleetHandle) -> None:
    result = CliRunner().invoke(
        fleet_cli, ["status", "--state-dir", str(placement_fleet.state_dir)]
    )
    assert result.exit_code == 0, result.output
    assert "  shape 2 nodes x 4 CPU / 8Gi; labels tier=onprem\n" in result.stdout
    assert (
        "  shape 1 node x 16 CPU / 64Gi / 4 GPU; labels accelerator=h100; node labels "
        "nvidia.com/gpu.product=H100; taints nvidia.com/gpu=present:NoSchedule\n"
    ) in result.stdout
