"""Pod Security follows the Job: the manager namespace's level decides, and workers enforce it too.

The manager never creates pods for a delegated Job, so without jobrelay's check a
``restricted`` namespace would only warn about a privileged Job whose pods then
run on a worker. These tests label a manager namespace ``restricted`` and show
that the manager's own admission (a dry-run create of a Pod from the template)
keeps such a Job off every worker, with Kubernetes' wording in a Warning Event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import NAMESPACES, PODS
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION
from tests.e2e.support import Relay
from tests.kubetools import is_true, job_manifest

pytestmark = pytest.mark.e2e

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
# What the restricted level asks of every container (and the pod).
COMPLIANT_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def privileged_job(name: str) -> dict[str, Any]:
    body = job_manifest(name)
    body["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    return body


def compliant_job(name: str) -> dict[str, Any]:
    body = job_manifest(name)
    body["spec"]["template"]["spec"]["containers"][0]["securityContext"] = COMPLIANT_CONTAINER
    return body


@pytest.fixture
async def restricted(
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
    make_relay: Callable[[str], Awaitable[Relay]],
    clients: dict[str, ApiClient],
) -> Relay:
    """A namespace on the manager only, labelled restricted: jobrelay creates it on workers."""
    namespace = await make_namespace(["manager"])
    await clients["manager"].patch(NAMESPACES, namespace, {"metadata": {"labels": RESTRICTED}})
    return await make_relay(namespace)


async def test_a_privileged_job_in_a_restricted_namespace_runs_on_no_worker(
    restricted: Relay, clients: dict[str, ApiClient]
) -> None:
    relay, namespace = restricted, restricted.namespace

    refused = await relay.submit(privileged_job("privileged"))
    uid = refused["metadata"]["uid"]
    event = await relay.wait_event(
        uid,
        lambda e: e.get("reason") == "PodSecurityViolation",
        timeout=60,
        what="a PodSecurityViolation Warning",
    )
    assert event["type"] == "Warning"
    # Kubernetes' own words: the level and the rule broken.
    assert 'violates PodSecurity "restricted:latest"' in event["message"], event["message"]
    assert "privileged" in event["message"], event["message"]

    # A compliant Job of the same namespace runs, and jobrelay creates the namespace on
    # its worker with the manager's Pod Security labels: the worker enforces them too.
    await relay.submit(compliant_job("compliant"))
    done = await relay.verify("compliant", outcome="Complete")
    created = await clients[done.cluster].get(NAMESPACES, namespace)
    labels = created["metadata"].get("labels") or {}
    assert {k: labels.get(k) for k in RESTRICTED} == RESTRICTED, labels

    # Meanwhile the privileged Job was never placed, and no worker has it or a pod of it.
    held = await relay.get("privileged")
    assert CLUSTER_ANNOTATION not in (held["metadata"].get("annotations") or {})
    assert not (held.get("status") or {}).get("startTime"), held.get("status")
    for worker in relay.workers:
        assert relay.jobs_named("privileged", worker) == [], f"it reached {worker}"
        pods = await clients[worker].list(PODS, namespace=namespace)
        assert all(not pod["metadata"]["name"].startswith("privileged-") for pod in pods.items), (
            pods.items
        )


async def test_a_held_job_runs_once_its_namespace_allows_it(
    restricted: Relay, clients: dict[str, ApiClient]
) -> None:
    """The verdict is asked again: an admin who relabels the namespace lets the Job run."""
    relay, namespace = restricted, restricted.namespace
    submitted = await relay.submit(privileged_job("later"))
    await relay.wait_event(
        submitted["metadata"]["uid"],
        lambda e: e.get("reason") == "PodSecurityViolation",
        timeout=60,
        what="held for Pod Security",
    )
    await clients["manager"].patch(
        NAMESPACES,
        namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
    )
    # Retried at --unplaceable-retry (the module runs with a short one).
    done = await relay.wait_finished("later", timeout=90)
    assert is_true(done, "Complete"), done.get("status")


CONTROLLER_ARGS = ["--unplaceable-retry", "2"]
