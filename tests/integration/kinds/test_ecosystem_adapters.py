"""The ecosystem kinds' adapters against their real CRDs on real apiservers: every object
jobrelay writes (the manager's object under the borrowed value, the mirror, its spec
patches, the manager's status) is one the CRD accepts; a value the CRD refuses is refused
there too, as jobrelay says at start; and Kueue's MultiKueue on a manager stops a start
under its value."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobrelay.controller import runner
from jobrelay.controller.options import ControllerOptions, KindSettings
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kinds.managed_by_claims import MULTIKUEUE, claim_problem
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS
from jobrelay.vocabulary.merge_patch import merge_patch
from tests.ecosystem import ecosystem_kinds, manifest

pytestmark = pytest.mark.integration
__all__ = ["ecosystem_kinds"]  # the session fixture, imported to be used

NOW = "2026-01-01T00:00:10Z"
T0 = "2026-01-01T00:00:00Z"
ADAPTERS: dict[str, WorkloadKind] = {
    kind.ref.kind: kind
    for name, kind in DEDICATED.items()
    if kind.ref.kind in ("RayJob", "RayCluster", "TrainJob", "PyTorchJob", "MPIJob")
}
# The value each kind is dispatched under: the borrowed one where the CRD demands it.
VALUE = {
    "RayJob": MULTIKUEUE,
    "RayCluster": MULTIKUEUE,
    "TrainJob": MULTIKUEUE,
    "PyTorchJob": "jobrelay.dev/relay",
    "MPIJob": MULTIKUEUE,
}


def cond(kind: str, reason: str = "R", **extra: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": "m",
            "lastTransitionTime": T0, **extra}  # fmt: skip


# What the worker's operator writes, as its Go types name it: running, then finished.
RUNNING: dict[str, dict[str, Any]] = {
    "RayJob": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": "j-1",
               "rayClusterName": "c-1", "startTime": T0, "observedGeneration": 1,
               "rayClusterStatus": {"state": "ready", "readyWorkerReplicas": 2}},
    "RayCluster": {"state": "ready", "readyWorkerReplicas": 2, "availableWorkerReplicas": 2,
                   "desiredWorkerReplicas": 2, "head": {"podIP": "10.0.0.1"},
                   "conditions": [cond("RayClusterProvisioned"), cond("HeadPodReady")]},
    "TrainJob": {"jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0,
                                 "active": 1, "suspended": 0}]},
    "PyTorchJob": {"conditions": [cond("Created", lastUpdateTime=T0),
                                  cond("Running", lastUpdateTime=T0)],
                   "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 1}},
                   "startTime": T0},
    "MPIJob": {"conditions": [cond("Created", lastUpdateTime=T0),
                              cond("Running", lastUpdateTime=T0)],
               "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 1}},
               "startTime": T0},
}  # fmt: skip
FINISHED: dict[str, dict[str, Any] | None] = {
    "RayJob": {**RUNNING["RayJob"], "jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
               "succeeded": 1, "endTime": NOW},
    "RayCluster": None,  # never finishes
    "TrainJob": {"jobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0,
                                 "active": 0, "suspended": 0}],
                 "conditions": [cond("Complete", "JobsCompleted")]},
    "PyTorchJob": {**RUNNING["PyTorchJob"], "completionTime": NOW,
                   "conditions": [cond("Succeeded", "PyTorchJobSucceeded", lastUpdateTime=NOW)]},
    "MPIJob": {**RUNNING["MPIJob"], "completionTime": NOW,
               "conditions": [cond("Succeeded", "MPIJobSucceeded", lastUpdateTime=NOW)]},
}  # fmt: skip


async def write_status(client: ApiClient, kind: WorkloadKind, obj: dict[str, Any],
                       status: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """As the executor writes it: a merge patch of /status, fenced by resourceVersion."""
    patch = {
        "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
        "status": merge_patch(obj.get("status") or {}, status),
    }
    return await client.patch(
        kind.ref, obj["metadata"]["name"], patch, namespace=obj["metadata"]["namespace"],
        subresource="status",
    )  # fmt: skip


@pytest.mark.parametrize("kind_name", list(VALUE))
async def test_every_write_of_the_adapter_is_one_the_real_crd_accepts(
    ecosystem_kinds: list[str], clients: dict[str, ApiClient], namespace: str, kind_name: str
) -> None:
    kind = ADAPTERS[kind_name]
    manager, worker = clients["manager"], clients[ecosystem_kinds[1]]
    assert claim_problem(kind, VALUE[kind_name]) is None
    body = manifest(kind_name, f"{kind_name.lower()}-1", managed_by=VALUE[kind_name])
    obj = await manager.create(kind.ref, body, namespace=namespace)
    assert kind.managed_by(obj) == VALUE[kind_name]

    # The mirror, without the field: the worker's operator runs it.
    mirror_body = kind.build_mirror(obj, controller_name="jobrelay.dev/relay", origin="o")
    mirror = await worker.create(kind.ref, mirror_body, namespace=namespace)
    assert kind.managed_by(mirror) in (None, "trainer.kubeflow.org/trainjob-controller")
    assert kind.spec_patch(obj, kind.slim_mirror(mirror)) is None

    # Suspend reaches the mirror as a patch the CRD takes.
    suspended = copy.deepcopy(obj)
    place = suspended["spec"]
    for step in kind.managed_by_field[1:-1]:
        place = place.setdefault(step, {})
    place["suspend"] = True
    patch = kind.spec_patch(suspended, kind.slim_mirror(mirror))
    assert patch is not None
    mirror = await worker.patch(kind.ref, mirror["metadata"]["name"], patch, namespace=namespace)
    assert kind.is_suspended(mirror)

    # The operator's statuses on the mirror, copied to the manager through running to done.
    for theirs in (RUNNING[kind_name], FINISHED[kind_name]):
        if theirs is None:
            continue
        mirror = await write_status(worker, kind, mirror, theirs)
        status = kind.next_status(obj, kind.slim_mirror(mirror), now=NOW)
        assert status is not None
        obj = await write_status(manager, kind, obj, status)
    if FINISHED[kind_name] is not None:
        assert kind.finish(obj) is not None and kind.finish(obj).succeeded  # type: ignore[union-attr]
    else:
        assert kind.finish(obj) is None and kind.shows_running(obj)


@pytest.mark.parametrize("kind_name", ["RayJob", "TrainJob"])
async def test_the_failed_status_is_one_the_real_crd_accepts(
    ecosystem_kinds: list[str], clients: dict[str, ApiClient], namespace: str, kind_name: str
) -> None:
    del ecosystem_kinds
    kind = ADAPTERS[kind_name]
    body = manifest(kind_name, "never-placed", managed_by=MULTIKUEUE)
    obj = await clients["manager"].create(kind.ref, body, namespace=namespace)
    status = kind.failed_status(obj, "Unplaceable", "no worker can run it", now=NOW)
    assert status is not None
    obj = await write_status(clients["manager"], kind, obj, status)
    finish = kind.finish(obj)
    assert finish is not None and not finish.succeeded and finish.reason == "Unplaceable"


@pytest.mark.parametrize("kind_name", ["RayJob", "RayCluster", "TrainJob"])
async def test_the_crds_refuse_jobrelays_own_name_as_jobrelay_says_at_start(
    ecosystem_kinds: list[str], clients: dict[str, ApiClient], namespace: str, kind_name: str
) -> None:
    del ecosystem_kinds
    kind = ADAPTERS[kind_name]
    assert claim_problem(kind, "jobrelay.dev/relay") is not None
    body = manifest(kind_name, "refused", managed_by="jobrelay.dev/relay")
    with pytest.raises(ApiError) as refused:
        await clients["manager"].create(kind.ref, body, namespace=namespace)
    assert refused.value.code == 422
    assert "managedBy" in str(refused.value) or "ManagedBy" in str(refused.value)


MULTIKUEUE_CLUSTERS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "multikueueclusters.kueue.x-k8s.io"},
    "spec": {
        "group": "kueue.x-k8s.io",
        "scope": "Cluster",
        "names": {"plural": "multikueueclusters", "singular": "multikueuecluster",
                  "kind": "MultiKueueCluster", "listKind": "MultiKueueClusterList"},
        "versions": [{"name": "v1beta1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}  # fmt: skip


async def test_multikueue_installed_stops_a_start_under_its_value(
    ecosystem_kinds: list[str], clients: dict[str, ApiClient]
) -> None:
    """On a cluster serving the ecosystem's CRDs (the last worker, so that no other test's
    manager ever sees Kueue): a start claiming MultiKueue's value is fine until Kueue's
    MultiKueueCluster is served there, and then refused with one line."""
    from tests.kubetools import eventually

    cluster = clients[ecosystem_kinds[-1]]
    options = ControllerOptions(
        kinds=KindSettings(
            names=("RayJob.v1.ray.io",), managed_by=(("RayJob.v1.ray.io", MULTIKUEUE),)
        )
    )
    assert [k.name for k in await runner.resolve_kinds(cluster, options)] == ["RayJob.v1.ray.io"]
    await cluster.create(CRDS, MULTIKUEUE_CLUSTERS_CRD)
    try:

        async def refused() -> bool:
            try:
                await runner.resolve_kinds(cluster, options)
            except runner.ConfigurationError as error:
                assert str(error).startswith(
                    "--kind RayJob.v1.ray.io=kueue.x-k8s.io/multikueue: Kueue's MultiKueue is "
                    "installed on this management cluster"
                )
                return True
            return False

        await eventually(refused, timeout=60, what="the start refused under MultiKueue's value")
        # jobrelay's own value on another kind is no business of MultiKueue's.
        own = ControllerOptions(kinds=KindSettings(names=("PyTorchJob.v1.kubeflow.org",)))
        assert await runner.resolve_kinds(cluster, own)
    finally:
        await cluster.delete(CRDS, MULTIKUEUE_CLUSTERS_CRD["metadata"]["name"])
