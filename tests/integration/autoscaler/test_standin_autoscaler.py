"""The stand-in autoscaler on a real worker apiserver, with cluster-autoscaler's real
ProvisioningRequest CRD (served as v1): a request gets its KWOK nodes and Provisioned=True
(the CRD taking every status written), a pod of its template is scheduled there, a
request beyond the maximum and one refused by flag are Failed with their reasons, and the
nodes of requests gone are scaled down."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NODES, PODS, WORKER_CLUSTERS
from jobrelay.localfleet.autoscaler import scaleup_rules as rules
from jobrelay.localfleet.autoscaler.scaleup_driver import AUTOSCALED_LABEL, ScaleUpDriver
from jobrelay.localfleet.autoscaler.scaleup_rules import ScaleUpSettings
from jobrelay.localfleet.binaries.autoscaler_crds import (
    autoscaler_crds,
    load_provisioning_request_crd,
)
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.autoscaling_spec import (
    DEFAULT_MAX_REQUESTS,
    AddableNodeShape,
    WorkerAutoscaling,
)
from jobrelay.vocabulary.workercluster import WorkerClusterSpec
from tests.ecosystem import install_crds
from tests.kubetools import eventually

pytestmark = pytest.mark.integration

WORKER = "worker-1"
SETTINGS = ScaleUpSettings(delay_seconds=1, max_nodes=2, cpu="16", memory="64Gi")
Obj = dict[str, Any]


@pytest.fixture
async def autoscaler(clients: dict[str, ApiClient], namespace: str) -> AsyncIterator[ScaleUpDriver]:
    """The stand-in on worker-1 with the real CRD; every node it added is gone after."""
    client = clients[WORKER]
    await install_crds(client, [load_provisioning_request_crd(autoscaler_crds(print, build=False))])
    driver = ScaleUpDriver(client, cluster=WORKER, settings=SETTINGS, scale_down_every=3600)
    try:
        async with driver:
            yield driver
    finally:
        left = await client.list(NODES, label_selector=f"{AUTOSCALED_LABEL}=true")
        for node in left.items:
            try:
                await client.delete(NODES, node["metadata"]["name"])
            except ApiError as error:
                if not error.is_not_found:
                    raise
    assert not driver.refused, f"the CRD refused status writes: {driver.refused}"


def pod_spec(cpu: str) -> Obj:
    """A pod that only the added nodes take (the fleet's own may be as large)."""
    return {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        "nodeSelector": {AUTOSCALED_LABEL: "true"},
        "restartPolicy": "Never",
    }  # fmt: skip


async def ask(client: ApiClient, namespace: str, name: str, *, cpu: str, count: int) -> Obj:
    """A PodTemplate and a best-effort-atomic ProvisioningRequest for ``count`` of its pods."""
    template = {"apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": name}, "template": {"spec": pod_spec(cpu)}}  # fmt: skip
    await client.create(api.POD_TEMPLATES, template, namespace=namespace)
    request = {
        "apiVersion": api.PROVISIONING_REQUESTS.api_version,
        "kind": api.PROVISIONING_REQUESTS.kind,
        "metadata": {"name": name},
        "spec": {
            "provisioningClassName": api.BEST_EFFORT_ATOMIC_SCALE_UP,
            "podSets": [{"podTemplateRef": {"name": name}, "count": count}],
        },
    }
    return await client.create(api.PROVISIONING_REQUESTS, request, namespace=namespace)


async def settled(client: ApiClient, namespace: str, name: str) -> Obj:
    async def check() -> Obj | None:
        found = await client.get(api.PROVISIONING_REQUESTS, name, namespace=namespace)
        done = api.is_condition_true(found, api.PROVISIONED)
        return found if done or api.is_condition_true(found, api.FAILED) else None

    return await eventually(check, timeout=30, what=f"ProvisioningRequest {name} settled")


