"""Capacity that can be provisioned (issue 37, part 1), on a fleet where no node takes a
12-CPU pod (examples/fleets/autoscaling.yaml) but worker-2 and worker-3 run the stand-in
autoscaler (up to 4 nodes of 16 CPUs, 20 s after a ProvisioningRequest).

One test runs the two scenarios that wait for a scale-up at once (one 20 s wait): a Job
allowed on worker-1 and worker-2 gets a ProvisioningRequest on worker-2 alone, is placed
there once it is Provisioned, its pods consuming it, and completes; a Job allowed
anywhere asks worker-2 and worker-3 at once, runs once (one mirror), and the loser's
request is deleted within 10 s of the first Provisioned. Neither leaves a request or a
PodTemplate behind. The other tells worker-3's stand-in to refuse (its refusal
ConfigMap): a Job that only it could grow for is held, the refusal named.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS, NODES
from jobrelay.localfleet.autoscaler.scaleup_driver import AUTOSCALED_LABEL
from jobrelay.localfleet.autoscaler.scaleup_rules import (
    REFUSAL_CONFIGMAP,
    REFUSAL_NAMESPACE,
    REFUSED,
)
from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.names import CLUSTERS_ANNOTATION, NOT_PLACED_ANNOTATION
from jobrelay.vocabulary.placement import placements_of
from tests.conftest import FleetHandle, ShapedFleet
from tests.e2e.support import Relay, assert_finished_status_is_sound
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

# The fleet the docs show (docs/operations.md, "Autoscaled workers").
AUTOSCALING_SHAPE = Path(__file__).resolve().parents[2] / "examples" / "fleets" / "autoscaling.yaml"
GROWING = ("worker-2", "worker-3")
REFUSAL = "no 16-CPU nodes left in this zone"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def relay_fleet(shaped_fleet: ShapedFleet) -> FleetHandle:
    return shaped_fleet(AUTOSCALING_SHAPE)


def twelve_cpus(name: str, *clusters: str) -> Obj:
    body = job_manifest(name, cpu="12", annotations={"fleet.jobrelay.dev/duration": "1s"})
    if clusters:
        body["metadata"]["annotations"] = {CLUSTERS_ANNOTATION: ",".join(clusters)}
    return body


async def requests_for(client: ApiClient, namespace: str, uid: str) -> list[Obj]:
    found = await client.list(
        api.PROVISIONING_REQUESTS,
        namespace=namespace,
        label_selector=f"{api.PROVISIONING_FOR_LABEL}={uid}",
    )
    return list(found.items)


async def nothing_left(relay: Relay, *uids: str) -> None:
    """No ProvisioningRequest nor PodTemplate of these workloads on any worker."""

    async def clean() -> bool:
        for worker in relay.workers:
            client = relay.clients[worker]
            for resource in (api.PROVISIONING_REQUESTS, api.POD_TEMPLATES):
                try:
                    left = await client.list(resource, namespace=relay.namespace)
                except ApiError as error:
                    if error.is_not_found:  # worker-1 does not serve ProvisioningRequests
                        continue
                    raise
                made_for = {
                    (item["metadata"].get("labels") or {}).get(api.PROVISIONING_FOR_LABEL)
                    for item in left.items
                }
                if made_for & set(uids):
                    return False
        return True

    await eventually(clean, timeout=20, what="no ProvisioningRequest or PodTemplate left")


async def watch_race(relay: Relay, uid: str) -> tuple[str, float]:
    """Until the workload's requests have settled: the first worker seen Provisioned,
    and the seconds from then until no other worker held a request of it."""
    provisioned_at: float | None = None
    first = ""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        seen = {w: await requests_for(relay.clients[w], relay.namespace, uid) for w in GROWING}
        now = time.monotonic()
        if provisioned_at is None:
            done = [w for w, found in seen.items()
                    if any(api.is_condition_true(r, api.PROVISIONED) for r in found)]  # fmt: skip
            if done:
                provisioned_at, first = now, sorted(done)[0]
        if provisioned_at is not None and sum(bool(found) for found in seen.values()) <= 1:
            return first, now - provisioned_at
        await asyncio.sleep(0.2)
    raise AssertionError(f"the requests of {uid} never settled")


async def test_a_job_too_big_for_every_node_is_placed_where_capacity_was_provisioned(
    relay: Relay,
) -> None:
    pinned = await relay.submit(twelve_cpus("grows", "worker-1", "worker-2"))
    racing = await relay.submit(twelve_cpus("races"))
    pinned_uid, racing_uid = pinned["metadata"]["uid"], racing["metadata"]["uid"]

    # Held, the workers asked named, a request on each.
    for uid, asked in ((pinned_uid, "worker-2"), (racing_uid, "worker-2, worker-3")):
        event = await relay.wait_event(
            uid, lambda e: e.get("reason") == "WaitingForProvisioning",
            what="a WaitingForProvisioning Event",
        )  # fmt: skip
        assert f"requested from {asked}" in event["message"], event["message"]
    assert await requests_for(relay.clients["worker-3"], relay.namespace, pinned_uid) == []
    (request,) = await requests_for(relay.clients["worker-2"], relay.namespace, pinned_uid)
    assert request["spec"]["podSets"][0]["count"] == 1

    first, loser_gone_after = await watch_race(relay, racing_uid)
    assert loser_gone_after < 10, f"the loser's request stayed {loser_gone_after:.1f}s"

    for name, uid in (("grows", pinned_uid), ("races", racing_uid)):
        job = await relay.wait_finished(name, timeout=90)
        assert is_true(job, "Complete"), job.get("status")
        assert_finished_status_is_sound(job)
        assert job["status"]["succeeded"] == 1
        mirrors = relay.mirror_versions(uid)
        assert len(relay.mirror_uids(uid)) == 1, f"{name}: {relay.mirror_uids(uid)}"
        (worker,) = mirrors
        assert placements_of(job) == (worker,)
        # Where it was provisioned (the first answer, ties to the name): its pods consume it.
        assert worker == "worker-2" if name == "grows" else worker in GROWING, (name, first)
        template = mirrors[worker][0]["spec"]["template"]
        consume = template["metadata"]["annotations"].get(api.CONSUME_ANNOTATION)
        assert consume == f"jobrelay-{uid}", template["metadata"]
    await nothing_left(relay, pinned_uid, racing_uid)


@pytest.fixture
async def refusing_worker_3(relay_fleet: FleetHandle) -> AsyncIterator[None]:
    """worker-3's stand-in, told to refuse as docs/development.md says (its refusal
    ConfigMap), once the nodes it added for the test before are gone (none then takes
    12 CPUs); told no more after."""
    client = relay_fleet.client("worker-3")
    refusal = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": REFUSAL_CONFIGMAP, "namespace": REFUSAL_NAMESPACE},
        "data": {"refuse": REFUSAL},
    }
    try:
        with contextlib.suppress(ApiError):  # one a stopped run left
            await client.delete(CONFIGMAPS, REFUSAL_CONFIGMAP, namespace=REFUSAL_NAMESPACE)
        await client.create(CONFIGMAPS, refusal)

        async def no_added_nodes() -> bool:
            added = await client.list(NODES, label_selector=f"{AUTOSCALED_LABEL}=true")
            return not added.items

        await eventually(no_added_nodes, timeout=30, what="worker-3's added nodes gone")
        yield
    finally:
        with contextlib.suppress(ApiError):
            await client.delete(CONFIGMAPS, REFUSAL_CONFIGMAP, namespace=REFUSAL_NAMESPACE)
        await client.aclose()


async def test_a_refused_request_is_the_held_reason(relay: Relay, refusing_worker_3: None) -> None:
    job = await relay.submit(twelve_cpus("refused", "worker-1", "worker-3"))
    uid = job["metadata"]["uid"]
    event = await relay.wait_event(
        uid, lambda e: e.get("reason") == "ProvisioningFailed", what="ProvisioningFailed"
    )
    assert event["type"] == "Warning"
    assert f"worker-3: {REFUSED}: {REFUSAL}" in event["message"], event["message"]
    held = await relay.get("refused")
    note = held["metadata"]["annotations"][NOT_PLACED_ANNOTATION]
    assert note.startswith("ProvisioningFailed: ") and REFUSAL in note, note
    assert not relay.mirror_versions(uid)
    # The refused request stays while the Job waits (none is asked again), and goes with it.
    assert len(await requests_for(relay.clients["worker-3"], relay.namespace, uid)) == 1
    await relay.manager.delete(relay.resource, "refused", namespace=relay.namespace)
    await nothing_left(relay, uid)
