"""Quantities a worker reports in its Nodes and Pods: an unusable one is ignored (the
node counts as absent, the pod as requesting nothing), costs microseconds, and is
logged at most once a minute per worker."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from jobrelay.fleet.workers import capacity_feed as capacity_module
from jobrelay.fleet.workers.capacity_feed import CapacityFeed
from jobrelay.kube.watching import InformerEvent
from jobrelay.placement.slim_objects import slim_node, slim_pod
from jobrelay.placement.tracker import CapacityTracker

UNUSABLE = ["1e999999", "1e1000000", "9" * 100_000, "-4", "١٢", "1e2147483648"]


def node(name: str, memory: str) -> dict[str, Any]:
    status = {"allocatable": {"cpu": "4", "memory": memory, "pods": "110"},
              "conditions": [{"type": "Ready", "status": "True"}]}  # fmt: skip
    return {"metadata": {"name": name}, "status": status}


def pod(name: str, memory: str, node_name: str = "n1") -> dict[str, Any]:
    container = {"name": "main", "resources": {"requests": {"cpu": "1", "memory": memory}}}
    return {
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"nodeName": node_name, "containers": [container]},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize("memory", UNUSABLE, ids=lambda m: m[:12])
def test_a_node_with_an_unusable_allocatable_counts_as_absent(memory: str) -> None:
    tracker = CapacityTracker()
    tracker.set_node(slim_node(node("n1", "8Gi")))
    started = time.perf_counter()
    tracker.set_node(slim_node(node("n1", memory)))
    tracker.set_node(slim_node(node("n2", memory)))
    assert time.perf_counter() - started < 0.05  # 1e999999 built a million-digit int
    assert [n.name for n in tracker.capacity().nodes] == []
    unusable = tracker.take_unusable()
    assert unusable is not None and unusable.startswith("node n2: memory:")
    assert tracker.take_unusable() is None


@pytest.mark.parametrize("memory", UNUSABLE, ids=lambda m: m[:12])
def test_a_pod_with_an_unusable_request_counts_as_requesting_nothing(memory: str) -> None:
    tracker = CapacityTracker()
    tracker.set_node(slim_node(node("n1", "8Gi")))
    started = time.perf_counter()
    slim = slim_pod(pod("odd", memory))
    assert time.perf_counter() - started < 0.05
    assert slim is not None
    tracker.set_pod("team-a/odd", slim)
    tracker.set_pod("team-a/fine", slim_pod(pod("fine", "1Gi")))
    (found,) = tracker.capacity().nodes
    assert found.requested == {"cpu": 1000, "memory": 2**30, "pods": 2}
    unusable = tracker.take_unusable()
    assert unusable is not None and "team-a/odd" in unusable and "memory" in unusable


def test_a_worker_reporting_unusable_quantities_is_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(capacity_module.time, "monotonic", lambda: now[0])
    feed = CapacityFeed("w")
    caplog.set_level(logging.WARNING, logger=capacity_module.__name__)

    def odd_node(name: str) -> None:
        feed._node_changed(InformerEvent("ADDED", name, None, slim_node(node(name, "1e999999"))))

    odd_node("n1")
    for index in range(50):
        odd_node(f"m{index}")
        feed._pod_changed(InformerEvent("ADDED", f"team-a/p{index}", None,
                                        slim_pod(pod(f"p{index}", "1e1000000"))))  # fmt: skip
    assert len(caplog.records) == 1
    assert "worker w: node n1: memory: '1e999999' is larger than" in caplog.text
    now[0] += capacity_module.UNUSABLE_LOG_INTERVAL
    odd_node("late")
    assert len(caplog.records) == 2
    assert "(and 100 more since the last such line)" in caplog.records[1].getMessage()
