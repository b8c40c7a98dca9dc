"""Logs and the mirror view for kinds other than Job, end to end: a RayJob and a
PyTorchJob dispatched for real, their pods made on the worker as KubeRay and the
training operator make them (the stand-in operators: a RayJob's RayCluster with its
head and worker pods and its submitter Job's pod; a PyTorchJob's master and worker
pods, each with the operators' labels and controller references), KWOK running them.

`jobrelay logs -n NS rayjob/NAME` and `kubectl get --raw
/apis/api.jobrelay.dev/v1alpha1/namespaces/NS/rayjobs/NAME/log` return the pod's lines
(every simulated pod prints ``cluster.SIMULATED_LOG``); `.../mirror` lists the mirror's
pods: those its kind's adapter says are its own, by UID (the mirror's, or that of an
object the mirror controls there), never a namesake's labelled like them.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import NAMESPACES, PODS
from jobrelay.localfleet.cluster import SIMULATED_LOG, Credential
from jobrelay.relayapi.managedby_webhook_rules import RELAY_ENABLED, RELAY_LABEL
from jobrelay.relayapi.route_rules import API_PATH, POD_HEADER
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available, manager_get, webhook_in_force
from tests.e2e.support import ControllerProcess, Relay
from tests.e2e.test_ecosystem_kinds import (
    BORROWED,
    KIND_FLAGS,
    RelayFor,
    _standins_healthy,
    relay_for,
    standin_operators,
    submit,
)
from tests.e2e.worker_identity import SERVICE_ACCOUNT
from tests.ecosystem import BY_KIND, ecosystem_kinds, manifest
from tests.kubetools import eventually

pytestmark = pytest.mark.e2e
# The fixtures this module shares with test_ecosystem_kinds.py.
__all__ = ["_standins_healthy", "ecosystem_kinds", "relay_for", "standin_operators"]

KINDS = ["RayJob", "PyTorchJob"]
CONTROLLER_ARGS = [
    *API_ARGS,
    *(arg for kind in KINDS for arg in ("--kind", f"{KIND_FLAGS[kind]}={BORROWED}")),
]
# Workers added as docs/add-a-worker.md says, their accounts granted these kinds.
WORKERS_ADDED = SERVICE_ACCOUNT
WORKER_KINDS = ["Job.v1.batch", *(KIND_FLAGS[kind] for kind in KINDS)]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, str]:
    return await api_available(controller, relay_fleet)


def lines(*texts: str) -> str:
    return "".join(f"{text}\n" for text in texts)


def path(namespace: str, kind: str, name: str, what: str) -> str:
    return f"{API_PATH}/namespaces/{namespace}/{BY_KIND[kind].resource.plural}/{name}/{what}"


# The pods each kind's operator makes of a mirror named NAME (the stand-ins' names; the
# submitter's pod is named by the worker's Job controller), and a selector of them there.
def expected_pods(kind: str, name: str) -> tuple[str, list[str]]:
    if kind == "RayJob":
        cluster = f"{name}-standin"
        return f"ray.io/cluster={cluster}", [
            f"{cluster}-head", f"{cluster}-workers-worker-0", f"{cluster}-workers-worker-1"
        ]  # fmt: skip
    return f"training.kubeflow.org/job-name={name}", [f"{name}-master-0", f"{name}-worker-0"]


async def running(client: ApiClient, namespace: str, selector: str, count: int) -> list[Obj]:
    async def check() -> list[Obj] | None:
        found = await client.list(PODS, namespace=namespace, label_selector=selector)
        up = [p for p in found.items if (p.get("status") or {}).get("phase") == "Running"]
        return up if len(up) >= count else None

    return await eventually(check, timeout=90, what=f"{count} running pods of {selector}")


async def run(*argv: str, timeout: float = 60) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("kind", KINDS)
async def test_logs_and_the_mirrors_pods_of_a_kind(
    kind: str,
    relay_for: RelayFor,
    clients: dict[str, ApiClient],
    relay_fleet: FleetHandle,
    registered: dict[str, str],
) -> None:
    relay: Relay = await relay_for(kind)
    namespace = relay.namespace
    created = await submit(relay, kind, "logs", run_seconds=600)
    worker = await relay.wait_placed("logs", timeout=60)
    _, mirror = await relay.wait_mirror(created["metadata"]["uid"])
    selector, names = expected_pods(kind, "logs")
    labelled = len(names)  # the pods the selector finds there
    await running(clients[worker], namespace, selector, labelled)
    if kind == "RayJob":
        # Once the RayJob runs, KubeRay's submitter Job makes its pod: the newest.
        (submitter,) = await running(
            clients[worker], namespace, "batch.kubernetes.io/job-name=logs", 1
        )
        names.append(submitter["metadata"]["name"])
    # A namesake's pod there, labelled like the mirror's, that nothing of it controls.
    label, _, value = selector.partition("=")
    await clients[worker].create(PODS, {
        "metadata": {"name": "logs-namesake", "labels": {label: value},
                     "annotations": {"fleet.jobrelay.dev/outcome": "run-forever"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }, namespace=namespace)  # fmt: skip
    await running(clients[worker], namespace, selector, labelled + 1)
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)

    view = await manager_get(admin, path(namespace, kind, "logs", "mirror"))
    assert view.status_code == 200, view.text
    body = view.json()
    assert body["cluster"] == worker
    assert body["mirror"]["metadata"]["uid"] == mirror["metadata"]["uid"]
    assert sorted(p["name"] for p in body["pods"]) == sorted(names)
    assert all(p["phase"] == "Running" and p["node"] for p in body["pods"])

    log = await manager_get(admin, path(namespace, kind, "logs", "log"))
    assert log.status_code == 200, log.text
    assert log.text == lines(*SIMULATED_LOG)
    assert log.headers[POD_HEADER] in names
    every = await manager_get(admin, path(namespace, kind, "logs", "log"), allPods="true")
    assert sorted(every.text.splitlines()) == sorted(
        f"[pod/{pod}] {line}" for pod in names for line in SIMULATED_LOG
    )

    plural = BY_KIND[kind].resource.plural
    code, out, err = await run(
        sys.executable, "-m", "jobrelay", "logs", "--kubeconfig", str(admin), "-n", namespace,
        f"{kind.lower()}/logs",
    )  # fmt: skip
    assert (code, out) == (0, lines(*SIMULATED_LOG)), err
    code, out, err = await run(
        KUBECTL, "--kubeconfig", str(admin), "get", "--raw",
        f"/apis/api.jobrelay.dev/v1alpha1/namespaces/{namespace}/{plural}/logs/log",
    )  # fmt: skip
    assert (code, out) == (0, lines(*SIMULATED_LOG)), err
    await relay.manager.delete(BY_KIND[kind].resource, "logs", namespace=namespace)
    await relay.wait_mirror_gone(created["metadata"]["uid"], timeout=60)


async def test_a_rayjob_that_is_not_there_is_said(
    relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, _, err = await run(
        sys.executable, "-m", "jobrelay", "logs", "--kubeconfig", str(admin), "-n", "default",
        "rayjob/nothing-here",
    )  # fmt: skip
    assert code == 3 and "not found" in err, err


@pytest.mark.parametrize("kind", KINDS)
async def test_in_an_enabled_namespace_a_kind_gets_its_borrowed_managed_by(
    kind: str,
    relay_for: RelayFor,
    clients: dict[str, ApiClient],
    registered: dict[str, str],
) -> None:
    """The webhook registered with the API (issue 34): written without managedBy, a RayJob
    gets the value `--kind` borrows at spec.managedBy, a PyTorchJob at
    spec.runPolicy.managedBy, and each is relayed."""
    relay: Relay = await relay_for(kind)
    enabled = {"metadata": {"labels": {RELAY_LABEL: RELAY_ENABLED}}}
    await clients["manager"].patch(NAMESPACES, relay.namespace, enabled)

    def borrowed(made: dict[str, Any]) -> bool:
        place = made["spec"]["runPolicy"] if kind == "PyTorchJob" else made["spec"]
        return bool(place.get("managedBy") == BORROWED)

    probe = manifest(kind, "probe")
    await webhook_in_force(clients["manager"], relay.resource, relay.namespace, probe, borrowed)
    created = await relay.submit(manifest(kind, "defaulted"), managed=False)
    assert borrowed(created), created["spec"]
    await relay.wait_placed("defaulted", timeout=60)
    await relay.wait_mirror(created["metadata"]["uid"])
