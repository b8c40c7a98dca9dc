"""The panel's read models: routes, rows and the watch events between two snapshots."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.relayapi import panel_rules
from jobrelay.relayapi.panel_rules import PanelRoute, match_panel_route
from jobrelay.relayapi.route_rules import API_PATH


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (f"{API_PATH}/fleet", PanelRoute("fleet")),
        (f"{API_PATH}/fleet/", PanelRoute("fleet")),
        (f"{API_PATH}/queues", PanelRoute("queues")),
        (f"{API_PATH}/workloads", PanelRoute("workloads")),
        (f"{API_PATH}/namespaces/team-a/workloads", PanelRoute("workloads", "team-a")),
        (f"{API_PATH}/namespaces/team-a/jobs/train/events",
         PanelRoute("events", "team-a", "jobs", "train")),
        (f"{API_PATH}/dashboard", PanelRoute("dashboard", name=panel_rules.DASHBOARD_BARE)),
        (f"{API_PATH}/dashboard/", PanelRoute("dashboard")),
        (f"{API_PATH}/dashboard/app.js", PanelRoute("dashboard", name="app.js")),
        (f"{API_PATH}/dashboard/../secret", None),
        (f"{API_PATH}/dashboard/sub/app.js", None),
        (f"{API_PATH}/fleet/worker-1", None),
        (f"{API_PATH}/namespaces/Team/workloads", None),
        (f"{API_PATH}/namespaces/team-a/jobs/train/log", None),
        ("/apis/other.dev/v1alpha1/fleet", None),
    ],
)  # fmt: skip
def test_routes(path: str, expected: PanelRoute | None) -> None:
    assert match_panel_route(path) == expected


def test_only_the_dashboards_own_files_are_served() -> None:
    assert panel_rules.asset("") == ("index.html", "text/html; charset=utf-8")
    assert panel_rules.asset("app.js") == ("app.js", "text/javascript; charset=utf-8")
    assert panel_rules.asset("panel_rules.py") is None


def worker(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "worker-1"}, "spec": {}, "status": status}


def test_a_connected_workers_row() -> None:
    row = panel_rules.worker_row(
        worker(
            conditions=[{"type": "Connected", "status": "True", "reason": "Reachable"}],
            kubernetesVersion="v1.35.4",
            activeMirrors=3,
            capacity={
                "nodes": 2, "schedulableNodes": 2,
                "allocatable": {"cpu": "16", "memory": "64Gi"},
                "requested": {"cpu": "3"}, "reserved": {"cpu": "500m"},
            },
        ),
        running=2,
    )  # fmt: skip
    assert row["connected"] == "True" and row["state"] == "Schedulable"
    assert (row["version"], row["mirrors"], row["running"], row["nodes"]) == ("v1.35.4", 3, 2, 2)
    cpu = next(r for r in row["resources"] if r["name"] == "cpu")
    assert (cpu["used"], cpu["allocatable"], cpu["text"]) == (3500, 16000, "3500m/16 (22%)")
    assert row["message"] == ""


def test_a_lost_workers_row_says_why_without_its_address() -> None:
    registration = worker(
        conditions=[{"type": "Connected", "status": "False", "reason": "Unreachable",
                     "message": "dial tcp 10.1.2.3:6443: connection refused"}],
        lostTime="2026-11-28T06:00:00Z",
    )  # fmt: skip
    registration["spec"] = {"cordoned": True}
    row = panel_rules.worker_row(registration, running=0)
    assert row["lost"] and row["state"].startswith("Lost") and row["cordoned"]
    assert "10.1.2.3" not in row["message"] and "Unreachable" in row["message"]
    assert row["resources"] == [] and row["mirrors"] is None


def test_an_odd_capacity_shows_no_bars() -> None:
    row = panel_rules.worker_row(worker(capacity={"allocatable": {"cpu": "lots"}}), running=0)
    assert row["resources"] == []


def test_a_queues_row_comes_from_its_spec_and_status() -> None:
    queue = {
        "metadata": {"name": "team-a"},
        "spec": {"weight": 2, "nominalQuota": {"cpu": "32"}, "borrowingLimit": {"cpu": "8"}},
        "status": {"pending": 4, "admitted": 10, "usage": {"cpu": "10"}, "fairShare": 0.5,
                   "actualShare": 0.31, "conditions": [{"type": "Valid", "status": "True"}]},
    }  # fmt: skip
    row = panel_rules.queue_row(queue)
    assert row == {
        "name": "team-a", "weight": 2, "valid": True, "message": "", "pending": 4,
        "admitted": 10, "usage": {"cpu": "10"}, "demand": {}, "nominalQuota": {"cpu": "32"},
        "borrowingLimit": {"cpu": "8"}, "fairShare": 0.5, "actualShare": 0.31,
    }  # fmt: skip


def test_an_invalid_queue_says_why() -> None:
    queue = {"metadata": {"name": "q"}, "spec": {"weight": True},
             "status": {"conditions": [{"type": "Valid", "status": "False",
                                        "message": "weight must be > 0"}]}}  # fmt: skip
    row = panel_rules.queue_row(queue)
    assert not row["valid"] and row["message"] == "weight must be > 0"
    assert row["weight"] == 1 and row["fairShare"] is None


def job(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                     "resourceVersion": "7", "creationTimestamp": "2026-11-28T06:00:00Z",
                     "labels": {"jobrelay.dev/queue": "gpu"}, "annotations": annotations},
        "spec": {"completions": 3, "parallelism": 1},
        "status": {"succeeded": 1, "active": 1} if annotations.get("jobrelay.dev/cluster") else {},
    }  # fmt: skip


def test_a_running_workloads_row_has_its_placements() -> None:
    row = panel_rules.workload_row(
        JobKind(),
        job("train", **{"jobrelay.dev/cluster": "worker-2",
                        "jobrelay.dev/placements": "worker-1,worker-2"}),
    )  # fmt: skip
    assert row["key"] == "jobs/team-a/train" and row["plural"] == "jobs"
    assert (row["state"], row["worker"], row["placements"]) == (
        "Running", "worker-2", ["worker-1", "worker-2"])  # fmt: skip
    assert (row["queue"], row["completions"]) == ("gpu", "1/3")


def test_a_held_workloads_row_says_why() -> None:
    row = panel_rules.workload_row(
        JobKind(), job("big", **{"jobrelay.dev/not-placed": "NeverFits: no cluster has 99 cpu"})
    )
    assert (row["state"], row["reason"], row["worker"]) == (
        "Held", "NeverFits: no cluster has 99 cpu", "")  # fmt: skip


def test_running_by_worker() -> None:
    rows = [{"state": "Running", "worker": "a"}, {"state": "Running", "worker": "a"},
            {"state": "Complete", "worker": "b"}, {"state": "Running", "worker": ""}]  # fmt: skip
    assert panel_rules.running_by_worker(rows) == {"a": 2}


def test_an_event_row_from_either_side() -> None:
    event = {
        "type": "Warning", "reason": "FailedScheduling",
        "message": "0/2 nodes: see https://10.0.0.1:6443/api",
        "involvedObject": {"kind": "Pod", "name": "train-0-abc"},
        "series": {"count": 4, "lastObservedTime": "2026-11-28T06:01:00Z"},
    }  # fmt: skip
    row = panel_rules.event_row("worker-1", event)
    assert row["side"] == "worker-1" and row["object"] == "Pod/train-0-abc"
    assert (row["count"], row["lastTimestamp"]) == (4, "2026-11-28T06:01:00Z")
    assert "10.0.0.1" not in row["message"]


rows_strategy = st.dictionaries(
    st.sampled_from("abcdef"),
    st.fixed_dictionaries({"namespace": st.sampled_from(["x", "y"]), "v": st.integers(0, 2)}),
)


@given(rows_strategy, rows_strategy)
def test_a_watcher_applying_the_changes_has_the_new_rows(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> None:
    seen = {row_id: dict(row) for row_id, row in before.items()}
    changes = list(panel_rules.changes(before, after))
    for change in changes:
        event = json.loads(change.line)
        assert event["type"] == change.type
        if change.type == "DELETED":
            del seen[change.id]
        else:
            seen[change.id] = event["object"]
    assert seen == after
    # Nothing is sent for a row that did not change.
    assert len(changes) == sum(1 for k in after.keys() | before.keys()
                               if before.get(k) != after.get(k))  # fmt: skip
