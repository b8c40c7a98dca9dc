"""The local fleet runs the real JobSet controller, webhooks included, on every cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, PODS
from jobrelay.localfleet.jobset_controller import CONTROLLER_NAME, JOBSETS
from tests.kubetools import is_true, wait_for

pytestmark = pytest.mark.integration

OTHER_CONTROLLER = "example.com/other"


def jobset_manifest(
    name: str,
    *,
    replicas: int = 2,
    parallelism: int = 2,
    managed_by: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet of one replicated Job whose pods KWOK completes.

    Written as a user would: completionMode, restartPolicy, successPolicy and
    network are left for JobSet's mutating webhook to default.
    """
    body: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": parallelism,
                            "completions": parallelism,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {
                                    "annotations": {
                                        "fleet.jobrelay.dev/duration": "200ms",
                                        **(annotations or {}),
                                    }
                                },
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "100m"}},
                                        }
                                    ]
                                },
                            },
                        }
                    },
                }
            ]
        },
    }
    if managed_by:
        body["spec"]["managedBy"] = managed_by
    return body


def finished(jobset: Mapping[str, Any]) -> bool:
    return is_true(jobset, "Completed") or is_true(jobset, "Failed")


@pytest.mark.parametrize("cluster", ["manager", "worker-1", "worker-2"])
async def test_jobset_completes_with_upstream_defaults(
    clients: dict[str, ApiClient], namespace: str, cluster: str
) -> None:
    client = clients[cluster]
    created = await client.create(JOBSETS, jobset_manifest("pair"), namespace=namespace)
    # The mutating webhook was called (the apiserver reached it through its URL).
    job_template = created["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job_template["completionMode"] == "Indexed"
    assert job_template["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert created["spec"]["successPolicy"]["operator"] == "All"
    assert created["spec"]["network"]["enableDNSHostnames"] is True

    jobset = await wait_for(client, "pair", namespace, finished, what="finish", resource=JOBSETS)
    assert is_true(jobset, "Completed"), jobset["status"]
    assert jobset["status"]["terminalState"] == "Completed"
    (workers,) = jobset["status"]["replicatedJobsStatus"]
    assert workers["name"] == "workers" and workers["succeeded"] == 2

    children = (await client.list(JOBS, namespace=namespace)).items
    assert sorted(job["metadata"]["name"] for job in children) == [
        "pair-workers-0",
        "pair-workers-1",
    ]
    assert all(is_true(job, "Complete") for job in children)
    assert all(job["status"]["succeeded"] == 2 for job in children)
    pods = (await client.list(PODS, namespace=namespace)).items
    assert len(pods) == 4
    assert all(pod["status"]["phase"] == "Succeeded" for pod in pods)


async def test_manager_leaves_jobsets_managed_by_another_controller_alone(
    clients: dict[str, ApiClient], namespace: str
) -> None:
    manager = clients["manager"]
    await manager.create(
        JOBSETS, jobset_manifest("elsewhere", managed_by=OTHER_CONTROLLER), namespace=namespace
    )
    # Hybrid mode: created after it, an ordinary JobSet runs to completion on the
    # manager, so the controller has been at work while the first one waited.
    await manager.create(JOBSETS, jobset_manifest("here"), namespace=namespace)
    here = await wait_for(manager, "here", namespace, finished, what="finish", resource=JOBSETS)
    assert is_true(here, "Completed"), here["status"]

    elsewhere = await manager.get(JOBSETS, "elsewhere", namespace=namespace)
    assert elsewhere["spec"]["managedBy"] == OTHER_CONTROLLER
    assert not (elsewhere.get("status") or {}).get("conditions")
    assert not (elsewhere.get("status") or {}).get("replicatedJobsStatus")
    jobs = (await manager.list(JOBS, namespace=namespace)).items
    assert sorted(job["metadata"]["name"] for job in jobs) == ["here-workers-0", "here-workers-1"]

    # JobSet's validating webhook (not the CRD schema) keeps managedBy immutable.
    with pytest.raises(ApiError) as rejected:
        await manager.patch(
            JOBSETS, "elsewhere", {"spec": {"managedBy": CONTROLLER_NAME}}, namespace=namespace
        )
    assert rejected.value.code == 403, rejected.value
    assert 'admission webhook "vjobset.kb.io" denied the request' in rejected.value.message
    assert "spec.managedBy" in rejected.value.message
    assert "field is immutable" in rejected.value.message
