"""The manager's admission judges a workload's pods, and refusals that only look like quota;
a ServiceAccount missing on the manager holds the workload before anything is asked.

A ServiceAccount is a dependency its pods need on the worker (copied there with it,
docs/dependencies.md), so one missing on the manager holds the workload with
MissingDependency before the manager's admission is asked (whose ServiceAccount
plugin would refuse the probe pod too). A ResourceQuota's own refusal of the
probe still counts as allowed (the pods run on a worker), but a policy whose
message merely quotes one does not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, PODS
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource
from tests.e2e.support import Relay
from tests.e2e.test_admission_policy import BINDINGS, POLICIES, pod_manifest
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)
# What a tenant-controlled policy might say: ResourceQuota's words, quoted.
QUOTED_QUOTA = "exceeded quota: q, requested: pods=1, used: pods=0, limited: pods=0"
POLICY = "test-quotes-exceeded-quota"


def job_with_service_account(name: str, service_account: str) -> dict[str, Any]:
    body = job_manifest(name)
    body["spec"]["template"]["spec"]["serviceAccountName"] = service_account
    return body


async def never_placed(relay: Relay, name: str) -> None:
    held = await relay.get(name)
    assert CLUSTER_ANNOTATION not in (held["metadata"].get("annotations") or {})
    for worker in relay.workers:
        assert relay.jobs_named(name, worker) == [], f"it reached {worker}"


async def test_a_job_naming_a_service_account_missing_on_the_manager_waits_for_it(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    submitted = await relay.submit(job_with_service_account("borrower", "trainer"))
    event = await relay.wait_event(
        submitted["metadata"]["uid"],
        lambda e: e.get("reason") == "MissingDependency",
        timeout=60,
        what="a MissingDependency Warning",
    )
    assert event["type"] == "Warning"
    assert event["message"].startswith(
        f"serviceaccount/trainer does not exist in namespace {relay.namespace}"
    ), event["message"]
    await never_placed(relay, "borrower")

    # The same namespace's default ServiceAccount is fine: a Job naming none runs.
    await relay.submit(job_manifest("plain"))
    await relay.verify("plain", outcome="Complete")

    # Created on the manager: asked again at --unplaceable-retry, and it runs.
    await clients["manager"].create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}},
        namespace=relay.namespace,
    )
    done = await relay.wait_finished("borrower", timeout=90)
    assert is_true(done, "Complete"), done.get("status")


@contextlib.asynccontextmanager
async def pods_refused_quoting_quota(manager: ApiClient, namespace: str) -> AsyncIterator[None]:
    """A ValidatingAdmissionPolicy refusing every Pod of ``namespace`` in words that
    quote ResourceQuota's; in force for the block, lifted after."""
    async with pods_refused(manager, namespace, "false", QUOTED_QUOTA, pod_manifest("quoting")):
        yield


