"""The stand-in operators on a real apiserver with the ecosystem's real CRDs: every status
they write is accepted through /status (the CRDs judge it), each kind goes through its
lifecycle (created, running, succeeded or failed; suspended and resumed), and objects
another controller manages are left alone."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kinds.mirror_pods import mirror_pod_uids, pods_of_mirror
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS
from jobrelay.localfleet.standin.driver import StandinDriver
from jobrelay.localfleet.standin.standin_rules import next_step
from tests.ecosystem import BY_KIND, ecosystem_kinds, manifest, suspend_patch
from tests.kubetools import eventually

pytestmark = pytest.mark.integration
__all__ = ["ecosystem_kinds"]  # the session fixture, imported for this module's tests

Obj = dict[str, Any]
WORKER = "worker-1"
JOB_KINDS = ["RayJob", "TrainJob", "PyTorchJob", "MPIJob"]
# An annotation of the tests' own, which the stand-ins never read (as in tests/e2e).
NUDGE_ANNOTATION = "test.jobrelay.dev/nudge"
_nudges = itertools.count(1)


@pytest.fixture
async def standin(
    ecosystem_kinds: list[str], clients: dict[str, ApiClient], namespace: str
) -> AsyncIterator[StandinDriver]:
    """The stand-in on one worker (torn down before the test's namespace goes)."""
    async with StandinDriver(clients[WORKER]) as driver:
        assert sorted(driver.informers) == sorted(BY_KIND), driver.informers
        yield driver
        unsettled = [
            f"{kind} {key}: {step.status}"
            for kind, informer in driver.informers.items()
            for key, obj in informer.items()
            if key.startswith(f"{namespace}/")
            and (step := next_step(BY_KIND[kind], obj, driver.clock())).status is not None
            and step.status != obj.get("status")
        ]
    assert not driver.refused, f"the CRDs refused status writes: {driver.refused}"
    assert not driver.unmade, f"the apiserver refused what the operators make: {driver.unmade}"
    assert not driver.altered, f"the CRDs stored statuses otherwise: {driver.altered}"
    # A field the CRD's schema prunes would be written again and again.
    assert not unsettled, f"statuses the apiserver did not keep as written: {unsettled}"


def true_conditions(obj: Mapping[str, Any]) -> set[str]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


def finished_as(obj: Mapping[str, Any]) -> str | None:
    """Succeeded, Failed or None, the way each kind says it."""
    kind, status = obj["kind"], obj.get("status") or {}
    if kind == "RayJob":
        return {"Complete": "Succeeded", "Failed": "Failed"}.get(
            status.get("jobDeploymentStatus") or ""
        )
    true = true_conditions(obj)
    if kind == "TrainJob":
        return "Succeeded" if "Complete" in true else "Failed" if "Failed" in true else None
    return next((end for end in ("Succeeded", "Failed") if end in true), None)


def is_running(obj: Mapping[str, Any]) -> bool:
    kind, status = obj["kind"], obj.get("status") or {}
    if kind == "RayJob":
        return status.get("jobDeploymentStatus") == "Running"
    if kind == "TrainJob":  # Trainer v2.0.0 writes nothing while it runs
        return "Suspended" not in true_conditions(obj) and finished_as(obj) is None
    return "Running" in true_conditions(obj)


def is_suspended(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status") or {}
    if obj["kind"] == "RayJob":
        return status.get("jobDeploymentStatus") == "Suspended"
    if obj["kind"] == "RayCluster":
        return status.get("state") == "suspended"
    return "Suspended" in true_conditions(obj)


async def wait(
    client: ApiClient, obj: Obj, predicate: Callable[[Obj], bool], what: str, timeout: float = 30
) -> Obj:
    resource = BY_KIND[obj["kind"]].resource
    meta = obj["metadata"]

    async def check() -> Obj | None:
        found = await client.get(resource, meta["name"], namespace=meta["namespace"])
        return found if predicate(found) else None

    return await eventually(check, timeout=timeout, what=f"{obj['kind']} {meta['name']}: {what}")


async def looked_at(standin: StandinDriver, client: ApiClient, obj: Obj) -> Obj:
    """``obj`` as stored once the stand-in has looked at it since this call, so that what
    it did not write can be checked: nudged, then its kind's informer past the nudge's
    resourceVersion with the stand-in idle. Sound because the informer hands an event's
    key to the stand-in's queue before its version moves past it, and an idle stand-in
    has driven every key queued until then (the nudged one, at the time of the look)."""
    resource = BY_KIND[obj["kind"]].resource
    meta = obj["metadata"]
    nudge = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(next(_nudges))}}}
    touched = await client.patch(resource, meta["name"], nudge, namespace=meta["namespace"])
    version = int(touched["metadata"]["resourceVersion"])
    informer = standin.informers[obj["kind"]]

    async def settled() -> bool:
        return int(informer.resource_version or 0) >= version and standin.idle

    await eventually(settled, timeout=30, interval=0.05, what=f"{meta['name']} looked at")
    return await client.get(resource, meta["name"], namespace=meta["namespace"])


async def create(client: ApiClient, namespace: str, body: Obj) -> Obj:
    resource = BY_KIND[body["kind"]].resource
    return await client.create(resource, body, namespace=namespace)


