"""ApiClient and EventRecorder against a real kube-apiserver: verbs, errors, Events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.resources import EVENTS, JOBS, NAMESPACES
from jobrelay.vocabulary.resource import Resource

pytestmark = pytest.mark.integration

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


UNCLAIMED_CONTROLLER_NAME = "kubetest.jobrelay.dev/nobody"


def managed_job(name: str, namespace: str) -> dict[str, Any]:
    """A Job the built-in controller leaves alone, so the test alone writes its status."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            # No controller runs under this name (e2e tests may run jobrelay's
            # on the same fleet), so the test alone writes the status.
            "managedBy": UNCLAIMED_CONTROLLER_NAME,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }


@pytest.fixture
async def manager(fleet: Any) -> AsyncIterator[ApiClient]:
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("manager"), cluster="manager") as client:
        yield client


async def test_create_get_list_and_delete(manager: ApiClient, namespace: str) -> None:
    for index in range(5):
        await manager.create(CONFIGMAPS, configmap(f"cm-{index}", namespace, i=str(index)))
    fetched = await manager.get(CONFIGMAPS, "cm-3", namespace=namespace)
    assert fetched["data"] == {"i": "3"}
    listed = await manager.list(
        CONFIGMAPS, namespace=namespace, field_selector="metadata.name!=kube-root-ca.crt", limit=2
    )
    assert sorted(item["metadata"]["name"] for item in listed.items) == [
        f"cm-{index}" for index in range(5)
    ]
    assert all(item["kind"] == "ConfigMap" for item in listed.items)
    assert int(listed.resource_version) > 0
    await manager.delete(CONFIGMAPS, "cm-3", namespace=namespace)
    with pytest.raises(ApiError) as caught:
        await manager.get(CONFIGMAPS, "cm-3", namespace=namespace)
    assert caught.value.is_not_found


async def test_api_errors_carry_the_apiservers_reason(manager: ApiClient, namespace: str) -> None:
    await manager.create(CONFIGMAPS, configmap("dup", namespace))
    with pytest.raises(ApiError) as caught:
        await manager.create(CONFIGMAPS, configmap("dup", namespace))
    assert caught.value.is_already_exists and not caught.value.is_conflict

    with pytest.raises(ApiError) as caught:
        await manager.create(CONFIGMAPS, configmap("Not_A_Valid_Name", namespace))
    assert caught.value.is_invalid
    assert "Not_A_Valid_Name" in caught.value.message

    stale = await manager.get(CONFIGMAPS, "dup", namespace=namespace)
    await manager.patch(CONFIGMAPS, "dup", {"data": {"x": "1"}}, namespace=namespace)
    with pytest.raises(ApiError) as caught:
        await manager.replace(CONFIGMAPS, stale)
    assert caught.value.is_conflict


async def test_delete_with_a_uid_precondition_spares_another_incarnation(
    manager: ApiClient, namespace: str
) -> None:
    first = await manager.create(CONFIGMAPS, configmap("reborn", namespace))
    await manager.delete(CONFIGMAPS, "reborn", namespace=namespace)
    await manager.create(CONFIGMAPS, configmap("reborn", namespace))
    with pytest.raises(ApiError) as caught:
        await manager.delete(
            CONFIGMAPS, "reborn", namespace=namespace, uid=first["metadata"]["uid"]
        )
    assert caught.value.is_conflict
    assert await manager.get(CONFIGMAPS, "reborn", namespace=namespace)


async def test_status_subresource_replace_and_patch(manager: ApiClient, namespace: str) -> None:
    job = await manager.create(JOBS, managed_job("relay", namespace))
    patched = await manager.patch(
        JOBS,
        "relay",
        {"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1}},
        namespace=namespace,
        subresource="status",
    )
    assert patched["status"]["active"] == 1
    # A status write never touches the spec, and the spec path never the status.
    patched["status"]["active"] = 2
    patched["spec"]["parallelism"] = 7
    replaced = await manager.replace(JOBS, patched, subresource="status")
    assert replaced["status"]["active"] == 2
    assert replaced["spec"]["parallelism"] == job["spec"]["parallelism"]


async def test_cluster_scoped_reads(manager: ApiClient, namespace: str) -> None:
    assert (await manager.get(NAMESPACES, namespace))["status"]["phase"] == "Active"
    listed = await manager.list(
        NAMESPACES, label_selector=f"kubernetes.io/metadata.name={namespace}"
    )
    assert [item["metadata"]["name"] for item in listed.items] == [namespace]


async def test_event_recorder_creates_then_counts(manager: ApiClient, namespace: str) -> None:
    job = await manager.create(JOBS, managed_job("evented", namespace))
    async with EventRecorder(manager, instance="test-host") as recorder:
        recorder.record(job, "Normal", "Dispatched", "placed on worker-1")
        await _wait_for_events(manager, namespace, lambda events: len(events) == 1)
        recorder.record(job, "Normal", "Dispatched", "placed on worker-1")
        recorder.record(job, "Warning", "WorkerLost", "worker-1 unreachable")
    events = await _wait_for_events(manager, namespace, lambda events: len(events) == 2)
    by_reason = {event["reason"]: event for event in events}
    dispatched = by_reason["Dispatched"]
    assert dispatched["count"] == 2
    assert dispatched["involvedObject"]["uid"] == job["metadata"]["uid"]
    assert dispatched["involvedObject"]["kind"] == "Job"
    assert by_reason["WorkerLost"]["type"] == "Warning"


async def _wait_for_events(
    client: ApiClient, namespace: str, enough: Any, within: float = 10.0
) -> list[dict[str, Any]]:
    async with asyncio.timeout(within):
        while True:
            events = (await client.list(EVENTS, namespace=namespace)).items
            if enough(events):
                return events
            await asyncio.sleep(0.1)
