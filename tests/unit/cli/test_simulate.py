"""`jobrelay simulate -f FILE`: where and when workloads would run, with no write (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import WORKER_CLUSTERS_PATH, FakeApiserver, worker_cluster

from jobrelay.admission.dry_run_rules import judge_dry_run
from jobrelay.admission.queue_model import Entry, LabelSelector, QueueSpec
from jobrelay.cli import simulate as simulate_cli
from jobrelay.cli.main import cli
from jobrelay.cli.simulate_input import BadManifest, read_manifests
from jobrelay.placement.capacity import Node, WorkerCapacity
from jobrelay.placement.model import Cluster
from jobrelay.placement.workload import PodGroup, Workload

QUEUES = "jobrelay.dev/v1alpha1/relayqueues"
NAMESPACES = "v1/namespaces"


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    fake.lead()
    monkeypatch.setattr(simulate_cli, "manager_client", lambda *_args: fake.client())
    for name, free in (("worker-1", "6"), ("worker-2", "2")):
        fake.put(WORKER_CLUSTERS_PATH, {
            **worker_cluster(name, active=0),
            "status": {
                "conditions": [{"type": "Connected", "status": "True"}],
                "capacity": {"allocatable": {"cpu": "8"}, "requested": {"cpu": str(8 - int(free))}},
            },
        })  # fmt: skip
    fake.put(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "team-a", "labels": {"team": "a"}}})  # fmt: skip
    return fake


def job(name: str, cpu: str, **labels: str) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels},
        "spec": {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}},
    }  # fmt: skip


def invoke(tmp_path: Path, *objects: dict[str, Any], args: tuple[str, ...] = ()) -> Result:
    manifest = tmp_path / "w.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    return CliRunner().invoke(cli, ["simulate", "-f", str(manifest), *args])


def test_a_job_that_fits_goes_to_a_worker_and_exits_0(
    manager: FakeApiserver, tmp_path: Path
) -> None:
    result = invoke(tmp_path, job("fits", "1"))
    assert result.exit_code == 0, result.output
    assert "worker:           worker-1" in result.output
    assert "admitted now:     yes" in result.output
    assert "estimated start:  now, on worker-1; basis: room is free now" in result.output
    assert manager.writes() == []


def test_a_job_that_never_fits_says_each_workers_reason_and_exits_1(
    manager: FakeApiserver, tmp_path: Path
) -> None:
    result = invoke(tmp_path, job("huge", "10000"), args=("-o", "json"))
    assert result.exit_code == 1, result.output
    [verdict] = json.loads(result.output)["items"]
    assert verdict["neverRuns"] and verdict["reason"] == "NeverFits"
    assert [r["worker"] for r in verdict["refusals"]] == ["worker-1", "worker-2"]
    assert all(r["reason"] for r in verdict["refusals"])
    assert verdict["worker"] is None and verdict["estimatedStart"] is None
    text = invoke(tmp_path, job("huge", "10000"))
    assert "workers refusing:" in text.output and "    worker-2: " in text.output
    assert manager.writes() == []


def test_a_queue_that_does_not_take_the_namespace_never_runs(
    manager: FakeApiserver, tmp_path: Path
) -> None:
    manager.put(QUEUES, {"apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue",
                         "metadata": {"name": "team-b"},
                         "spec": {"namespaceSelector": {"matchLabels": {"team": "b"}}}})  # fmt: skip
    result = invoke(tmp_path, job("wrong", "1", **{"jobrelay.dev/queue": "team-b"}),
                    args=("-o", "yaml"))  # fmt: skip
    assert result.exit_code == 1, result.output
    [verdict] = yaml.safe_load(result.output)["items"]
    assert verdict["reason"] == "QueueNotAllowed"


def test_a_list_and_stdin_are_read(manager: FakeApiserver) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [job("a", "1"), job("b", "1")]}
    result = CliRunner().invoke(cli, ["simulate", "-f", "-", "-o", "json"],
                                input=json.dumps(listed))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [v["name"] for v in json.loads(result.output)["items"]] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: [b", "not YAML or JSON"),
        ("- 1\n- 2\n", "document 1 is not an object"),
        ("", "no workload in it"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "Pod p (v1) is not a kind jobrelay runs"),
        ("apiVersion: batch/v1\nkind: Job\n", "a Job without metadata.name"),
    ],
)  # fmt: skip
def test_bad_input_is_a_usage_error_with_no_traceback(
    manager: FakeApiserver, text: str, said: str
) -> None:
    result = CliRunner().invoke(cli, ["simulate", "-f", "-"], input=text)
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert "Traceback" not in result.output


def test_a_missing_file_is_a_usage_error(manager: FakeApiserver) -> None:
    result = CliRunner().invoke(cli, ["simulate", "-f", "/nonexistent/x.yaml"])
    assert result.exit_code == 2 and "cannot be read" in result.output


def test_read_manifests_expands_lists_in_order() -> None:
    text = "kind: JobList\nitems: [{kind: Job, metadata: {name: a}}]\n---\nkind: Job\n"
    assert [o.get("metadata", {}).get("name") for o in read_manifests(text, "f")] == ["a", None]
    with pytest.raises(BadManifest):
        read_manifests("---\n", "f")


# -- the pure verdict -----------------------------------------------------------------------

WORKLOAD = Workload((PodGroup("main", 1, {"cpu": 1000}),))
ENTRY = Entry("Job team-a/w", "", "team-a", 0, "", {"cpu": 1000})
ROOMY = Cluster("w1", capacity=WorkerCapacity((Node("n", {"cpu": 4000}),)))
CAPPED = QueueSpec("q", namespace_selector=LabelSelector({"team": "a"}), nominal={"cpu": 1000},
                   borrowing_limit={"cpu": 0})  # fmt: skip


def verdict(**changes: Any) -> Any:
    given: dict[str, Any] = dict(
        named=None, namespace_labels={"team": "a"}, specs={"q": CAPPED}, queue_usage={},
        quota=None, namespace_admitted=[], clusters=[ROOMY],
    )  # fmt: skip
    given.update(changes)
    return judge_dry_run(ENTRY, WORKLOAD, **given)


def test_verdicts() -> None:
    assert (verdict().queue, verdict().admitted_now, verdict().worker) == ("q", True, "w1")
    full = verdict(queue_usage={"q": {"cpu": 1000}})
    assert not full.admitted_now and not full.never and full.hold.reason == "QueueQuotaExceeded"
    assert full.worker == "w1"
    big = judge_dry_run(Entry("Job team-a/w", "", "team-a", 0, "", {"cpu": 2000}),
                        Workload((PodGroup("main", 1, {"cpu": 2000}),)),
                        named=None, namespace_labels={"team": "a"}, specs={"q": CAPPED},
                        queue_usage={}, quota=None, namespace_admitted=[], clusters=[ROOMY])  # fmt: skip
    assert big.never and big.hold.reason == "ExceedsQueueQuota"
    missing = verdict(named="nope")
    assert missing.never and missing.hold.reason == "QueueNotFound"
    nobody = verdict(clusters=[])
    assert not nobody.never and not nobody.admitted_now