@pytest.mark.parametrize("kind", JOB_KINDS)
@pytest.mark.parametrize("outcome", ["Succeeded", "Failed"])
async def test_each_kind_runs_to_the_outcome_its_annotation_asks(
    standin: StandinDriver, clients: dict[str, ApiClient], namespace: str, kind: str, outcome: str
) -> None:
    client = clients[WORKER]
    obj = await create(client, namespace, manifest(kind, "run", outcome=outcome, run_seconds=2))
    await wait(client, obj, is_running, "running")
    done = await wait(client, obj, lambda o: finished_as(o) is not None, "finished")
    assert finished_as(done) == outcome, done["status"]
    again = await looked_at(standin, client, done)  # finished: nothing more is written
    assert again["status"] == done["status"]


async def test_a_raycluster_becomes_ready_and_stays(
    standin: StandinDriver, clients: dict[str, ApiClient], namespace: str
) -> None:
    client = clients[WORKER]
    obj = await create(client, namespace, manifest("RayCluster", "cluster"))
    ready = await wait(
        client, obj, lambda o: (o.get("status") or {}).get("state") == "ready", "ready"
    )
    assert true_conditions(ready) == {"HeadPodReady", "RayClusterProvisioned"}
    assert (await looked_at(standin, client, ready))["status"] == ready["status"]


@pytest.mark.parametrize("kind", [*JOB_KINDS, "RayCluster"])
async def test_each_kind_suspends_and_resumes(
    standin: StandinDriver, clients: dict[str, ApiClient], namespace: str, kind: str
) -> None:
    client = clients[WORKER]
    resource = BY_KIND[kind].resource
    obj = await create(client, namespace, manifest(kind, "pause", run_seconds=4))
    if kind == "RayCluster":
        await wait(client, obj, lambda o: (o.get("status") or {}).get("state") == "ready", "ready")
    else:
        await wait(client, obj, is_running, "running")
    running_since = time.monotonic()  # or earlier: its 4 s run ends by running_since + 4
    await client.patch(resource, "pause", suspend_patch(kind, True), namespace=namespace)
    suspended = await wait(client, obj, is_suspended, "suspended")
    if kind != "RayCluster":  # a RayCluster has no end to wait for
        # Time itself: past the end of its run, a look at it must still find it suspended.
        await asyncio.sleep(max(0.0, running_since + 4 - time.monotonic()))
    held = await looked_at(standin, client, suspended)
    assert held["status"] == suspended["status"]
    await client.patch(resource, "pause", suspend_patch(kind, False), namespace=namespace)
    if kind == "RayCluster":
        await wait(
            client, obj, lambda o: (o.get("status") or {}).get("state") == "ready", "ready again"
        )
    else:
        done = await wait(client, obj, lambda o: finished_as(o) is not None, "finished")
        assert finished_as(done) == "Succeeded"


@pytest.mark.parametrize("kind", [*JOB_KINDS, "RayCluster"])
async def test_an_object_of_another_controller_is_left_alone(
    standin: StandinDriver, clients: dict[str, ApiClient], namespace: str, kind: str
) -> None:
    client = clients[WORKER]
    body = manifest(kind, "theirs", managed_by="kueue.x-k8s.io/multikueue", run_seconds=0)
    obj = await create(client, namespace, body)
    mine = await create(client, namespace, manifest(kind, "mine", run_seconds=0))
    # The stand-in drives its own, and has looked at the other since without writing.
    await wait(client, mine, lambda o: bool(o.get("status")) or kind == "TrainJob", "driven")
    theirs = await looked_at(standin, client, obj)
    assert not theirs.get("status"), theirs.get("status")


async def test_a_trainjob_defaulted_to_its_own_controller_is_driven(
    standin: StandinDriver, clients: dict[str, ApiClient], namespace: str
) -> None:
    """Trainer's CRD defaults spec.managedBy to its own controller: a mirror created
    without one is still the (stand-in) operator's."""
    client = clients[WORKER]
    obj = await create(client, namespace, manifest("TrainJob", "defaulted", run_seconds=1))
    assert obj["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    done = await wait(client, obj, lambda o: finished_as(o) is not None, "finished")
    assert finished_as(done) == "Succeeded"


@pytest.mark.parametrize("kind", [*JOB_KINDS, "RayCluster"])
async def test_each_kind_makes_the_pods_its_operator_makes_and_they_are_its_own(
    standin: StandinDriver, clients: dict[str, ApiClient], namespace: str, kind: str
) -> None:
    """The pods (and the objects that make pods) come with the operators' labels and
    controller references: the kind's adapter finds them as the object's, by UID."""
    client = clients[WORKER]
    adapter = next(k for k in DEDICATED.values() if k.ref.kind == kind)
    obj = await create(client, namespace, manifest(kind, "made", run_seconds=30))
    if kind == "RayCluster":
        await wait(client, obj, lambda o: (o.get("status") or {}).get("state") == "ready", "ready")
    else:
        await wait(client, obj, is_running, "running")

    async def its_pods() -> list[Obj] | None:
        live = await wait(client, obj, lambda o: True, "read")
        hops = []
        for hop in adapter.owner_hops(live):
            try:
                hops.append((hop, await client.get(hop.ref, hop.name, namespace=namespace)))
            except ApiError as error:
                if not error.is_not_found:
                    raise
        uids = mirror_pod_uids(adapter, live, hops)
        found: list[Obj] = []
        for selector in adapter.pod_selectors(live):
            listed = await client.list(PODS, namespace=namespace, label_selector=selector)
            found += pods_of_mirror(adapter, uids, listed.items)
        wanted = {"RayCluster": 3, "RayJob": 4, "PyTorchJob": 2, "MPIJob": 2, "TrainJob": 1}
        return found if len(found) >= wanted[kind] else None

    pods = await eventually(its_pods, timeout=60, what=f"the pods of {kind} made")
    assert standin.made > 0 and all(pod["spec"].get("containers") for pod in pods)
