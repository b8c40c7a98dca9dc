"""The local fleet runs real Jobs: KWOK plays the pods, the built-in controllers do the rest."""

from __future__ import annotations

import asyncio

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, PODS
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME
from tests.kubetools import finished, is_true, job_manifest, wait_for

pytestmark = pytest.mark.integration


async def test_plain_job_with_three_completions_completes_on_a_worker(
    clients: dict[str, ApiClient], namespace: str
) -> None:
    worker = clients["worker-1"]
    await worker.create(
        JOBS, job_manifest("three", completions=3, parallelism=2), namespace=namespace
    )
    job = await wait_for(worker, "three", namespace, finished, what="finish")
    assert is_true(job, "Complete"), job["status"]
    assert job["status"]["succeeded"] == 3
    assert job["status"]["startTime"] <= job["status"]["completionTime"]


async def test_failing_pods_exhaust_the_backoff_limit(
    clients: dict[str, ApiClient], namespace: str
) -> None:
    worker = clients["worker-1"]
    manifest = job_manifest(
        "doomed", backoff_limit=1, annotations={"fleet.jobrelay.dev/outcome": "fail"}
    )
    await worker.create(JOBS, manifest, namespace=namespace)
    job = await wait_for(worker, "doomed", namespace, finished, what="finish")
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["status"] == "True"
    assert failed[0]["reason"] == "BackoffLimitExceeded"
    assert job["status"]["failed"] == 2


async def test_exit_code_drives_pod_failure_policy(
    clients: dict[str, ApiClient], namespace: str
) -> None:
    worker = clients["worker-2"]
    manifest = job_manifest(
        "exit42",
        backoff_limit=5,
        annotations={"fleet.jobrelay.dev/outcome": "fail", "fleet.jobrelay.dev/exit-code": "42"},
        podFailurePolicy={
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        },
    )
    await worker.create(JOBS, manifest, namespace=namespace)
    job = await wait_for(worker, "exit42", namespace, finished, what="finish")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy", job["status"]
    assert job["status"]["failed"] == 1


async def test_oversized_pod_stays_pending_unschedulable(
    clients: dict[str, ApiClient], namespace: str
) -> None:
    worker = clients["worker-1"]
    await worker.create(JOBS, job_manifest("huge", cpu="1000"), namespace=namespace)

    async def pods() -> list[dict[str, object]]:
        return (await worker.list(PODS, namespace=namespace, label_selector="job-name=huge")).items

    for _ in range(100):
        found = await pods()
        conditions = [c for pod in found for c in pod.get("status", {}).get("conditions") or []]
        if any(c.get("reason") == "Unschedulable" for c in conditions):
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError(f"pod never reported Unschedulable: {found}")
    assert all(pod["status"]["phase"] == "Pending" for pod in found)


async def test_manager_skips_managed_jobs_and_keeps_managed_by_immutable(
    clients: dict[str, ApiClient], namespace: str
) -> None:
    manager = clients["manager"]
    await manager.create(
        JOBS, job_manifest("relayed", managed_by=DEFAULT_CONTROLLER_NAME), namespace=namespace
    )
    # Hybrid mode: an ordinary Job next to it runs on the manager's own nodes.
    await manager.create(JOBS, job_manifest("local"), namespace=namespace)
    local = await wait_for(manager, "local", namespace, finished, what="finish")
    assert is_true(local, "Complete")

    relayed = await manager.get(JOBS, "relayed", namespace=namespace)
    assert not relayed.get("status", {}).get("conditions")
    pods = await manager.list(PODS, namespace=namespace, label_selector="job-name=relayed")
    assert pods.items == []

    with pytest.raises(ApiError) as rejected:
        await manager.patch(
            JOBS, "relayed", {"spec": {"managedBy": "example.com/other"}}, namespace=namespace
        )
    assert rejected.value.code == 422
    assert "field is immutable" in rejected.value.message
