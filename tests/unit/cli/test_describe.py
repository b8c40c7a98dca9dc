"""`jobrelay describe`: both sides of a workload, and the worker side missing without failing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import FakeApiserver

from jobrelay.cli import describe as describe_cli
from jobrelay.cli.describe import WorkerSide, render
from jobrelay.cli.main import cli
from jobrelay.kinds.catalog import DEDICATED

JOB = DEDICATED["Job.v1.batch"]
JOBS = "batch/v1/jobs"
EVENTS = "v1/events"
NOW = datetime(2026, 1, 2, 3, 10, tzinfo=UTC)

# fmt: off
MIRROR = {
    "cluster": "worker-2",
    "mirror": {
        "metadata": {"name": "hello", "namespace": "team-a"},
        "status": {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed",
                                   "lastTransitionTime": "2026-01-02T03:09:00Z"}]},
    },
    "pods": [
        {"name": "hello-abcde", "phase": "Running", "node": "kwok-node-1", "restarts": 2,
         "ready": True, "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
         "conditions": [{"type": "Ready", "status": "True"}]},
        {"name": "hello-fghij", "phase": "Pending", "node": "", "restarts": 0, "ready": False,
         "lastState": None, "conditions": [{"type": "PodScheduled", "status": "False",
         "reason": "Unschedulable", "message": "0/2 nodes are available"}]},
    ],
}
# fmt: on


def job(annotations: dict[str, str], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", "namespace": "team-a", "uid": "uid-hello",
                     "annotations": annotations, "creationTimestamp": "2026-01-02T03:00:00Z"},
        "spec": {"managedBy": "jobrelay.dev/relay", "completions": 3},
        "status": status or {},
    }  # fmt: skip


def event(reason: str, message: str, count: int = 1, uid: str = "uid-hello") -> dict[str, Any]:
    return {
        "metadata": {"name": f"hello.{reason}", "namespace": "team-a"},
        "involvedObject": {"kind": "Job", "name": "hello", "uid": uid},
        "type": "Warning", "reason": reason, "message": message, "count": count,
        "firstTimestamp": "2026-01-02T03:01:00Z", "lastTimestamp": "2026-01-02T03:08:00Z",
        "source": {"component": "jobrelay"},
    }  # fmt: skip


MOVED = {"jobrelay.dev/cluster": "worker-2", "jobrelay.dev/placements": "worker-1,worker-2"}


def test_a_running_job_shows_history_pods_and_events() -> None:
    obj = job(MOVED, {"active": 1, "ready": 1, "succeeded": 1, "startTime": "2026-01-02T03:00:05Z"})
    lines = render(JOB, obj, [event("FailedCreate", "worker-1: exceeded quota", 3)],
                   WorkerSide(MIRROR), NOW)  # fmt: skip
    text = "\n".join(lines)
    assert "State:            Running" in lines
    assert "Waiting:" not in text
    assert lines[lines.index("Placements:") + 1 : lines.index("Placements:") + 3] == [
        "  1. worker-1",
        "  2. worker-2 (current)",
    ]
    assert "Completions:      1/3" in lines
    assert "Pods Statuses:    1 Active (1 Ready) / 1 Succeeded / 0 Failed" in lines
    assert "Worker:           worker-2" in lines
    pod_rows = [line.split() for line in lines if line.startswith("  hello-")]
    assert pod_rows[0] == ["hello-abcde", "Running", "True", "kwok-node-1", "2", "terminated:",
                           "OOMKilled", "(exit", "137)"]  # fmt: skip
    assert pod_rows[1][:5] == ["hello-fghij", "Pending", "False", "-", "0"]
    assert "  hello-fghij: PodScheduled: Unschedulable 0/2 nodes are available" in lines
    assert any(
        line.split()[:5] == ["Warning", "FailedCreate", "2m", "(x3", "over"]
        and line.endswith("jobrelay   worker-1: exceeded quota")
        for line in lines
    ), text


@pytest.mark.parametrize(
    ("annotations", "waiting"),
    [
        ({"jobrelay.dev/not-placed": "NotPlaced: worker-1: full"}, "not placed: NotPlaced: worker-1: full"),
        ({**MOVED, "jobrelay.dev/blocked": "worker-2: FailedCreate: quota"},
         "the worker cannot create its pods: worker-2: FailedCreate: quota"),
        ({}, "not placed yet: the controller has not looked at it"),
        (MOVED, "placed; the worker has not started its pods yet"),
    ],
)  # fmt: skip
def test_why_it_waits(annotations: dict[str, str], waiting: str) -> None:
    lines = render(JOB, job(annotations), [], None, NOW)
    assert any(line.startswith(f"Waiting:          {waiting}") for line in lines), lines


def test_the_worker_side_unavailable_is_one_line() -> None:
    lines = render(JOB, job(MOVED), [], WorkerSide(unavailable="no endpoint published"), NOW)
    assert "worker details unavailable: no endpoint published" in lines
    assert lines[-1] == "Events:           <none>"


# -- the command ---------------------------------------------------------------------------


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    monkeypatch.setattr(describe_cli, "manager_client", lambda *_args: fake.client())
    return fake


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["describe", *args])


def test_describe_asks_the_controller_api_for_the_mirror(
    manager: FakeApiserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager.put(JOBS, job(MOVED, {"active": 1}))
    manager.put(EVENTS, event("Dispatched", "to worker-2"))
    manager.put(EVENTS, event("Other", "about a namesake", uid="uid-other"))
    asked: list[tuple[str, str, str]] = []

    async def fetch(namespace: str, name: str, kind: str) -> dict[str, Any]:
        asked.append((namespace, name, kind))
        return MIRROR

    monkeypatch.setattr(describe_cli, "fetcher_factory", lambda *_args: fetch)
    result = invoke("job", "hello", "-n", "team-a")
    assert result.exit_code == 0, result.output
    assert asked == [("team-a", "hello", "Job")]
    assert "Worker:           worker-2" in result.output
    assert "to worker-2" in result.output
    assert "about a namesake" not in result.output


@pytest.mark.parametrize(
    ("factory", "why"),
    [
        # No controller API client in this jobrelay (the module is missing).
        (describe_cli.relay_api_fetcher, "this jobrelay has no client of the controller's API"),
        (lambda *_args: (lambda *_a: (_ for _ in ()).throw(PermissionError("403: forbidden"))),
         "403: forbidden"),
    ],
)  # fmt: skip
def test_describe_without_the_worker_side_still_exits_0(
    manager: FakeApiserver, monkeypatch: pytest.MonkeyPatch, factory: Any, why: str
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "jobrelay.relayapi.user_client", None)
    manager.put(JOBS, job(MOVED))
    monkeypatch.setattr(describe_cli, "fetcher_factory", factory)
    result = invoke("job", "hello", "-n", "team-a")
    assert result.exit_code == 0, result.output
    assert f"worker details unavailable: {why}" in result.output
    assert "State:            Dispatched" in result.output


def test_a_held_job_never_asks_the_worker_side(
    manager: FakeApiserver, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager.put(JOBS, job({"jobrelay.dev/not-placed": "NotPlaced: full"}))
    monkeypatch.setattr(describe_cli, "fetcher_factory", lambda *_a: pytest.fail("asked"))
    result = invoke("job", "hello", "-n", "team-a")
    assert result.exit_code == 0, result.output
    assert "worker details" not in result.output


def test_describe_a_missing_job_exits_3(manager: FakeApiserver) -> None:
    result = invoke("job", "nope", "-n", "team-a")
    assert result.exit_code == 3
    assert 'jobs.batch "nope" not found in namespace team-a' in result.stderr


def test_describe_an_unknown_type_exits_2(manager: FakeApiserver) -> None:
    assert invoke("pod", "x").exit_code == 2


def test_a_waiting_job_shows_the_queue_and_position_the_controller_says() -> None:
    held = job({}, {"conditions": []})
    lines = render(JOB, held, [], None, NOW, place=("gpu", 3))
    assert "Queue:            gpu (position 3)" in lines
    assert not [line for line in render(JOB, held, [], None, NOW) if line.startswith("Queue:")]
    assert "Queue:            gpu" in render(JOB, held, [], None, NOW, place=("gpu", None))


def test_a_held_job_says_its_estimated_start(manager: FakeApiserver) -> None:
    """Issue 34: no worker's room is known here, so the estimate says it is unknown and
    why; a waiting workload always gets the line."""
    manager.put(JOBS, job({"jobrelay.dev/not-placed": "NotPlaced: full"}))
    result = invoke("job", "hello", "-n", "team-a")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "estimated start:" in x)
    assert line.split("estimated start: ", 1)[1] == (
        "unknown; basis: the workers' room is not known (their WorkerClusters cannot be read)"
    )


def test_render_says_the_estimate_in_words() -> None:
    from jobrelay.admission.start_estimate import StartEstimate

    held = job({"jobrelay.dev/not-placed": "NotPlaced: full"})
    soon = StartEstimate(NOW.timestamp() + 240, "worker-2", "declared run times of 4 running ahead")
    lines = render(JOB, held, [], None, NOW, estimate=soon)
    assert any(
        line.endswith("estimated start: in about 4m, on worker-2; basis: declared run times "
                      "of 4 running ahead") for line in lines
    )  # fmt: skip
    unknown = StartEstimate(None, "", "no run time declared or observed for what runs ahead")
    lines = render(JOB, held, [], None, NOW, estimate=unknown)
    assert any(line.endswith("estimated start: unknown; basis: no run time declared or "
                             "observed for what runs ahead") for line in lines)  # fmt: skip
