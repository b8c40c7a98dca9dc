"""Saturation: 300 Jobs of mixed sizes against workers that can run about a third at once.

jobrelay holds what does not fit on the manager instead of sending it to wait on a
worker: sampled every second, no mirror's pod stays Pending for lack of resources
(unschedulable) for more than 30 s, and every Job completes.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, PODS
from tests.conftest import FleetHandle
from tests.e2e.support import Relay, placement
from tests.kubetools import finished, is_true, job_manifest

pytestmark = pytest.mark.e2e

JOBS_SUBMITTED = 300
# worker-small 2 x 4 CPU, worker-big 3 x 16 CPU: 56 CPUs for pods without GPUs; the
# mean request below is ~0.58 CPU, so about 95 of the 300 run at once.
CPU_SIZES = ("250m", "500m", "1")
GPU_JOBS = 12  # 1 GPU each, on worker-gpu's 4
LIMIT_S = 30.0
# Long enough that a dispatcher sending everything at once would leave the last third
# of the pods Pending on the workers for two rounds of these: well over LIMIT_S.
DURATIONS = ("10s", "15s", "20s")


@pytest.fixture(scope="module")
def relay_fleet(placement_fleet: FleetHandle) -> FleetHandle:
    return placement_fleet


def mixed(index: int, rng: random.Random) -> dict[str, Any]:
    duration = rng.choice(DURATIONS)
    body = job_manifest(
        f"sat-{index:03d}", cpu=rng.choice(CPU_SIZES),
        annotations={"fleet.jobrelay.dev/duration": duration},
    )  # fmt: skip
    if index < GPU_JOBS:
        spec = body["spec"]["template"]["spec"]
        spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
        spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    return body


def unschedulable_since(pod: dict[str, Any]) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return str(condition.get("lastTransitionTime") or "?")
    return None


def most_held_at_once(events: list[tuple[str, dict[str, Any]]]) -> int:
    """The most Jobs unplaced and unfinished at once, over every revision the watch
    delivered (in order): exact, whatever the sampler's pace."""
    held: set[str] = set()
    most = 0
    for change, job in events:
        uid = job["metadata"]["uid"]
        if change != "DELETED" and not placement(job) and not finished(job):
            held.add(uid)
            most = max(most, len(held))
        else:
            held.discard(uid)
    return most


async def test_no_mirror_waits_unschedulable_and_every_job_completes(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    rng = random.Random(20261123)
    manifests = [mixed(index, rng) for index in range(JOBS_SUBMITTED)]
    # Submitted a few at a time, so that the burst arrives faster than the fleet runs it
    # however slow this machine is: one create after another took up to 40 s, during
    # which the first Jobs finished and made room.
    creating = asyncio.Semaphore(16)

    async def submit(manifest: dict[str, Any]) -> None:
        async with creating:
            await relay.submit(manifest)

    await asyncio.gather(*(submit(manifest) for manifest in manifests))
    # pod (worker, name) -> when this sampler first saw it unschedulable, and last.
    seen: dict[tuple[str, str], list[float]] = {}
    samples = 0
    deadline = time.monotonic() + 600
    done = 0
    while True:
        now = time.monotonic()
        for worker in relay.workers:
            listed = await clients[worker].list(
                PODS, namespace=relay.namespace, field_selector="status.phase=Pending"
            )
            for pod in listed.items:
                if unschedulable_since(pod) is not None:
                    span = seen.setdefault((worker, pod["metadata"]["name"]), [now, now])
                    span[1] = now
        samples += 1
        jobs = (await relay.manager.list(JOBS, namespace=relay.namespace)).items
        done = sum(1 for job in jobs if finished(job))
        if done == JOBS_SUBMITTED or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    longest = max((last - first for first, last in seen.values()), default=0.0)
    held_most = most_held_at_once(relay.jobs.events)
    print(
        f"{JOBS_SUBMITTED} Jobs, {samples} samples: {len(seen)} pods seen unschedulable, "
        f"the longest for {longest:.1f} s; at most {held_most} held at once; {done} finished"
    )
    assert done == JOBS_SUBMITTED, f"only {done} of {JOBS_SUBMITTED} Jobs finished in 600 s"
    # The fleet really was saturated: at one revision more Jobs waited their turn on the
    # manager than the workers run at once.
    assert held_most > JOBS_SUBMITTED // 3, f"at most {held_most} Jobs were ever held at once"
    over = {pod: last - first for pod, (first, last) in seen.items() if last - first > LIMIT_S}
    assert not over, f"pods unschedulable for more than {LIMIT_S:.0f} s: {over}"
    failed = [j["metadata"]["name"] for j in jobs if not is_true(j, "Complete")]
    assert not failed, f"Jobs that did not complete: {failed}"