@contextlib.asynccontextmanager
async def pods_refused(
    manager: ApiClient, namespace: str, allowed: str, message: str, refused_pod: dict[str, Any]
) -> AsyncIterator[None]:
    """A ValidatingAdmissionPolicy refusing the Pods of ``namespace`` for which the CEL
    ``allowed`` is false, saying ``message``; in force for the block (``refused_pod`` is
    refused), lifted after."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["pods"]}
                ]
            },
            "validations": [{"expression": allowed, "reason": "Forbidden", "message": message}],
        },
    }  # fmt: skip
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY},
        "spec": {
            "policyName": POLICY,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }

    async def refused() -> bool:
        try:
            await manager.create(PODS, refused_pod, namespace=namespace, dry_run=True)
        except ApiError as error:
            if message in error.message:
                return True
            raise
        return False

    async def lifted() -> bool:
        return not await refused()

    try:
        for resource, doc in ((POLICIES, policy), (BINDINGS, binding)):
            await manager.patch(
                resource, POLICY, doc, patch_type=PatchType.APPLY,
                field_manager=FIELD_MANAGER, force=True,
            )  # fmt: skip
        await eventually(refused, timeout=60, what="the pod policy in force")
        yield
    finally:
        for resource in (BINDINGS, POLICIES):
            with contextlib.suppress(ApiError):
                await manager.delete(resource, POLICY)
        await eventually(lifted, timeout=60, what="the pod policy lifted")


async def test_a_policy_quoting_a_quota_refusal_holds_the_job_a_real_quota_does_not(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    manager, namespace = clients["manager"], relay.namespace
    async with pods_refused_quoting_quota(manager, namespace):
        submitted = await relay.submit(job_manifest("quoted"))
        event = await relay.wait_event(
            submitted["metadata"]["uid"],
            lambda e: e.get("reason") == "PodAdmissionRefused",
            timeout=60,
            what="a PodAdmissionRefused Warning",
        )
        assert f"ValidatingAdmissionPolicy '{POLICY}'" in event["message"], event["message"]
        await never_placed(relay, "quoted")
    # Lifted: asked again, and it runs.
    done = await relay.wait_finished("quoted", timeout=90)
    assert is_true(done, "Complete"), done.get("status")

    # The manager's own quota counts its own pods; these run on a worker: no hold.
    await manager.create(
        RESOURCE_QUOTAS,
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
         "spec": {"hard": {"pods": "0"}}},
        namespace=namespace,
    )  # fmt: skip

    async def quota_refuses() -> bool:
        try:
            await manager.create(PODS, pod_manifest("counted"), namespace=namespace, dry_run=True)
        except ApiError as error:
            return "exceeded quota: no-pods" in error.message
        return False

    await eventually(quota_refuses, timeout=60, what="the quota in force")
    await relay.submit(job_manifest("under-quota"))
    await relay.verify("under-quota", outcome="Complete")


async def test_a_template_edit_of_a_suspended_job_is_admitted_before_its_mirror_takes_it(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    """A Job placed (by hand) while suspended has a mirror that never started; its
    template's scheduling directives may still change, and the change is new pods:
    the manager's admission judges them before the mirror takes them."""
    manager, namespace = clients["manager"], relay.namespace
    body = job_manifest("edited", suspend=True)
    body["metadata"]["annotations"] = {CLUSTER_ANNOTATION: relay.workers[0]}
    await relay.submit(body)

    async def mirror() -> dict[str, Any] | None:
        # A preset is placed anew once admitted (issue 33): on whichever worker it went.
        for worker in relay.workers:
            found = relay.jobs_named("edited", worker)
            if found:
                return found[-1]
        return None

    created = await eventually(mirror, timeout=60, what="the suspended mirror on a worker")
    assert created["spec"]["suspend"] is True
    forbidden = pod_manifest("forbidden")
    forbidden["metadata"]["labels"] = {"forbidden-here": "yes"}
    message = "pods labelled forbidden-here may not run"
    allowed = "!has(object.metadata.labels) || !('forbidden-here' in object.metadata.labels)"
    async with pods_refused(manager, namespace, allowed, message, forbidden):
        edited = await manager.patch(
            JOBS, "edited",
            {"spec": {"template": {"metadata": {"labels": {"forbidden-here": "yes"}}}}},
            namespace=namespace,
        )  # fmt: skip
        event = await relay.wait_event(
            edited["metadata"]["uid"],
            lambda e: e.get("reason") == "PodAdmissionRefused" and message in e["message"],
            timeout=60,
            what="a PodAdmissionRefused Warning for the edit",
        )
        assert event["type"] == "Warning"
        current = await mirror()
        assert current is not None
        labels = current["spec"]["template"]["metadata"].get("labels") or {}
        assert "forbidden-here" not in labels, labels

    # Lifted: asked again, and the mirror takes the edit.
    async def edit_reached_the_mirror() -> bool:
        current = await mirror()
        labels = (current or {})["spec"]["template"]["metadata"].get("labels") or {}
        return labels.get("forbidden-here") == "yes"

    await eventually(edit_reached_the_mirror, timeout=60, what="the edit on the mirror")


CONTROLLER_ARGS = ["--unplaceable-retry", "2"]
