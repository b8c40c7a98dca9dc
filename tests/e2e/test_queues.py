"""Fleet-wide queues and the manager's ResourceQuota on the local fleet (issue 24's "What it
must show"): a queue's quota holds while it floods, priority orders a saturated queue, a
queue that does not exist or does not take the namespace holds with a Warning, and a
namespace's ResourceQuota on the manager bounds its delegated work.

Each test makes its own RelayQueue, selecting the test's namespace by the label
Kubernetes sets on every namespace, so tests never share a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, PODS, PRIORITY_CLASSES, RELAY_QUEUES, RESOURCE_QUOTAS
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PLACEMENTS_ANNOTATION,
    QUEUE_LABEL,
)
from tests.e2e.support import Relay, placement
from tests.kubetools import finished, job_manifest

pytestmark = pytest.mark.e2e

NAME_LABEL = "kubernetes.io/metadata.name"
QueueMaker = Callable[..., Awaitable[str]]


@pytest.fixture
async def make_queue(clients: dict[str, ApiClient]) -> AsyncIterator[QueueMaker]:
    """Create RelayQueues on the manager; deleted after the test."""
    made: list[str] = []

    async def make(namespace: str, **spec: Any) -> str:
        name = f"q-{uuid.uuid4().hex[:8]}"
        body = {
            "apiVersion": "jobrelay.dev/v1alpha1", "kind": "RelayQueue",
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {"matchLabels": {NAME_LABEL: namespace}}, **spec},
        }  # fmt: skip
        await clients["manager"].create(RELAY_QUEUES, body)
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(ApiError):
            await clients["manager"].delete(RELAY_QUEUES, name)


def cpu_job(name: str, cpu: str, duration: str, **labels: str) -> dict[str, Any]:
    body = job_manifest(name, cpu=cpu, annotations={"fleet.jobrelay.dev/duration": duration})
    if labels:
        body["metadata"]["labels"] = dict(labels)
    return body


def millicores(job: dict[str, Any]) -> int:
    cpu = job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


async def admitted_cpu(relay: Relay) -> int:
    """The CPU of the namespace's Jobs that are placed and not finished (admitted)."""
    listed = await relay.manager.list(JOBS, namespace=relay.namespace)
    return sum(millicores(j) for j in listed.items if placement(j) and not finished(j))


async def running_cpu(relay: Relay, clients: dict[str, ApiClient]) -> int:
    """The CPU requested by the namespace's pods running on the workers now."""
    total = 0
    for worker in relay.workers:
        pods = await clients[worker].list(PODS, namespace=relay.namespace)
        for pod in pods.items:
            if (pod.get("status") or {}).get("phase") == "Running":
                for container in pod["spec"]["containers"]:
                    cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
                    if cpu:
                        total += int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return total


async def test_a_queue_never_runs_beyond_its_quota_and_all_its_jobs_complete(
    relay: Relay, clients: dict[str, ApiClient], make_queue: QueueMaker
) -> None:
    queue = await make_queue(relay.namespace, nominalQuota={"cpu": "4"},
                             borrowingLimit={"cpu": "0"})  # fmt: skip
    names = [f"flood-{i:02d}" for i in range(16)]
    for name in names:
        await relay.submit(cpu_job(name, "1", "3s", **{QUEUE_LABEL: queue}))
    most_admitted = most_running = 0
    deadline = time.monotonic() + 240
    while True:
        most_admitted = max(most_admitted, await admitted_cpu(relay))
        most_running = max(most_running, await running_cpu(relay, clients))
        assert most_admitted <= 4000, f"{most_admitted}m admitted over a 4 CPU queue"
        assert most_running <= 4000, f"{most_running}m running over a 4 CPU queue"
        jobs = (await relay.manager.list(JOBS, namespace=relay.namespace)).items
        if len(jobs) == len(names) and all(finished(j) for j in jobs):
            break
        assert time.monotonic() < deadline, "the queue's Jobs did not all complete"
        await asyncio.sleep(0.3)
    assert most_admitted == 4000  # it was saturated, not starved
    for job in jobs:
        assert any(c["type"] == "Complete" and c["status"] == "True"
                   for c in job["status"]["conditions"]), job["metadata"]["name"]  # fmt: skip


@pytest.fixture
async def priority_class(clients: dict[str, ApiClient]) -> AsyncIterator[str]:
    """A PriorityClass on every cluster (each apiserver's admission checks pods' names)."""
    name = f"urgent-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": 100000}  # fmt: skip
    for client in clients.values():
        await client.create(PRIORITY_CLASSES, body)
    yield name
    for client in clients.values():
        with contextlib.suppress(ApiError):
            await client.delete(PRIORITY_CLASSES, name)