async def test_requests_get_nodes_or_fail_with_a_reason_and_gone_ones_are_scaled_down(
    autoscaler: ScaleUpDriver, clients: dict[str, ApiClient], namespace: str
) -> None:
    client = clients[WORKER]
    # 12 CPUs a pod: one pod to each 16-CPU node.
    first = await ask(client, namespace, "two-big", cpu="12", count=2)
    provisioned = await settled(client, namespace, "two-big")
    conditions = api.conditions_of(provisioned)
    assert conditions[api.PROVISIONED].status == "True", conditions
    assert conditions[api.ACCEPTED].status == "True"
    added = await client.list(NODES, label_selector=f"{AUTOSCALED_LABEL}=true")
    assert len(added.items) == 2 and autoscaler.added == [
        f"{WORKER}-scaleup-1",
        f"{WORKER}-scaleup-2",
    ]

    # A pod of the template, consuming the request, is scheduled on an added node.
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "consumer",
                        # KWOK runs it until deleted (the fleet's pods end after 1s).
                        "annotations": {**api.consuming_annotations("two-big", api.BEST_EFFORT_ATOMIC_SCALE_UP),
                                        "fleet.jobrelay.dev/duration": "10m"}},
           "spec": pod_spec("12")}  # fmt: skip
    await client.create(PODS, pod, namespace=namespace)

    async def scheduled() -> str | None:
        found = await client.get(PODS, "consumer", namespace=namespace)
        return (found.get("spec") or {}).get("nodeName")

    assert (await eventually(scheduled, timeout=30, what="the pod scheduled")).startswith(
        f"{WORKER}-scaleup-"
    )

    # One more node would pass the maximum of two.
    await ask(client, namespace, "one-more", cpu="12", count=1)
    beyond = api.conditions_of(await settled(client, namespace, "one-more"))
    assert (beyond[api.FAILED].status, beyond[api.FAILED].reason) == ("True", rules.MAX_REACHED)

    autoscaler.settings = dataclasses.replace(SETTINGS, refuse="no quota in the zone")
    await ask(client, namespace, "refused", cpu="1", count=1)
    refused = api.conditions_of(await settled(client, namespace, "refused"))
    assert refused[api.FAILED].reason == rules.REFUSED
    assert refused[api.FAILED].message == "no quota in the zone"

    # Gone requests: their nodes go, but not while a pod is on one.
    await client.delete(api.PROVISIONING_REQUESTS, "two-big", namespace=namespace)
    await eventually(
        lambda: _gone(autoscaler, first["metadata"]["uid"]), timeout=10, what="the informer"
    )
    assert len(await autoscaler.scale_down()) == 1
    await client.delete(PODS, "consumer", namespace=namespace, grace_period_seconds=0)

    async def all_down() -> bool | None:
        await autoscaler.scale_down()
        left = await client.list(NODES, label_selector=f"{AUTOSCALED_LABEL}=true")
        return True if not left.items else None

    await eventually(all_down, timeout=30, what="the added nodes scaled down")


async def _gone(driver: ScaleUpDriver, uid: str) -> bool | None:
    live = {obj["metadata"].get("uid") for _key, obj in driver.informer.items()}
    return True if uid not in live else None


async def test_the_worker_cluster_crd_takes_the_autoscaling_block_and_defaults_it(
    clients: dict[str, ApiClient],
) -> None:
    manager = clients["manager"]
    name = "autoscaled-crd-check"
    body: dict[str, Any] = {
        "apiVersion": WORKER_CLUSTERS.api_version,
        "kind": WORKER_CLUSTERS.kind,
        "metadata": {"name": name},
        "spec": {
            "kubeconfigSecretRef": {"name": "none"},
            # Cordoned: a controller on this fleet places nothing there meanwhile.
            "cordoned": True,
            "autoscaling": {"nodeShapes": [{"cpu": 16, "memory": "64Gi"}]},
        },
    }
    try:
        stored = await manager.create(WORKER_CLUSTERS, body)
        block = stored["spec"]["autoscaling"]
        assert block == {
            "provisioningClassName": api.BEST_EFFORT_ATOMIC_SCALE_UP,
            "maxRequests": DEFAULT_MAX_REQUESTS,
            "nodeShapes": [{"cpu": 16, "memory": "64Gi", "gpu": 0, "count": 1}],
        }
        assert WorkerClusterSpec.of(stored).autoscaling == WorkerAutoscaling(
            (AddableNodeShape("16", "64Gi"),)
        )
        bad = {**body, "metadata": {"name": f"{name}-bad"}}
        bad["spec"] = {**body["spec"], "autoscaling": {"nodeShapes": [{"cpu": "lots",
                                                                        "memory": "1Gi"}]}}  # fmt: skip
        with pytest.raises(ApiError) as refused:
            await manager.create(WORKER_CLUSTERS, bad)
        assert refused.value.code == 422
    finally:
        try:
            await manager.delete(WORKER_CLUSTERS, name)
        except ApiError as error:
            if not error.is_not_found:
                raise
