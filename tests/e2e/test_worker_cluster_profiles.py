"""Workers from ClusterProfiles on the real fleet (issue 37, part 3).

The ClusterProfile CRD of sigs.k8s.io/cluster-inventory-api v0.1.2 (from its Go module, as
`jobrelay fleet build` caches it) is installed on the manager, where a cluster manager would
have put it. The fleet's two workers are unregistered as WorkerClusters for the test (two
workers on one apiserver would both see one mirror) and described instead by ClusterProfiles,
each with an access provider whose exec plugin, named in the provider file, is a small script
printing an ExecCredential with the worker's token. With `jobrelay run --cluster-profiles`:

- both selected profiles become Connected workers (a Normal ClusterProfileConnected Event on
  each, their plugins ran), and a Job pinned to one of them is dispatched there and completes;
- a selected profile offering only a provider the file does not name is refused: a Warning
  ClusterProfileRefused Event on it saying why, and no plugin runs for it;
- an unselected profile (labels not matching) is no worker at all.

The workers are registered again as WorkerClusters (admin kubeconfigs) whatever happens.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import CLUSTER_PROFILES, EVENTS, JOBS
from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.ecosystem_crds import load_ecosystem_crds
from jobrelay.localfleet.binaries.inventory_crds import inventory_crds
from jobrelay.localfleet.cluster_files import Credential
from jobrelay.vocabulary.names import CLUSTERS_ANNOTATION, DEFAULT_CONTROLLER_NAME
from jobrelay.vocabulary.timestamps import rfc3339
from tests.conftest import FleetHandle
from tests.e2e.support import placement
from tests.e2e.test_kubeconfig_validation import running_controller
from tests.e2e.worker_identity import clusters_add
from tests.ecosystem import install_crds
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

SELECTOR = "jobrelay.dev/e2e=profiles"
EXEC_API = "client.authentication.k8s.io/v1"  # as the library's example file
SHOWS_WITHIN = 60.0


def plugin(tmp_path: Path, name: str, token: str) -> dict[str, Any]:
    """An exec plugin printing an ExecCredential with ``token``; it leaves a file once run."""
    script = tmp_path / f"{name}.py"
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": token}}
    script.write_text(
        "import pathlib\n"
        f"pathlib.Path({str(tmp_path / f'{name}.ran')!r}).touch()\n"
        f"print({json.dumps(json.dumps(credential))})\n"
    )
    return {"apiVersion": EXEC_API, "command": sys.executable, "args": [str(script)]}


def profile(
    namespace: str, name: str, provider: str, cluster: dict[str, Any], selected: bool = True
) -> dict[str, Any]:
    labels = {"jobrelay.dev/e2e": "profiles" if selected else "other"}
    return {
        "apiVersion": CLUSTER_PROFILES.api_version,
        "kind": CLUSTER_PROFILES.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"displayName": name, "clusterManager": {"name": "e2e"}},
        "status": {
            "conditions": [
                {"type": "ControlPlaneHealthy", "status": "True", "reason": "Probed",
                 "message": "healthy", "lastTransitionTime": rfc3339(0)},
            ],
            "accessProviders": [{"name": provider, "cluster": cluster}],
        },
    }  # fmt: skip


async def put_profile(manager: ApiClient, obj: dict[str, Any]) -> None:
    """Create it, then write its status as its cluster manager would (a subresource)."""
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    spec_only = {key: value for key, value in obj.items() if key != "status"}
    await manager.create(CLUSTER_PROFILES, spec_only, namespace=namespace)
    await manager.patch(CLUSTER_PROFILES, name, {"status": obj["status"]}, namespace=namespace,
                        subresource="status")  # fmt: skip


async def told(manager: ApiClient, namespace: str, name: str, reason: str) -> list[str]:
    """The messages of the Events of ``reason`` about the ClusterProfile ``name``."""
    listed = await manager.list(EVENTS, namespace=namespace)
    return [
        str(e.get("message") or e.get("note") or "")
        for e in listed.items
        if (e.get("involvedObject") or e.get("regarding") or {}).get("name") == name
        and e.get("reason") == reason
    ]


async def told_some(manager: ApiClient, namespace: str, name: str, reason: str) -> list[str] | None:
    """``told``, or None while there is none: ``eventually`` takes an empty list as an answer."""
    return await told(manager, namespace, name, reason) or None


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        try:
            crds = load_ecosystem_crds(inventory_crds(print, build=False))
        except BinaryError as error:
            raise AssertionError(str(error)) from None
        await install_crds(client, crds)
        yield client


async def test_profiles_become_workers_and_a_provider_not_in_the_file_is_refused(
    fleet: FleetHandle, manager: ApiClient, tmp_path: Path, make_namespace: Any
) -> None:
    east, west = fleet.workers[:2]
    providers, clusters = [], {}
    for worker in (east, west):
        config = workerclusters.inline_kubeconfig(fleet.kubeconfig(worker, Credential.TOKEN))
        clusters[worker] = config["clusters"][0]["cluster"]
        token = config["users"][0]["user"]["token"]
        providers.append({"name": f"{worker}-token", "execConfig": plugin(tmp_path, worker, token)})
    provider_file = tmp_path / "providers.json"
    provider_file.write_text(json.dumps({"providers": providers}))
    names = {east: "profile-east", west: "profile-west"}
    namespace = await make_namespace(["manager"])
    inventory = await make_namespace(["manager"])
    try:
        for worker in (east, west):  # no WorkerCluster on the profiles' apiservers meanwhile
            await workerclusters.unregister(manager, worker)
        for worker in (east, west):
            await put_profile(
                manager, profile(inventory, names[worker], f"{worker}-token", clusters[worker])
            )
        # Offers only a provider the file does not name: no plugin is run for it.
        await put_profile(
            manager, profile(inventory, "profile-rogue", "rogue-token", clusters[east])
        )
        # Not selected: no worker, though its provider is in the file.
        await put_profile(
            manager, profile(inventory, "profile-other", f"{east}-token", clusters[east], False)
        )
        async with running_controller(
            fleet, tmp_path, "--cluster-profiles", inventory,
            "--cluster-profile-selector", SELECTOR,
            "--cluster-profile-access-providers", str(provider_file),
        ) as controller:  # fmt: skip
            for worker in (east, west):
                await eventually(
                    functools.partial(told_some, manager, inventory, names[worker], "ClusterProfileConnected"),
                    timeout=SHOWS_WITHIN, what=f"{names[worker]} connected",
                )  # fmt: skip
                assert (tmp_path / f"{worker}.ran").exists()
            refused = await eventually(
                lambda: told_some(manager, inventory, "profile-rogue", "ClusterProfileRefused"),
                timeout=SHOWS_WITHIN, what="profile-rogue refused",
            )  # fmt: skip
            assert (
                "its access providers (rogue-token) are none of the access-provider file's"
                in refused[0]
            )
            assert f"ClusterProfile {inventory}/profile-rogue: its access" in controller.log_text()
            assert not await told(manager, inventory, names[east], "ClusterProfileRefused")

            # A Job pinned to one profile worker runs there and completes.
            job = job_manifest("on-a-profile", managed_by=DEFAULT_CONTROLLER_NAME)
            job["metadata"]["annotations"] = {CLUSTERS_ANNOTATION: names[west]}
            await manager.create(JOBS, job, namespace=namespace)

            async def completed() -> dict[str, Any] | None:
                found = await manager.get(JOBS, "on-a-profile", namespace=namespace)
                return found if is_true(found, "Complete") else None

            done = await eventually(completed, timeout=SHOWS_WITHIN, what="the Job complete")
            assert placement(done) == names[west]
            assert not await told(manager, inventory, "profile-other", "ClusterProfileConnected")
    finally:
        for worker in (east, west):
            clusters_add(fleet, worker)
