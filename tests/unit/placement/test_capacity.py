from __future__ import annotations

import pytest
from tests.unit.placement.support import node

from jobrelay.placement.capacity import WorkerCapacity, node_of
from jobrelay.placement.units import format_units, to_units
from jobrelay.placement.workload import Taint


@pytest.mark.parametrize(
    ("resource", "quantity", "units", "written"),
    [
        ("cpu", "500m", 500, "500m"),
        ("cpu", "2", 2000, "2"),
        ("cpu", "0.0001", 1, "1m"),  # rounded up: a request never shrinks to nothing
        ("memory", "16Gi", 16 * 2**30, "16Gi"),
        ("memory", "1G", 10**9, "1000000000"),
        ("nvidia.com/gpu", "4", 4, "4"),
        ("hugepages-2Mi", "4Mi", 4 * 2**20, "4Mi"),
    ],
)
def test_units(resource: str, quantity: str, units: int, written: str) -> None:
    assert to_units(resource, quantity) == units
    assert format_units(resource, units) == written


def test_a_node_object_as_placement_sees_it() -> None:
    found = node_of(
        {
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"unschedulable": True, "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "7910m", "memory": "30Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        },
        {"cpu": 1000},
    )
    assert found.allocatable == {"cpu": 7910, "memory": 30 * 2**30, "pods": 110}
    assert found.taints == (Taint("gpu", "", "NoSchedule"),)
    assert (found.unschedulable, found.ready, found.schedulable) == (True, False, False)
    assert found.free()["cpu"] == 6910


def test_summary_as_status_and_columns() -> None:
    capacity = WorkerCapacity(
        (
            node("n1", "8", "32Gi", gpu=4, used={"cpu": "6", "nvidia.com/gpu": "2", "pods": "3"}),
            node("n2", "8", "32Gi", unschedulable=True),
        )
    )
    assert capacity.summary.to_status() == {
        "nodes": 2,
        "schedulableNodes": 1,
        "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "220"},
        "requested": {"cpu": "6", "nvidia.com/gpu": "2", "pods": "3"},
        "reserved": {},
    }
    assert capacity.summary.columns() == "nodes 1/2, cpu 6/16, memory 0/64Gi, nvidia.com/gpu 2/4"
    # Scores weigh the schedulable nodes only.
    assert capacity.usable_totals[0]["cpu"] == 8000
