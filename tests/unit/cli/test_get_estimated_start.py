"""`jobrelay get -o wide` shows when a waiting workload is likely to start (issue 34)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import WORKER_CLUSTERS_PATH, FakeApiserver, worker_cluster

from jobrelay.cli import get as get_cli
from jobrelay.cli.main import cli

JOBS = "batch/v1/jobs"
QUEUES = "jobrelay.dev/v1alpha1/relayqueues"


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    fake.lead()
    monkeypatch.setattr(get_cli, "manager_client", lambda *_args: fake.client())
    fake.put(QUEUES, {
        "apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue", "metadata": {"name": "q"},
        "spec": {"weight": 1, "nominalQuota": {"cpu": "2"}, "borrowingLimit": {"cpu": "0"}},
    })  # fmt: skip
    return fake


def put_job(manager: FakeApiserver, name: str, *, placed: str = "", started: datetime | None = None,
            expected: str | None = "60s", created: int = 0) -> None:  # fmt: skip
    annotations = {"jobrelay.dev/cluster": placed} if placed else {}
    if expected:
        annotations["jobrelay.dev/expected-duration"] = expected
    status: dict[str, Any] = {}
    if started is not None:
        status = {"startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "active": 1}
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    manager.put(JOBS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": "team-a", "labels": {"jobrelay.dev/queue": "q"},
            "annotations": annotations, "creationTimestamp": f"2026-01-02T03:00:{created:02d}Z",
        },
        "spec": {"managedBy": "jobrelay.dev/relay", "template": {"spec": {"containers": [container]}}},
        "status": status,
    })  # fmt: skip


def estimates(result: Result) -> dict[str, str]:
    header, *lines = result.output.splitlines()
    at = header.index("ESTIMATED START")
    return {line.split()[1]: line[at:].split("   ")[0].strip() for line in lines}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["get", "jobs", "-n", "team-a", *args])


def test_a_waiting_job_gets_its_estimate_from_declared_run_times(manager: FakeApiserver) -> None:
    started = datetime.now(UTC) - timedelta(seconds=20)
    manager.put(WORKER_CLUSTERS_PATH, {
        **worker_cluster("worker-1", active=2),
        "status": {
            "conditions": [{"type": "Connected", "status": "True"}],
            "capacity": {"allocatable": {"cpu": "8"}, "requested": {"cpu": "2"}},
        },
    })  # fmt: skip
    put_job(manager, "a", placed="worker-1", started=started)
    put_job(manager, "b", placed="worker-1", started=started)
    put_job(manager, "waits", created=5)
    put_job(manager, "later", created=6, expected=None)
    result = invoke("-o", "wide")
    assert result.exit_code == 0, result.output
    shown = estimates(result)
    assert shown["a"] == shown["b"] == "-"
    assert shown["waits"] in ("in about 40s", "in about 39s", "in about 41s")
    assert shown["later"] == shown["waits"]  # both freed rooms end together


def test_nothing_declared_is_unknown_and_the_default_table_has_no_column(
    manager: FakeApiserver,
) -> None:
    put_job(manager, "a", placed="worker-1", started=datetime.now(UTC), expected=None)
    put_job(manager, "b", placed="worker-1", started=datetime.now(UTC), expected=None)
    put_job(manager, "waits", created=5, expected=None)
    assert estimates(invoke("-o", "wide"))["waits"] == "unknown"
    assert "ESTIMATED START" not in invoke().output
