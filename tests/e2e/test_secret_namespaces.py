"""The controller reads Secrets only in the namespaces opened to Secret copying (issue 33).

This module's controller runs with ``--dependency-secret-namespaces`` naming one other
namespace, as the chart runs it with ``dependencies.secretNamespaces``: a Job of the
test's namespace that reads a Secret is held with MissingDependency saying the namespace
is not opened, and gets no mirror; a Job there that needs only a ConfigMap (read in every
namespace) runs with its copy.
"""

from __future__ import annotations

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import CONFIGMAPS, JOBS, SECRETS
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION
from tests.e2e.support import Relay, placement
from tests.kubetools import job_manifest

pytestmark = pytest.mark.e2e

OPENED = "secrets-opened-elsewhere"
CONTROLLER_ARGS = ["--dependency-secret-namespaces", OPENED]


async def test_a_secret_outside_the_opened_namespaces_holds_its_job_saying_why(
    relay: Relay, clients: dict[str, ApiClient], namespace: str
) -> None:
    manager = clients["manager"]
    await manager.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
         "stringData": {"token": "s3cret"}},
        namespace=namespace,
    )  # fmt: skip
    manifest = job_manifest("needs-secret")
    manifest["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"secretRef": {"name": "creds"}}
    ]
    job = await relay.submit(manifest)
    event = await relay.wait_event(
        job["metadata"]["uid"], lambda e: e.get("reason") == "MissingDependency",
        what="a MissingDependency Event",
    )  # fmt: skip
    message = event["message"]
    assert message.startswith(
        f"secret/creds cannot be copied: namespace {namespace} is not opened to Secret copying"
    ), message
    assert "dependencies.secretNamespaces" in message, message
    job = await relay.get("needs-secret")
    assert not placement(job), placement(job)
    note = (job["metadata"].get("annotations") or {}).get(NOT_PLACED_ANNOTATION, "")
    assert note.startswith("MissingDependency: secret/creds cannot be copied"), note
    for worker in relay.workers:
        assert not (await clients[worker].list(JOBS, namespace=namespace)).items

    # ConfigMaps are read everywhere: a Job that needs one only runs, with its copy.
    await manager.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
         "data": {"mode": "fast"}},
        namespace=namespace,
    )  # fmt: skip
    mounting = job_manifest("needs-configmap")
    mounting["spec"]["template"]["spec"]["volumes"] = [
        {"name": "settings", "configMap": {"name": "settings"}}
    ]
    await relay.submit(mounting)
    done = await relay.verify("needs-configmap", outcome="Complete", timeout=60)
    # Copied before its mirror was made (the copy goes with the finished mirror).
    copied = {record.get("msg") for record in relay.controller.run_records()}
    assert f"created copy of configmap/settings in {namespace} on {done.cluster}" in copied