async def test_a_high_priority_job_submitted_last_starts_before_earlier_low_ones(
    relay: Relay, make_queue: QueueMaker, priority_class: str
) -> None:
    queue = await make_queue(relay.namespace, nominalQuota={"cpu": "2"},
                             borrowingLimit={"cpu": "0"})  # fmt: skip
    # Each Job takes the whole queue: one slot, so the next to start is exactly one Job.
    low = [f"low-{i}" for i in range(5)]
    for name in low:
        await relay.submit(cpu_job(name, "2", "6s", **{QUEUE_LABEL: queue}))
    await relay.wait_placed(low[0])
    urgent = cpu_job("urgent", "2", "1s", **{QUEUE_LABEL: queue})
    urgent["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    await relay.submit(urgent)
    waiting = [n for n in low if not placement(await relay.get(n))]
    assert len(waiting) >= 3, "the queue was not saturated"
    await relay.wait_placed("urgent", timeout=60)
    placed_before = [n for n in waiting if placement(await relay.get(n))]
    assert placed_before == [], f"{placed_before} started before the high-priority Job"
    await relay.wait_finished("urgent", timeout=60)


async def test_a_queue_that_does_not_exist_holds_with_queue_not_found(
    relay: Relay, make_queue: QueueMaker
) -> None:
    job = await relay.submit(cpu_job("lost", "100m", "1s", **{QUEUE_LABEL: "no-such-queue"}))
    await relay.wait_event(job["metadata"]["uid"],
                           lambda e: e.get("type") == "Warning" and e.get("reason") == "QueueNotFound",
                           what="a Warning QueueNotFound")  # fmt: skip
    held = await relay.get("lost")
    assert not placement(held)
    assert held["metadata"]["annotations"][NOT_PLACED_ANNOTATION].startswith("QueueNotFound: ")


async def test_a_queue_that_does_not_take_the_namespace_holds_with_queue_not_allowed(
    relay: Relay, make_queue: QueueMaker
) -> None:
    elsewhere = await make_queue("some-other-namespace")
    job = await relay.submit(cpu_job("refused", "100m", "1s", **{QUEUE_LABEL: elsewhere}))
    await relay.wait_event(job["metadata"]["uid"],
                           lambda e: e.get("type") == "Warning" and e.get("reason") == "QueueNotAllowed",
                           what="a Warning QueueNotAllowed")  # fmt: skip
    assert not placement(await relay.get("refused"))


async def test_a_catch_all_queue_is_no_way_out_of_a_team_queue(
    relay: Relay, make_queue: QueueMaker
) -> None:
    team = await make_queue(relay.namespace, nominalQuota={"cpu": "1"},
                            borrowingLimit={"cpu": "0"})  # fmt: skip
    catch_all = await make_queue(relay.namespace, namespaceSelector={})  # every namespace
    job = await relay.submit(cpu_job("escape", "100m", "1s", **{QUEUE_LABEL: catch_all}))
    event = await relay.wait_event(
        job["metadata"]["uid"],
        lambda e: e.get("type") == "Warning" and e.get("reason") == "QueueNotAllowed",
        what="a Warning QueueNotAllowed",
    )
    assert f"{catch_all} is a catch-all" in event["message"] and team in event["message"]
    assert not placement(await relay.get("escape"))
    # Without the label, the team's queue takes it, whatever the catch-all's name.
    plain = await relay.submit(cpu_job("plain", "100m", "1s"))
    done = await relay.wait_finished("plain", timeout=60)
    assert placement(done) and plain["metadata"]["uid"] == done["metadata"]["uid"]


async def test_a_job_created_already_placed_still_waits_in_its_queue(
    relay: Relay, make_queue: QueueMaker
) -> None:
    queue = await make_queue(relay.namespace, nominalQuota={"cpu": "1"},
                             borrowingLimit={"cpu": "0"})  # fmt: skip
    await relay.submit(cpu_job("first", "1", "15s", **{QUEUE_LABEL: queue}))
    await relay.wait_placed("first")
    # No admission policy here: a tenant presets jobrelay's placement annotation.
    jumper = cpu_job("jumper", "1", "1s", **{QUEUE_LABEL: queue})
    jumper["metadata"]["annotations"] = {
        **jumper["metadata"].get("annotations", {}),
        CLUSTER_ANNOTATION: relay.workers[0],
    }
    created = await relay.submit(jumper)
    await relay.wait_event(created["metadata"]["uid"],
                           lambda e: e.get("reason") == "QueueQuotaExceeded",
                           what="a Warning QueueQuotaExceeded on the preset Job")  # fmt: skip
    first = await relay.get("first")
    assert not finished(first), "the preset Job was judged only once the queue had room"
    for worker in relay.workers:
        assert relay.jobs_named("jumper", worker) == [], f"it reached {worker}"
    done = await relay.wait_finished("jumper", timeout=90)
    assert finished(await relay.get("first"))  # it ran only once the queue had room
    assert done["metadata"]["annotations"][PLACEMENTS_ANNOTATION]  # placed by jobrelay


async def test_the_managers_resource_quota_bounds_delegated_work(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    await clients["manager"].create(
        RESOURCE_QUOTAS,
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cpu"},
         "spec": {"hard": {"requests.cpu": "2"}}},
        namespace=relay.namespace,
    )  # fmt: skip
    big = await relay.submit(cpu_job("big", "10", "1s"))
    names = [f"small-{i}" for i in range(6)]
    for name in names:
        await relay.submit(cpu_job(name, "1", "2s"))
    await relay.wait_event(big["metadata"]["uid"],
                           lambda e: e.get("reason") == "ExceedsNamespaceQuota",
                           what="a Warning ExceedsNamespaceQuota")  # fmt: skip
    most = 0
    deadline = time.monotonic() + 180
    while True:
        most = max(most, await admitted_cpu(relay))
        assert most <= 2000, f"{most}m admitted under a 2 CPU ResourceQuota"
        jobs = {j["metadata"]["name"]: j for j in
                (await relay.manager.list(JOBS, namespace=relay.namespace)).items}  # fmt: skip
        if all(finished(jobs[n]) for n in names):
            break
        assert time.monotonic() < deadline, "the small Jobs did not all complete"
        await asyncio.sleep(0.3)
    assert most == 2000
    assert not placement(jobs["big"])
