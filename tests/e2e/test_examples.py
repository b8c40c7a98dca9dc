"""Every manifest in examples/ applied as a tenant would, on the local fleet.

The module's controller runs Job, JobSet and the ecosystem's kinds (their CRDs installed
everywhere first), and registers the aggregated API and, with it, the managedBy webhook.
Each example is applied unchanged (`kubectl apply --server-side`) in a namespace
labelled ``jobrelay.dev/relay: enabled``: the apiserver accepts it, the webhook gives it
the install's managedBy (none of the files sets it but hello.yaml), and jobrelay places
it on a worker and creates its mirror there. Jobs and the JobSet run to completion (KWOK
and the real JobSet controller run them); the Ray, Trainer, PyTorch and MPI mirrors are
only checked to be there (no operator drives them in this module). The claim the PVC
example mounts is made Bound on the second worker, which the Job must go to. The
RelayQueues (cluster-scoped) are applied, read back and deleted.

``EXAMPLES`` lists every file; tests/unit/test_examples.py fails on a file it misses.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, MUTATING_WEBHOOK_CONFIGURATIONS, NAMESPACES, RELAY_QUEUES
from jobrelay.relayapi.managedby_webhook_rules import (
    RELAY_ENABLED,
    RELAY_LABEL,
    WEBHOOK_CONFIGURATION,
)
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available, webhook_in_force
from tests.e2e.support import ControllerProcess, placement
from tests.e2e.test_data_placement import Volumes
from tests.e2e.test_ecosystem_kinds import BORROWED, KIND_FLAGS
from tests.ecosystem import BY_KIND, ecosystem_kinds, managed_by
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e
__all__ = ["ecosystem_kinds"]  # the session fixture: the CRDs on every cluster

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
RELAY = "jobrelay.dev/relay"


def managed_by_relay(job: dict[str, Any]) -> bool:
    return bool(job["spec"].get("managedBy") == RELAY)


# Each file: the workloads it holds, (kind, name), and whether the local fleet runs them
# to their end here. relayqueues.yaml holds none: it is applied by its own test.
EXAMPLES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "hello.yaml": (("Job", "hello", True),),
    "job.yaml": (("Job", "example-job", True),),
    "indexed-job.yaml": (("Job", "example-indexed-job", True),),
    "job-with-config.yaml": (("Job", "example-job-with-config", True),),
    "job-with-pvc.yaml": (("Job", "example-job-with-pvc", True),),
    "jobset.yaml": (("JobSet", "example-jobset", True),),
    "rayjob.yaml": (("RayJob", "example-rayjob", False),),
    "raycluster.yaml": (("RayCluster", "example-raycluster", False),),
    "trainjob.yaml": (("TrainJob", "example-trainjob", False),),
    "pytorchjob.yaml": (("PyTorchJob", "example-pytorchjob", False),),
    "mpijob.yaml": (("MPIJob", "example-mpijob", False),),
    "relayqueues.yaml": (),
}
QUEUE_FILE = "relayqueues.yaml"
PVC_CLAIM = "example-data"  # the claim job-with-pvc.yaml mounts
CONTROLLER_ARGS = [
    *API_ARGS,
    # Finished mirrors kept a while (the e2e default deletes them at once): each is
    # looked for after the examples before it finished.
    "--finished-mirror-ttl", "10m",
    "--kind", "Job.v1.batch", "--kind", JobSetKind.ref.name,
    *(arg for flag in KIND_FLAGS.values() for arg in ("--kind", f"{flag}={BORROWED}")),
]  # fmt: skip
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def resource_of(kind: str) -> Resource:
    if kind == "Job":
        return JOBS
    if kind == "JobSet":
        return JobSetKind.ref
    return BY_KIND[kind].resource


def expected_managed_by(obj: dict[str, Any]) -> Any:
    """Where this install's value is, for the object's kind."""
    if obj["kind"] in ("Job", "JobSet"):
        return obj["spec"].get("managedBy")
    return managed_by(obj)


def finished(obj: dict[str, Any]) -> bool:
    if obj["kind"] == "JobSet":
        return is_true(obj, "Completed") or is_true(obj, "Failed")
    return is_true(obj, "Complete") or is_true(obj, "Failed")


async def kubectl_apply(fleet: FleetHandle, path: Path, *namespace: str) -> str:
    """`kubectl apply --server-side -f PATH` on the manager as its admin; the output."""
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(fleet.kubeconfig("manager")), "apply", "--server-side",
        *(("-n", *namespace) if namespace else ()), "-f", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    text = output.decode()
    assert process.returncode == 0, f"kubectl apply -f {path.name}:\n{text}"
    return text


@pytest.fixture(scope="module", autouse=True)
def _crds_first(ecosystem_kinds: list[str]) -> list[str]:
    """The ecosystem CRDs everywhere before the controller (autouse module fixtures come
    first): `--kind RayJob...` needs the manager to serve them."""
    return ecosystem_kinds


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> None:
    """The APIService Available and the webhook configuration there."""
    await api_available(controller, relay_fleet)
    async with relay_fleet.client("manager") as manager:
        await manager.get(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)


async def test_every_example_is_accepted_and_relayed(
    registered: None,
    controller: ControllerProcess,
    relay_fleet: FleetHandle,
    clients: dict[str, ApiClient],
    namespace: str,
) -> None:
    manager = clients["manager"]
    await manager.patch(
        NAMESPACES, namespace, {"metadata": {"labels": {RELAY_LABEL: RELAY_ENABLED}}}
    )
    await webhook_in_force(manager, JOBS, namespace, job_manifest("probe"), managed_by_relay)
    data_worker = sorted(relay_fleet.workers)[-1]  # not where spread alone would go first
    volumes = Volumes(clients)
    try:
        await volumes.bound_claim(data_worker, namespace, PVC_CLAIM)
        for name, workloads in EXAMPLES.items():
            if workloads:
                await kubectl_apply(relay_fleet, EXAMPLES_DIR / name, namespace)
        for workloads in EXAMPLES.values():
            for kind, workload, runs in workloads:
                await assert_relayed(clients, namespace, kind, workload, runs)
        pvc_job = await manager.get(JOBS, "example-job-with-pvc", namespace=namespace)
        assert placement(pvc_job) == data_worker
    finally:
        await volumes.cleanup()


async def assert_relayed(
    clients: dict[str, ApiClient], namespace: str, kind: str, name: str, runs: bool
) -> None:
    """Given jobrelay's managedBy, placed, its mirror on that worker; finished well when
    the local fleet runs it."""
    resource, manager = resource_of(kind), clients["manager"]

    async def placed() -> tuple[dict[str, Any], str] | None:
        obj = await manager.get(resource, name, namespace=namespace)
        worker = placement(obj)
        return (obj, worker) if worker else None

    obj, worker = await eventually(placed, timeout=60, what=f"{kind} {name} placed")
    value = BORROWED if kind in KIND_FLAGS else RELAY
    assert expected_managed_by(obj) == value, (kind, name, obj["spec"])

    async def mirrored() -> dict[str, Any] | None:
        with contextlib.suppress(ApiError):
            found: dict[str, Any] = await clients[worker].get(resource, name, namespace=namespace)
            return found
        return None

    mirror = await eventually(mirrored, timeout=60, what=f"the mirror of {kind} {name}")
    assert mirror["metadata"]["name"] == name
    if not runs:
        return

    async def done() -> dict[str, Any] | None:
        found: dict[str, Any] = await manager.get(resource, name, namespace=namespace)
        return found if finished(found) else None

    ended = await eventually(done, timeout=90, what=f"{kind} {name} finished")
    success = "Completed" if kind == "JobSet" else "Complete"
    assert is_true(ended, success), (kind, name, ended.get("status"))


@pytest.fixture
async def applied_queues(
    relay_fleet: FleetHandle, clients: dict[str, ApiClient]
) -> AsyncIterator[list[str]]:
    """examples/relayqueues.yaml applied; its queues deleted after (the catch-all queue
    it holds would take every namespace of the later modules)."""
    path = EXAMPLES_DIR / QUEUE_FILE
    names = [doc["metadata"]["name"] for doc in yaml.safe_load_all(path.read_text()) if doc]
    try:
        await kubectl_apply(relay_fleet, path)
        yield names
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                await clients["manager"].delete(RELAY_QUEUES, name)


async def test_the_relayqueues_example_is_accepted(
    controller: ControllerProcess, applied_queues: list[str], clients: dict[str, ApiClient]
) -> None:
    assert applied_queues == ["team-a", "team-b", "research", "zz-everyone-else"]
    for name in applied_queues:
        stored = await clients["manager"].get(RELAY_QUEUES, name)
        assert "weight" in stored["spec"], stored
