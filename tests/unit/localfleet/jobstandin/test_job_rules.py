"""The job stand-in's decisions: pods' lives (pod_rules) and the Job controller's plan
(job_rules), walked to the end with a moving clock against a model of the apiserver's Job
status rules (job-api-contract.md), for tables of Jobs and for any Job hypothesis makes."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.localfleet.jobstandin.job_rules import (
    INDEX_ANNOTATION,
    compress_indexes,
    is_finished,
    plan_job,
)
from jobrelay.localfleet.jobstandin.pod_rules import (
    go_duration_seconds,
    phase_of,
    pod_step,
)

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
NODES = ["w-node-1", "w-node-2"]
Obj = dict[str, Any]


def job(
    *,
    completions: int | None = 1,
    parallelism: int = 1,
    indexed: bool = False,
    backoff_limit: int = 6,
    outcome: str | None = None,
    duration: str = "2s",
    **spec: Any,
) -> Obj:
    annotations = {"fleet.jobrelay.dev/duration": duration}
    if outcome:
        annotations["fleet.jobrelay.dev/outcome"] = outcome
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "abcdef-123",
            "creationTimestamp": "2026-01-01T12:00:00Z",
        },
        "spec": {
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"job-name": "j"}, "annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
            },
            **spec,
        },
    }
    if completions is not None:
        body["spec"]["completions"] = completions
    if indexed:
        body["spec"]["completionMode"] = "Indexed"
    return body


def conditions(status: Obj) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def check_transition(old: Obj, new: Obj) -> None:
    """The apiserver's Job status rules this stand-in must keep (contract rules 1-13)."""
    for counter in ("active", "succeeded", "failed", "ready"):
        assert new.get(counter, 0) >= 0
    assert new.get("ready", 0) <= new.get("active", 0)
    assert new.get("failed", 0) >= old.get("failed", 0)
    assert new.get("succeeded", 0) >= old.get("succeeded", 0)
    before, after = conditions(old), conditions(new)
    for terminal in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"):
        if before.get(terminal) == "True":
            assert after.get(terminal) == "True"
    assert not (after.get("Complete") == "True" and after.get("Failed") == "True")
    if after.get("Complete") == "True":
        assert after.get("SuccessCriteriaMet") == "True"
        assert new["completionTime"] >= new["startTime"]
    if after.get("Failed") == "True":
        assert after.get("FailureTarget") == "True"
        assert "SuccessCriteriaMet" not in after
    if "completionTime" in new:
        assert after.get("Complete") == "True"
    if "completionTime" in old:
        assert new["completionTime"] == old["completionTime"]
    if after.get("Complete") == "True" or after.get("Failed") == "True":
        assert new.get("startTime") and new.get("active", 0) == 0


def run(body: Obj, *, limit: int = 200) -> tuple[Obj, dict[str, Obj], int]:
    """Drive ``body`` to the end: plans carried out, pods stepped, the clock moved to the
    next due recheck. Returns the Job, its pods by name, and the number of status writes."""
    now = T0
    pods: dict[str, Obj] = {}
    writes = 0
    for _ in range(limit):
        plan = plan_job(body, list(pods.values()), NODES, now)
        for made in plan.make:
            assert made.name not in pods
            pods[made.name] = copy.deepcopy(made.body) | {"status": {}}
        for name in plan.delete:
            pods.pop(name)
        if plan.status is not None:
            check_transition(body.get("status") or {}, plan.status)
            body = body | {"status": plan.status}
            writes += 1
        stepped = False
        for name, pod in pods.items():
            step = pod_step(pod, now)
            if step.status is not None:
                pods[name] = pod | {"status": step.status}
                stepped = True
        if is_finished(body) and not plan.delete:
            return body, pods, writes
        if plan.status is None and not plan.make and not plan.delete and not stepped:
            waits = [
                wait for p in pods.values() if (wait := pod_step(p, now).recheck_after) is not None
            ]
            if not waits:
                return body, pods, writes
            now += datetime.timedelta(seconds=min(waits))
    raise AssertionError(f"no end after {limit} rounds: {body.get('status')}")


def test_go_durations() -> None:
    cases = {"1s": 1.0, "200ms": 0.2, "1m30s": 90.0, "1h": 3600.0, "0": 0.0, "1.5s": 1.5}
    for text, seconds in cases.items():
        assert go_duration_seconds(text) == pytest.approx(seconds)
    for bad in ("", "1", "s", "1x", "1s2", None, 3):
        assert go_duration_seconds(bad) is None


