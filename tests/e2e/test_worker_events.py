"""Worker Events surface on the management Job: the worker's reason, its name, a count.

A mirror whose pods a worker refuses (a ResourceQuota of 0 pods) shows the
worker's ``FailedCreate`` on the management Job, its message starting with the
worker's name, and the Job is annotated ``jobrelay.dev/blocked`` until the quota
goes and its pods run. A storm of 1,000 Events about a mirror, made directly
through the worker's API, becomes a handful of Events on the manager whose counts
add up to 1,000. A pod on the worker that only carries a workload's name (and a
made-up controller UID) in its labels speaks for nobody: its Events never reach the
management Job.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import EVENTS, PODS
from jobrelay.vocabulary.names import BLOCKED_ANNOTATION
from jobrelay.vocabulary.resource import Resource
from tests.e2e.support import Relay
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)


def blocked(job: Mapping[str, Any]) -> str | None:
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(BLOCKED_ANNOTATION)
    return value if isinstance(value, str) else None


async def test_a_worker_quota_shows_as_failed_create_and_blocked_until_it_goes(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    for worker in relay.workers:
        await clients[worker].create(
            QUOTAS,
            {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
             "spec": {"hard": {"pods": "0"}}},
            namespace=relay.namespace,
        )  # fmt: skip
    job = await relay.submit(
        job_manifest("quota", annotations={"fleet.jobrelay.dev/duration": "2s"})
    )
    uid = job["metadata"]["uid"]
    cluster = await relay.wait_placed("quota")

    failed_create = await relay.wait_event(
        uid,
        lambda e: (
            e.get("type") == "Warning"
            and e.get("reason") == "FailedCreate"
            and str(e.get("message")).startswith(f"worker {cluster}: ")
        ),
        timeout=10,
        what=f"a Warning FailedCreate from {cluster} on the management Job",
    )
    assert "quota" in failed_create["message"]
    held = await relay.wait(
        "quota",
        lambda j: (blocked(j) or "").startswith(f"{cluster}: FailedCreate: "),
        timeout=10,
        what=f"{BLOCKED_ANNOTATION} naming {cluster} and FailedCreate",
    )
    assert not (held.get("status") or {}).get("active")

    for worker in relay.workers:
        await clients[worker].delete(QUOTAS, "no-pods", namespace=relay.namespace)
    # The worker's Job controller retries with its own backoff (up to a minute).
    await relay.verify("quota", outcome="Complete", timeout=120)
    await relay.wait(
        "quota", lambda j: blocked(j) is None, timeout=10, what=f"{BLOCKED_ANNOTATION} removed"
    )


async def test_a_failed_pod_and_the_backoff_limit_show_on_the_manager(relay: Relay) -> None:
    job = await relay.submit(
        job_manifest("fails", backoff_limit=0, annotations={"fleet.jobrelay.dev/outcome": "fail"})
    )
    done = await relay.verify("fails", outcome="Failed", reason="BackoffLimitExceeded")
    # The mirror is deleted once its status is copied, often before its last Event arrives.
    event = await relay.wait_event(
        job["metadata"]["uid"],
        lambda e: e.get("type") == "Warning" and e.get("reason") == "BackoffLimitExceeded",
        timeout=10,
        what="the worker's BackoffLimitExceeded on the management Job",
    )
    assert event["message"].startswith(f"worker {done.cluster}: "), event["message"]


STORM_REASON = "SimulatedWarning"
STORM_MESSAGE = "the same warning, again and again"


async def test_a_storm_of_1000_worker_events_is_a_handful_on_the_manager(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    job = await relay.submit(
        job_manifest("storm", annotations={"fleet.jobrelay.dev/duration": "60s"})
    )
    uid = job["metadata"]["uid"]
    cluster, mirror = await relay.wait_mirror(uid)
    worker = clients[cluster]
    involved = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "storm",
        "namespace": relay.namespace,
        "uid": mirror["metadata"]["uid"],
    }
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    limit = asyncio.Semaphore(16)

    async def one(n: int) -> None:
        async with limit:
            await worker.create(
                EVENTS,
                {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"storm.{n}", "namespace": relay.namespace},
                 "involvedObject": involved, "type": "Warning", "reason": STORM_REASON,
                 "message": STORM_MESSAGE, "count": 1, "firstTimestamp": now,
                 "lastTimestamp": now, "source": {"component": "storm-test"}},
                namespace=relay.namespace,
            )  # fmt: skip

    await asyncio.gather(*(one(n) for n in range(1000)))

    async def counted() -> list[dict[str, Any]] | None:
        events = [e for e in await relay.events(uid) if e.get("reason") == STORM_REASON]
        return events if sum(int(e.get("count") or 1) for e in events) >= 1000 else None

    storm = await eventually(counted, timeout=60, what="1000 occurrences counted on the manager")
    assert len(storm) <= 3, [(e["metadata"]["name"], e.get("count")) for e in storm]
    assert sum(int(e.get("count") or 1) for e in storm) == 1000
    assert {e["message"] for e in storm} == {f"worker {cluster}: {STORM_MESSAGE}"}
    assert {e["type"] for e in storm} == {"Warning"}
    everything = await relay.events(uid)
    assert len(everything) <= 6, [(e.get("reason"), e.get("count")) for e in everything]


async def test_an_event_on_an_unrelated_pod_labelled_with_a_workloads_name_is_not_relayed(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    job = await relay.submit(
        job_manifest("owned", annotations={"fleet.jobrelay.dev/duration": "60s"})
    )
    uid = job["metadata"]["uid"]
    cluster, mirror = await relay.wait_mirror(uid)
    worker = clients[cluster]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Labelled like the mirror's pods (job-name and a controller-uid), owned by nothing.
    impostor = await worker.create(
        PODS,
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "owned-impostor", "labels": {
             "batch.kubernetes.io/job-name": "owned", "job-name": "owned",
             "batch.kubernetes.io/controller-uid": "not-the-mirror",
             "controller-uid": "not-the-mirror"}},
         "spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}},
        namespace=relay.namespace,
    )  # fmt: skip

    async def event(name: str, involved: dict[str, Any], reason: str, message: str) -> None:
        await worker.create(
            EVENTS,
            {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": name, "namespace": relay.namespace},
             "involvedObject": {**involved, "namespace": relay.namespace},
             "type": "Warning", "reason": reason, "message": message, "count": 1,
             "firstTimestamp": now, "lastTimestamp": now,
             "source": {"component": "impostor-test"}},
            namespace=relay.namespace,
        )  # fmt: skip

    pod_ref = {"apiVersion": "v1", "kind": "Pod", "name": "owned-impostor",
               "uid": impostor["metadata"]["uid"]}  # fmt: skip
    await event("impostor.1", pod_ref, "FailedMount", "forged: mount failed")
    await event("impostor.2", pod_ref, "FailedCreate", "forged: cannot create")
    # Then a genuine one, about the mirror: once it is on the manager, the two before it
    # (same worker, same watch) were seen and judged.
    mirror_ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "owned",
                  "uid": mirror["metadata"]["uid"]}  # fmt: skip
    await event("genuine.1", mirror_ref, "SimulatedGenuine", "about the mirror itself")
    await relay.wait_event(
        uid,
        lambda e: e.get("reason") == "SimulatedGenuine",
        timeout=20,
        what="the genuine worker Event on the management Job",
    )
    forged = [
        (e.get("reason"), e.get("message"))
        for e in await relay.events(uid)
        if "forged" in str(e.get("message"))
    ]
    assert forged == [], forged
    current = await relay.manager.get(relay.resource, "owned", namespace=relay.namespace)
    assert blocked(current) is None
