"""Data decides the place: a Job mounting PersistentVolumeClaim ``data`` runs only on the
worker where that claim is Bound in its namespace.

The claim is bound by the worker's own kube-controller-manager (a hostPath
PersistentVolume pre-bound to it by ``claimRef``). The data is put on the worker that
placement would NOT choose by itself (both are empty: spread breaks the tie by name, so
the first), and several Jobs are run, so this fails if placement ignored the data. A Job
mounting a claim no worker has is held with every worker named in its NotPlaced Event
and its jobrelay.dev/not-placed annotation, and runs once the claim appears and binds.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION
from jobrelay.vocabulary.resource import Resource
from tests.e2e.support import Relay
from tests.e2e.test_capacity_placement import wait_held
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)


def mounting(name: str, claim: str) -> dict[str, Any]:
    body = job_manifest(name)
    spec = body["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return body


class Volumes:
    """PersistentVolumes made on workers for a test, deleted after it."""

    def __init__(self, clients: dict[str, ApiClient]) -> None:
        self.clients = clients
        self.made: list[tuple[str, str]] = []

    async def bound_claim(self, worker: str, namespace: str, claim: str) -> None:
        """A claim ``claim`` in ``namespace`` on ``worker`` that its kube-controller-manager
        binds to a hostPath volume made for it; waits until the claim is Bound."""
        client = self.clients[worker]
        volume = f"{namespace}-{claim}"[:63]
        await client.create(PVS, {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                "hostPath": {"path": f"/tmp/{volume}"},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        })  # fmt: skip
        self.made.append((worker, volume))
        await client.create(PVCS, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }, namespace=namespace)  # fmt: skip

        async def bound() -> bool:
            found = await client.get(PVCS, claim, namespace=namespace)
            return (found.get("status") or {}).get("phase") == "Bound"

        await eventually(bound, timeout=60, what=f"claim {claim} Bound on {worker}")

    async def cleanup(self) -> None:
        for worker, volume in self.made:
            with contextlib.suppress(ApiError):
                await self.clients[worker].delete(PVS, volume)


@pytest.fixture
async def volumes(clients: dict[str, ApiClient]) -> AsyncIterator[Volumes]:
    made = Volumes(clients)
    try:
        yield made
    finally:
        await made.cleanup()


async def test_a_job_mounting_pvc_data_lands_only_where_the_data_is(
    relay: Relay, volumes: Volumes, namespace: str
) -> None:
    workers = sorted(relay.workers)
    assert len(workers) >= 2, "the local fleet has two workers"
    # Not the first: with both workers empty, placement alone would pick the first.
    holder = workers[-1]
    await volumes.bound_claim(holder, namespace, "data")
    for index in range(3):
        await relay.submit(mounting(f"reads-data-{index}", "data"))
        relayed = await relay.verify(f"reads-data-{index}")
        assert relayed.cluster == holder, f"reads-data-{index} ran on {relayed.cluster}"


async def test_a_job_whose_data_is_nowhere_waits_and_follows_it_when_it_binds(
    relay: Relay, volumes: Volumes, namespace: str
) -> None:
    workers = sorted(relay.workers)
    await relay.submit(mounting("needs-archive", "archive"))
    message = await wait_held(relay, "needs-archive")
    job = await relay.get("needs-archive")
    note = job["metadata"]["annotations"][NOT_PLACED_ANNOTATION]
    for worker in workers:
        reason = f"{worker}: no PersistentVolumeClaim archive in {namespace}"
        assert reason in message, message
        assert reason in note, note
    holder = workers[-1]
    await volumes.bound_claim(holder, namespace, "archive")
    relayed = await relay.verify("needs-archive")
    assert relayed.cluster == holder