def test_compress_indexes() -> None:
    assert compress_indexes([]) == ""
    assert compress_indexes([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert compress_indexes([3]) == "3"


def test_pod_runs_for_its_duration_then_succeeds() -> None:
    pod: Obj = {
        "metadata": {"name": "p", "annotations": {"fleet.jobrelay.dev/duration": "3s"}},
        "spec": {"nodeName": "n", "restartPolicy": "Never", "containers": [{"name": "c"}]},
    }
    assert pod_step({**pod, "spec": {"restartPolicy": "Never"}}, T0).status is None  # no node
    running = pod_step(pod, T0).status
    assert running is not None and running["phase"] == "Running"
    pod["status"] = running
    early = pod_step(pod, T0 + datetime.timedelta(seconds=2))
    assert early.status is None and early.recheck_after == pytest.approx(2.0)  # 1 s + 3 s - 2 s
    precise = pod_step(pod, T0 + datetime.timedelta(seconds=2), started=T0)
    assert precise.recheck_after == pytest.approx(1.0)
    done = pod_step(pod, T0 + datetime.timedelta(seconds=4)).status
    assert done is not None and done["phase"] == "Succeeded"
    terminated = done["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"


@pytest.mark.parametrize(
    ("annotations", "phase", "code"),
    [
        ({"fleet.jobrelay.dev/outcome": "fail"}, "Failed", 1),
        (
            {"fleet.jobrelay.dev/outcome": "fail", "fleet.jobrelay.dev/exit-code": "42"},
            "Failed",
            42,
        ),
        ({"fleet.jobrelay.dev/outcome": "run-forever"}, "Running", None),
        ({}, "Succeeded", 0),
    ],
)
def test_pod_outcomes(annotations: dict[str, str], phase: str, code: int | None) -> None:
    pod: Obj = {
        "metadata": {"name": "p", "annotations": annotations},
        "spec": {"nodeName": "n", "restartPolicy": "Never", "containers": [{"name": "c"}]},
    }
    pod["status"] = pod_step(pod, T0).status
    later = pod_step(pod, T0 + datetime.timedelta(hours=1))
    final = pod | {"status": later.status} if later.status else pod
    assert phase_of(final) == phase
    if code is not None:
        assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code


def test_a_pod_being_deleted_is_removed() -> None:
    pod = {"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T12:00:00Z"}, "spec": {}}
    assert pod_step(pod, T0).remove


@pytest.mark.parametrize(
    ("spec", "succeeded", "pods"),
    [
        ({"completions": 1, "parallelism": 1}, 1, 1),
        ({"completions": 3, "parallelism": 2}, 3, 3),
        ({"completions": None, "parallelism": 2}, 2, 2),  # a work queue
        ({"completions": 4, "parallelism": 4, "indexed": True}, 4, 4),
    ],
)
def test_jobs_complete(spec: dict[str, Any], succeeded: int, pods: int) -> None:
    done, made, writes = run(job(**spec))
    status = done["status"]
    assert conditions(status) == {"SuccessCriteriaMet": "True", "Complete": "True"}
    assert status["succeeded"] == succeeded and status["active"] == 0
    assert len(made) == pods
    assert all(p["spec"]["nodeName"] in NODES for p in made.values())
    if spec.get("indexed"):
        assert status["completedIndexes"] == f"0-{spec['completions'] - 1}"
        indexes = sorted(int(p["metadata"]["annotations"][INDEX_ANNOTATION]) for p in made.values())
        assert indexes == list(range(spec["completions"]))
    assert writes <= 2 + pods  # start, then a few counts, then the end


def test_failing_pods_exhaust_the_backoff_limit() -> None:
    done, made, _ = run(job(backoff_limit=1, outcome="fail"))
    status = done["status"]
    assert conditions(status) == {"FailureTarget": "True", "Failed": "True"}
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert status["failed"] == 2 and len(made) == 2 and "completionTime" not in status


def test_suspend_deletes_active_pods_and_resume_starts_again() -> None:
    body = job(completions=2, parallelism=2, duration="1h")
    plan = plan_job(body, [], NODES, T0)
    assert len(plan.make) == 2 and plan.status is not None
    body |= {"status": plan.status}
    pods = [p.body | {"status": {}} for p in plan.make]
    body["spec"]["suspend"] = True
    suspended = plan_job(body, pods, NODES, T0)
    assert sorted(suspended.delete) == sorted(p["metadata"]["name"] for p in pods)
    assert suspended.status is not None and "startTime" not in suspended.status
    assert conditions(suspended.status)["Suspended"] == "True"
    body |= {"status": suspended.status}
    body["spec"]["suspend"] = False
    resumed = plan_job(body, [], NODES, T0)
    assert resumed.status is not None and conditions(resumed.status)["Suspended"] == "False"
    assert resumed.status["startTime"] and len(resumed.make) == 2


def test_another_controllers_job_and_a_deleted_job_are_left_alone() -> None:
    assert plan_job(job(managedBy="example.com/x"), [], NODES, T0).status is None
    deleted = job()
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    assert plan_job(deleted, [], NODES, T0) == plan_job(deleted, [], [], T0)
    assert not plan_job(deleted, [], NODES, T0).make


def test_no_pods_without_a_ready_node() -> None:
    plan = plan_job(job(), [], [], T0)
    assert not plan.make


@settings(max_examples=60, deadline=None)
@given(
    completions=st.one_of(st.none(), st.integers(1, 5)),
    parallelism=st.integers(1, 4),
    indexed=st.booleans(),
    backoff_limit=st.integers(0, 3),
    outcome=st.sampled_from([None, "fail"]),
)
def test_any_job_ends_within_the_status_rules(
    completions: int | None,
    parallelism: int,
    indexed: bool,
    backoff_limit: int,
    outcome: str | None,
) -> None:
    indexed = indexed and completions is not None
    done, made, _ = run(
        job(completions=completions, parallelism=parallelism, indexed=indexed,
            backoff_limit=backoff_limit, outcome=outcome)
    )  # fmt: skip
    status = done["status"]
    if outcome == "fail":
        assert conditions(status).get("Failed") == "True"
        # Pods running side by side fail together, as with the real controller.
        assert backoff_limit < status["failed"] <= backoff_limit + parallelism
    else:
        assert conditions(status).get("Complete") == "True"
        assert status["succeeded"] == (completions if completions is not None else 1) or (
            completions is None and status["succeeded"] >= 1
        )
    names = list(made)
    assert len(names) == len(set(names))
    assert not [p for p in made.values() if phase_of(p) not in ("Succeeded", "Failed")]
