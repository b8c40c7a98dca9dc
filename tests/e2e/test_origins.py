"""Two management clusters share a worker: each touches only the mirrors of its own origin.

worker-2 of the local fleet serves as the second management cluster (manager B, run
with ``--origin manager-b``); the fleet's manager (manager A) runs the module's
controller with the default origin, the UID of its kube-system namespace. Both
dispatch to worker-1 (worker-2 is cordoned on manager A for the test), with the
same namespace and Job names. A worker namespace is open to one origin only (its
``jobrelay.dev/origin`` label): B's namesake in A's namespace is held, never placed
there, and B's Jobs run in namespaces of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import EVENTS, JOBS, NAMESPACES, WORKER_CLUSTERS
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, ORIGIN_LABEL, ORIGIN_UID_LABEL
from tests.e2e.support import ControllerProcess, Relay
from tests.kubetools import eventually, finished, get_or_none, gone, is_true, job_manifest

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e

SHARED, MANAGER_B, ORIGIN_B = "worker-1", "worker-2", "manager-b"
RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


@pytest.fixture
async def manager_b(
    relay: Relay, fleet: FleetHandle, clients: dict[str, ApiClient], tmp_path: Path
) -> AsyncIterator[ControllerProcess]:
    """A second controller, on worker-2 as its management cluster, dispatching to worker-1."""
    manager_a, manager = clients["manager"], clients[MANAGER_B]
    await manager_a.patch(WORKER_CLUSTERS, MANAGER_B, {"spec": {"cordoned": True}})
    await workerclusters.install_crd(manager)
    await workerclusters.register(
        manager, SHARED, workerclusters.inline_kubeconfig(fleet.kubeconfig(SHARED))
    )
    process = ControllerProcess(
        fleet.kubeconfig(MANAGER_B), tmp_path / "manager-b.log", workers=[SHARED],
        extra_args=["--origin", ORIGIN_B, "--no-leader-elect"],
    )  # fmt: skip
    try:
        await process.start(manager)
        await process.wait_ready(manager)
        yield process
        process.assert_clean_log()
    finally:
        if process.running:
            await process.stop()
        with contextlib.suppress(ApiError):
            await workerclusters.unregister(manager, SHARED)
        await manager_a.patch(WORKER_CLUSTERS, MANAGER_B, {"spec": {"cordoned": False}})


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return obj["metadata"].get("labels") or {}


async def test_two_managers_sharing_a_worker_never_touch_each_others_mirrors(
    relay: Relay, manager_b: ControllerProcess, clients: dict[str, ApiClient]
) -> None:
    namespace, worker, b = relay.namespace, clients[SHARED], clients[MANAGER_B]
    origin_a = await workerclusters.default_origin(relay.manager)

    # A places "shared" on worker-1 first; its mirror carries A's origin.
    job_a = await relay.submit(job_manifest("shared", annotations=RUN_FOREVER))
    mirror_a = await eventually(
        lambda: _running_mirror(worker, "shared", namespace), what="A's mirror running"
    )
    assert labels(mirror_a)[ORIGIN_LABEL] == origin_a
    assert labels(mirror_a)[ORIGIN_UID_LABEL] == job_a["metadata"]["uid"]

    # The namespace on worker-1 is open to A (its origin label): B never creates a mirror
    # there and, with no other worker, holds its namesake. B's Job of a namespace of its
    # own runs on worker-1 beside A's mirror (B creates that namespace, labelled with B's origin).
    async def submit_b(name: str, annotations: Mapping[str, str], ns: str) -> dict[str, Any]:
        body = job_manifest(name, annotations=annotations)
        body["spec"]["managedBy"] = DEFAULT_CONTROLLER_NAME
        return await b.create(JOBS, body, namespace=ns)

    job_b = await submit_b("shared", RUN_FOREVER, namespace)
    own = f"{namespace}-b"
    await b.create(NAMESPACES, {"metadata": {"name": own}})
    try:
        await submit_b("only-b", {"fleet.jobrelay.dev/duration": "1s"}, own)

        async def b_held() -> str | None:
            events = await _events_of(b, namespace, job_b["metadata"]["uid"])
            messages = [str(e.get("message")) for e in events if e.get("reason") == "NotPlaced"]
            return next((m for m in messages if "not open to this manager" in m), None)

        held_why = await eventually(
            b_held, timeout=60, what="B holds its Job, naming A's namespace"
        )
        assert f"namespace {namespace} exists there and is not open" in held_why
        only_b = await eventually(
            lambda: _finished(b, "only-b", own), timeout=60, what="B's own Job completes"
        )
        assert is_true(only_b, "Complete"), only_b["status"]
        opened = await worker.get(NAMESPACES, own)
        assert labels(opened)[ORIGIN_LABEL] == ORIGIN_B
    finally:
        for client in (b, worker):
            with contextlib.suppress(ApiError):
                await client.delete(NAMESPACES, own)

    # A's mirror was never deleted, replaced or relabelled; B copied nothing of it.
    now = await worker.get(JOBS, "shared", namespace=namespace)
    assert now["metadata"]["uid"] == mirror_a["metadata"]["uid"]
    assert not now["metadata"].get("deletionTimestamp")
    assert labels(now)[ORIGIN_LABEL] == origin_a
    held = await b.get(JOBS, "shared", namespace=namespace)
    assert not (held.get("status") or {}).get("startTime"), held.get("status")
    assert not (held.get("status") or {}).get("active"), held.get("status")
    # A never saw B's mirror (its caches select its own origin), so never copied or
    # cleaned it up as an orphan.
    assert "only-b" not in relay.controller.log_text()
    assert (await relay.get("shared"))["status"].get("active") == 1

    # A's Job ends as usual: its own mirror goes; B's held Job stays held.
    await relay.manager.delete(JOBS, "shared", namespace=namespace)
    await relay.wait_gone("shared")
    await eventually(
        lambda: gone(worker, JOBS, "shared", namespace), timeout=60, what="A's mirror deleted"
    )


async def _running_mirror(worker: ApiClient, name: str, namespace: str) -> dict[str, Any] | None:
    mirror = await get_or_none(worker, JOBS, name, namespace)
    return mirror if mirror and (mirror.get("status") or {}).get("active") else None


async def _finished(client: ApiClient, name: str, namespace: str) -> dict[str, Any] | None:
    job = await client.get(JOBS, name, namespace=namespace)
    return job if finished(job) else None


async def _events_of(client: ApiClient, namespace: str, uid: str) -> list[dict[str, Any]]:
    listed = await client.list(
        EVENTS, namespace=namespace, field_selector=f"involvedObject.uid={uid}"
    )
    return listed.items
