"""Builders shared by the placement tests."""

from __future__ import annotations

from jobrelay.placement.capacity import Node, WorkerCapacity
from jobrelay.placement.model import Cluster
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import Choice, PodGroup, Taint, Workload


def node(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    *,
    gpu: int = 0,
    used: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
    ready: bool = True,
) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu:
        allocatable["nvidia.com/gpu"] = str(gpu)
    return Node(
        name,
        resources_of(allocatable),
        resources_of(used or {}),
        labels or {},
        taints,
        unschedulable,
        ready,
    )


def cluster(name: str, *nodes: Node, **state: object) -> Cluster:
    return Cluster(name, capacity=WorkerCapacity(tuple(nodes)), **state)  # type: ignore[arg-type]


def pods(count: int, choice: Choice | None = None, name: str = "main", **requests: str) -> Workload:
    wanted = {
        key.replace("_", "/").replace("nvidia/gpu", "nvidia.com/gpu"): q
        for key, q in requests.items()
    }
    return Workload((PodGroup(name, count, resources_of(wanted)),), choice or Choice())
