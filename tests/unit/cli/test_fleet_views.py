"""`jobrelay clusters` (bare, and `list -o`) and `jobrelay top` against an in-memory manager."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import WORKER_CLUSTERS_PATH, FakeApiserver, worker_cluster

from jobrelay.cli import clusters as clusters_cli
from jobrelay.cli import get as get_cli
from jobrelay.cli import top as top_cli
from jobrelay.cli.fleetview import usage
from jobrelay.cli.main import cli

JOBS = "batch/v1/jobs"
CAPACITY = {
    "nodes": 2,
    "schedulableNodes": 2,
    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "220"},
    "requested": {"cpu": "3", "memory": "8Gi"},
    "reserved": {"cpu": "1"},
}


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    for module in (clusters_cli, get_cli, top_cli):
        monkeypatch.setattr(module, "manager_client", lambda *_args: fake.client())
    one = worker_cluster("worker-1", active=2)
    one["status"].update(kubernetesVersion="v1.35.4", capacity=CAPACITY)
    one["metadata"].update(labels={"region": "west"}, creationTimestamp="2026-01-01T00:00:00Z")
    fake.put(WORKER_CLUSTERS_PATH, one)
    two = worker_cluster("worker-2", active=0, connected="False", cordoned=True)
    two["status"]["conditions"][0].update(reason="Unreachable", message="connection refused")
    fake.put(WORKER_CLUSTERS_PATH, two)
    return fake


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_bare_clusters_shows_health_version_mirrors_and_capacity(manager: FakeApiserver) -> None:
    result = invoke("clusters")
    assert result.exit_code == 0, result.output
    header, one, two = result.output.splitlines()
    assert header.split() == ["NAME", "CONNECTED", "STATE", "VERSION", "MIRRORS", "CAPACITY", "AGE"]
    assert one.split()[:5] == ["worker-1", "True", "Schedulable", "v1.35.4", "2"]
    assert "nodes 2/2, cpu 4/16, memory 8Gi/64Gi" in one
    assert two.split()[:6] == ["worker-2", "False", "Cordoned", "-", "0", "-"]


def test_wide_adds_labels_and_why_not_connected(manager: FakeApiserver) -> None:
    result = invoke("clusters", "-o", "wide")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[-2:] == ["LABELS", "MESSAGE"]
    assert "region=west" in lines[1]
    assert lines[2].endswith("Unreachable: connection refused")


@pytest.mark.parametrize("args", [("clusters", "-o"), ("clusters", "list", "-o")])
def test_json_yaml_and_name(manager: FakeApiserver, args: tuple[str, ...]) -> None:
    as_json = json.loads(invoke(*args, "json").output)
    assert as_json["kind"] == "List"
    assert [w["metadata"]["name"] for w in as_json["items"]] == ["worker-1", "worker-2"]
    assert yaml.safe_load(invoke(*args, "yaml").output) == as_json
    assert invoke(*args, "name").output == (
        "workercluster.jobrelay.dev/worker-1\nworkercluster.jobrelay.dev/worker-2\n"
    )


def test_clusters_list_keeps_its_table(manager: FakeApiserver) -> None:
    result = invoke("clusters", "list")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split() == [
        "NAME", "CONNECTED", "ACTIVE", "STATE", "CAPACITY", "LABELS", "/", "MESSAGE",
    ]  # fmt: skip


def job(name: str, annotations: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "spec": {"managedBy": "jobrelay.dev/relay"},
        "status": status,
    }


def test_top_once_shows_each_worker_and_the_totals(manager: FakeApiserver) -> None:
    on_one = {"jobrelay.dev/cluster": "worker-1"}
    manager.put(JOBS, job("a", on_one, {"active": 1}))
    manager.put(JOBS, job("b", on_one, {"active": 2}))
    manager.put(JOBS, job("c", {"jobrelay.dev/not-placed": "NotPlaced: full"}, {}))
    manager.put(JOBS, job("d", on_one, {"conditions": [{"type": "Complete", "status": "True"}]}))
    result = invoke("top", "--once")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "WORKER", "CONNECTED", "STATE", "NODES", "CPU", "MEMORY", "GPU", "MIRRORS", "RUNNING",
    ]  # fmt: skip
    assert lines[1].split() == [
        "worker-1", "True", "Schedulable", "2/2", "4/16", "(25%)", "8Gi/64Gi", "(12%)", "-", "2", "2",
    ]  # fmt: skip
    assert lines[2].split() == ["worker-2", "False", "Cordoned", "-", "-", "-", "-", "0", "0"]
    assert lines[-1] == "WORKLOADS 4: Complete 1, Held 1, Running 2"


def test_top_leaves_out_a_kind_the_user_may_not_list_and_says_so(
    manager: FakeApiserver,
) -> None:
    """A tenant bound to `view` where the chart aggregates only Jobs: top still shows the
    fleet and the Jobs (it failed with a 403 on JobSets)."""
    manager.put(JOBS, job("a", {"jobrelay.dev/cluster": "worker-1"}, {"active": 1}))
    manager.forbidden.add("jobsets")
    result = invoke("top", "--once")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-2] == "WORKLOADS 1: Running 1"
    assert lines[-1] == "(left out: jobsets, which you may not list)"


async def test_top_refreshes_every_interval(manager: FakeApiserver) -> None:
    frames: list[list[str]] = []
    async with manager.client() as client:
        await top_cli.refresh(client, "jobrelay.dev/relay", 0.001, frames=3, show=frames.append)
    assert len(frames) == 3
    assert frames[0] == frames[2]


@pytest.mark.parametrize(
    ("capacity", "shown"),
    [
        (CAPACITY, "4/16 (25%)"),
        ({}, "-"),
        ({"allocatable": {"cpu": "500m"}, "requested": {"cpu": "250m"}}, "250m/500m (50%)"),
        ({"allocatable": {"cpu": "lots"}}, "-"),
        ({"allocatable": {"cpu": "1e999999"}}, "-"),  # was ~25 s of CPU, then "-"
        ({"allocatable": {"cpu": "4"}, "requested": {"cpu": "1e1000000"}}, "-"),
    ],
)
def test_usage(capacity: dict[str, Any], shown: str) -> None:
    assert usage(capacity, "cpu") == shown


@pytest.mark.parametrize(
    "capacity",
    [
        {"nodes": float("inf")},  # int(inf): OverflowError, a traceback, before
        {"nodes": 1, "allocatable": {"memory": "1e1000000"}},  # decimal.Overflow before
        {"nodes": 1, "allocatable": {"memory": "-1Gi"}},
    ],
)
def test_an_odd_capacity_status_is_a_dash(capacity: dict[str, Any]) -> None:
    assert clusters_cli.capacity_text(capacity) == "-"


# -- kubectl's list manners: jsonpath, -w, top -n ------------------------------------------


@pytest.mark.parametrize("verb", [["clusters"], ["clusters", "list"]])
def test_clusters_take_jsonpath_and_watch(manager: FakeApiserver, verb: list[str]) -> None:
    names = invoke(*verb, "-o", 'jsonpath={range .items[*]}{.metadata.name}{"\\n"}{end}')
    assert (names.exit_code, names.output) == (0, "worker-1\nworker-2\n")
    lost = worker_cluster("worker-2", active=0, connected="False", lost="2026-01-01T00:00:00Z")
    manager.watch_events.append(("MODIFIED", lost))
    watched = invoke(*verb, "-w")
    assert watched.exit_code == 130
    lines = watched.output.splitlines()
    assert len(lines) == 4 and lines[0].startswith("NAME")
    assert lines[3].split()[0] == "worker-2" and lines[3] != lines[2]


def test_top_counts_one_namespace_with_n(manager: FakeApiserver) -> None:
    on_one = {"jobrelay.dev/cluster": "worker-1"}
    manager.put(JOBS, job("a", on_one, {"active": 1}))
    elsewhere = job("b", on_one, {"active": 1})
    elsewhere["metadata"]["namespace"] = "team-b"
    manager.put(JOBS, elsewhere)
    assert invoke("top", "--once").output.splitlines()[-1] == "WORKLOADS 2: Running 2"
    assert invoke("top", "--once", "-n", "team-b").output.splitlines()[-1] == (
        "WORKLOADS 1: Running 1"
    )
    assert invoke("top", "--once", "-n", "team-b", "-A").output.splitlines()[-1] == (
        "WORKLOADS 2: Running 2"
    )
