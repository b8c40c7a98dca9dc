"""`jobrelay get` against an in-memory manager: every output format, filters, exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import FakeApiserver

from jobrelay.cli import get as get_cli
from jobrelay.cli.main import cli

JOBS = "batch/v1/jobs"
JOBSETS = "jobset.x-k8s.io/v1alpha2/jobsets"
MANAGED = "jobrelay.dev/relay"


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    fake.lead()  # a controller leads: no warning on stderr
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    return fake


def put_job(
    manager: FakeApiserver,
    name: str,
    namespace: str = "team-a",
    *,
    managed_by: str = MANAGED,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return manager.put(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name, "namespace": namespace, "labels": labels or {},
                "annotations": annotations or {}, "creationTimestamp": "2026-01-02T03:00:00Z",
            },
            "spec": {"managedBy": managed_by, "completions": 2, "template": {}},
            "status": status or {},
        },
    )  # fmt: skip


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["get", *args])


def test_the_table_shows_state_reason_and_cluster(manager: FakeApiserver) -> None:
    put_job(manager, "held", annotations={"jobrelay.dev/not-placed": "NotPlaced: worker-1: full"})
    put_job(manager, "running", annotations={"jobrelay.dev/cluster": "worker-2"},
            status={"active": 1, "succeeded": 1, "startTime": "2026-01-02T03:00:01Z"})  # fmt: skip
    put_job(manager, "theirs", managed_by="kueue.x-k8s.io/multikueue")
    put_job(manager, "elsewhere", namespace="team-b")
    result = invoke("-n", "team-a")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "NAME", "KIND", "CLUSTER", "STATE", "COMPLETIONS", "AGE", "DURATION", "REASON",
    ]  # fmt: skip
    assert lines[1].split()[:6] == ["team-a", "held", "Job", "-", "Held", "0/2"]
    assert lines[1].endswith("NotPlaced: worker-1: full")
    assert lines[2].split()[:6] == ["team-a", "running", "Job", "worker-2", "Running", "1/2"]
    assert len(lines) == 3  # not another controller's Job, not another namespace's


def test_all_namespaces_and_a_selector(manager: FakeApiserver) -> None:
    put_job(manager, "a", labels={"team": "x"})
    put_job(manager, "b", namespace="team-b", labels={"team": "x"})
    put_job(manager, "c", namespace="team-b")
    result = invoke("jobs", "-A", "-l", "team=x", "-o", "name")
    assert result.exit_code == 0, result.output
    assert result.output == "job.batch/a\njob.batch/b\n"
    listings = [path for _, path, _, _ in manager.requests if "/leases" not in path]
    assert listings[0] == "/apis/batch/v1/jobs"


def test_json_is_a_list_of_the_objects_as_stored(manager: FakeApiserver) -> None:
    stored = [put_job(manager, "a"), put_job(manager, "b")]
    result = invoke("jobs", "-n", "team-a", "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["kind"] == "List" and document["apiVersion"] == "v1"
    assert document["items"] == stored


def test_yaml_of_one_named_job_is_the_object(manager: FakeApiserver) -> None:
    stored = put_job(manager, "a")
    result = invoke("job", "a", "-n", "team-a", "-o", "yaml")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.output) == stored


def test_wide_adds_the_placements(manager: FakeApiserver) -> None:
    put_job(manager, "moved", annotations={
        "jobrelay.dev/cluster": "worker-2", "jobrelay.dev/placements": "worker-1,worker-2",
    }, status={"active": 2, "failed": 1})  # fmt: skip
    result = invoke("-n", "team-a", "-o", "wide")
    assert result.exit_code == 0, result.output
    header, line = result.output.splitlines()
    assert header.split()[-6:] == ["PLACEMENTS", "ACTIVE", "FAILED", "ESTIMATED", "START",
                                   "REASON"]  # fmt: skip
    assert line.split()[-4:] == ["worker-1>worker-2", "2", "1", "-"]  # placed: no estimate


def test_wide_shows_the_queue_a_workload_names(manager: FakeApiserver) -> None:
    put_job(manager, "queued", labels={"jobrelay.dev/queue": "team-a"})
    put_job(manager, "plain")
    result = invoke("-n", "team-a", "-o", "wide")
    assert result.exit_code == 0, result.output
    header, *lines = result.output.splitlines()
    column = header.split().index("QUEUE")
    assert {line.split()[1]: line.split()[column] for line in lines} == {
        "queued": "team-a", "plain": "-",
    }  # fmt: skip


def test_all_lists_jobsets_too_and_skips_kinds_not_served(manager: FakeApiserver) -> None:
    put_job(manager, "a")
    manager.put(JOBSETS, {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "team-a"},
        "spec": {"managedBy": MANAGED, "replicatedJobs": [{"name": "w", "replicas": 2}]},
    })  # fmt: skip
    result = invoke("all", "-n", "team-a", "-o", "name")
    assert result.exit_code == 0, result.output
    assert result.output == "job.batch/a\njobset.jobset.x-k8s.io/js\n"


def test_a_missing_name_exits_3(manager: FakeApiserver) -> None:
    put_job(manager, "a")
    result = invoke("jobs", "a", "nope", "-n", "team-a", "-o", "name")
    assert result.exit_code == 3
    assert result.stdout == "job.batch/a\n"
    assert 'Error from server (NotFound): jobs.batch "nope" not found' in result.stderr


def test_nothing_found_says_so_on_stderr(manager: FakeApiserver) -> None:
    result = invoke("-n", "empty")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "No resources found in empty namespace.\n"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("pods",), 2),  # not a workload type
        (("all", "x"), 2),  # names need one type
        (("-o", "table"), 2),
        (("jobs", "x", "-A"), 2),
    ],
)
def test_usage_errors_exit_2(manager: FakeApiserver, args: tuple[str, ...], code: int) -> None:
    assert invoke(*args).exit_code == code


def test_an_unreachable_manager_exits_1(manager: FakeApiserver) -> None:
    manager.unreachable = True
    result = invoke("-n", "team-a")
    assert result.exit_code == 1
    assert "cannot connect to https://manager (connection refused)" in result.stderr


def test_a_refusal_exits_1(manager: FakeApiserver) -> None:
    manager.refuse = (403, "Forbidden")
    result = invoke("-n", "team-a")
    assert result.exit_code == 1
    assert "Forbidden" in result.stderr


def test_the_namespace_defaults_to_the_kubeconfig_context(
    manager: FakeApiserver, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "namespace": "team-b"}},
                     {"name": "d", "context": {"cluster": "k"}}],
    }))  # fmt: skip
    monkeypatch.setenv("KUBECONFIG", str(config))
    put_job(manager, "b", namespace="team-b")
    put_job(manager, "a", namespace="default")
    assert invoke("-o", "name").output == "job.batch/b\n"
    assert invoke("-o", "name", "--context", "d").output == "job.batch/a\n"


def test_the_reason_falls_back_to_the_latest_warning(manager: FakeApiserver) -> None:
    """What `jobrelay jobs` showed: why it is held, else the latest warning about it."""
    placed = put_job(manager, "placed", annotations={"jobrelay.dev/cluster": "worker-1"})
    placed["metadata"]["uid"] = "uid-placed"
    put_job(manager, "held", annotations={"jobrelay.dev/not-placed": "NotPlaced: full"})
    for when, reason in (("2026-01-02T03:00:05Z", "Newer"), ("2026-01-02T03:00:01Z", "Older")):
        manager.put("v1/events", {
            "metadata": {"name": f"e-{reason}", "namespace": "team-a"}, "type": "Warning",
            "involvedObject": {"uid": "uid-placed"}, "reason": reason, "message": "it says",
            "lastTimestamp": when,
        })  # fmt: skip
    result = invoke("-n", "team-a")
    assert result.exit_code == 0, result.output
    lines = {line.split()[1]: line for line in result.output.splitlines()[1:]}
    assert lines["placed"].split()[4] == "Dispatched"
    assert lines["placed"].endswith("Newer: it says")
    assert lines["held"].endswith("NotPlaced: full")


def test_any_workload_kind_by_its_full_name(manager: FakeApiserver) -> None:
    """What `jobrelay jobs --kind` listed: a kind without an adapter of its own."""
    manager.put("ray.io/v1/rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "r", "namespace": "team-a"}, "spec": {"managedBy": MANAGED},
    })  # fmt: skip
    result = invoke("RayJob.v1.ray.io", "-n", "team-a", "-o", "name")
    assert result.exit_code == 0, result.output
    assert result.output == "rayjob.ray.io/r\n"


def test_text_others_wrote_cannot_drive_the_terminal(manager: FakeApiserver) -> None:
    """A tenant's Event message or annotation with escape sequences is printed as escapes,
    and an endless one is cut (kubectl's CVE-2021-25743)."""
    placed = put_job(manager, "placed", annotations={"jobrelay.dev/cluster": "worker-1"})
    placed["metadata"]["uid"] = "uid-placed"
    put_job(
        manager, "held", annotations={"jobrelay.dev/not-placed": "\x1b]0;pwned\x07" + "x" * 10**5}
    )
    manager.put("v1/events", {
        "metadata": {"name": "e", "namespace": "team-a"}, "type": "Warning",
        "involvedObject": {"uid": "uid-placed"}, "reason": "Bad", "message": "\x1b[2J\u202eevil",
        "lastTimestamp": "2026-01-02T03:00:05Z",
    })  # fmt: skip
    result = invoke("-n", "team-a")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    lines = {line.split()[1]: line for line in result.output.splitlines()[1:]}
    assert lines["placed"].endswith("Bad: \\x1b[2J\\u202eevil")
    assert "\\x1b]0;pwned\\x07" in lines["held"]
    assert len(lines["held"]) < 5000
