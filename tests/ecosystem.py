"""The ecosystem's kinds in tests: their real CRDs (built by `jobrelay fleet build`,
resolved here without building) installed on a cluster by server-side apply and waited
for until served, and manifests of each kind that their CRDs accept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS
from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries import ecosystem_crds as crd_files
from jobrelay.localfleet.standin.standin_rules import KINDS, StandinKind
from tests.kubetools import eventually, is_true

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

Obj = dict[str, Any]
FIELD_MANAGER = "jobrelay-tests"
BY_KIND = {kind.resource.kind: kind for kind in KINDS}


def the_crds() -> list[Obj]:
    """The CRDs, or one clear failure (never a skip) when `jobrelay fleet build` has not run."""
    try:
        return crd_files.load_ecosystem_crds(crd_files.ecosystem_crds(print, build=False))
    except BinaryError as error:
        raise AssertionError(str(error)) from None


async def install_crds(client: ApiClient, crds: Iterable[Mapping[str, Any]]) -> None:
    """Server-side apply each CRD (idempotent: a reused fleet keeps them), then wait until
    each is Established and served by discovery."""
    crds = list(crds)
    for crd in crds:
        await client.patch(
            CRDS, crd["metadata"]["name"], crd, patch_type=PatchType.APPLY,
            field_manager=FIELD_MANAGER, force=True,
        )  # fmt: skip

    async def served() -> bool:
        for crd in crds:
            found = await client.get(CRDS, crd["metadata"]["name"])
            if not is_true(found, "Established"):
                return False
            spec = crd["spec"]
            storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
            try:
                resources = await client.discover(spec["group"], storage)
            except ApiError as error:
                if error.is_not_found:
                    return False
                raise
            if not any(r.get("name") == spec["names"]["plural"] for r in resources):
                return False
        return True

    await eventually(served, timeout=120, what=f"the ecosystem's CRDs served by {client.cluster}")


async def install_everywhere(clients: Iterable[ApiClient]) -> None:
    crds = the_crds()
    await asyncio.gather(*(install_crds(client, crds) for client in clients))


# -- manifests their CRDs accept -----------------------------------------------------


def _container(name: str) -> Obj:
    return {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }


def _pod_template(name: str) -> Obj:
    return {"spec": {"containers": [_container(name)], "restartPolicy": "Never"}}


def manifest(
    kind: str,
    name: str,
    *,
    managed_by: str | None = None,
    suspend: bool | None = None,
    outcome: str = "Succeeded",
    run_seconds: float = 3,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A small object of ``kind`` (RayJob, RayCluster, TrainJob, PyTorchJob, MPIJob), its
    stand-in annotations set, managedBy and suspend at the kind's own place."""
    standin = BY_KIND[kind]
    spec: Obj
    if kind == "RayJob":
        spec = {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": _ray_cluster_spec(),
        }
    elif kind == "RayCluster":
        spec = _ray_cluster_spec()
    elif kind == "TrainJob":
        spec = {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 1, "image": "registry.k8s.io/pause:3.10"},
        }
    elif kind == "PyTorchJob":
        spec = {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": _pod_template("pytorch"),
                },
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": _pod_template("pytorch"),
                },
            },
            "runPolicy": {},
        }
    elif kind == "MPIJob":
        spec = {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _pod_template("launcher")},
                "Worker": {"replicas": 1, "template": _pod_template("worker")},
            },
            "runPolicy": {},
        }
    else:
        raise ValueError(kind)
    place = _place(spec, standin)
    if managed_by is not None:
        place["managedBy"] = managed_by
    if suspend is not None:
        place["suspend"] = suspend
    return {
        "apiVersion": standin.resource.api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "labels": {"team": "e2e", **(labels or {})},
            "annotations": {
                "note": name,
                "standin.jobrelay.dev/outcome": outcome,
                "standin.jobrelay.dev/run-seconds": str(run_seconds),
            },
        },
        "spec": spec,
    }


def _place(spec: Obj, standin: StandinKind) -> Obj:
    """The object in ``spec`` holding managedBy and suspend for this kind."""
    place = spec
    for key in standin.fields_at[1:]:
        place = place.setdefault(key, {})
    return place


def _ray_cluster_spec() -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": _pod_template("ray-head")},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": 2,
                "minReplicas": 0,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": _pod_template("ray-worker"),
            }
        ],
    }


def managed_by(obj: Mapping[str, Any]) -> Any:
    standin = BY_KIND[obj["kind"]]
    place: Any = obj
    for key in standin.fields_at:
        place = (place or {}).get(key)
    return (place or {}).get("managedBy")


def suspend_patch(kind: str, suspend: bool) -> Obj:
    """The merge patch that sets suspend at the kind's place."""
    patch: Obj = {"suspend": suspend}
    for key in reversed(BY_KIND[kind].fields_at):
        patch = {key: patch}
    return patch


# -- the session's CRDs ----------------------------------------------------------------


@pytest.fixture(scope="session")
async def ecosystem_kinds(fleet: FleetHandle) -> list[str]:
    """The ecosystem's CRDs on the manager and every worker, installed on first use and
    left in place (a reused fleet keeps them: each apiserver holds ~300 MiB more with
    them, so `fleet up` does not install them; see docs/development.md). Import this
    fixture into a test module to use it. Returns the clusters."""
    clients = [fleet.client(name) for name in fleet.clusters]
    try:
        await install_everywhere(clients)
    finally:
        for client in clients:
            await client.aclose()
    return fleet.clusters
