"""Users' log follows cannot take a worker down, and never read a namesake (issue 21).

Six `--all-pods -f` follows of a 60-pod Job (366 streams on one worker: a log
stream per pod and one pod watch per request) go through the worker's own pool
for users' streams: its health probe (every 2 s here) never waits behind
them, so the worker stays Connected=True throughout and another Job placed on
it completes; once the six go away their streams are released. (The 429 beyond
the bounds is unit-tested: here KWOK may end a pod's follow early, when the
machine's inotify instances, shared by every fleet on it, run out, and with it
the request's claim.) The logs and mirror API find the mirror in
jobrelay's own caches, not in the user-editable ``jobrelay.dev/cluster``, and
its pods by the mirror's UID: a namesake Job on another worker and a pod
labelled like the mirror's are never read.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx2
import pytest

from jobrelay.kube.resources import CONFIGMAPS, JOBS, PODS, WORKER_CLUSTERS
from jobrelay.localfleet.cluster import SIMULATED_LOG, Credential
from jobrelay.relayapi.route_rules import POD_HEADER
from tests.conftest import FleetHandle
from tests.e2e.aggregated import manager_client
from tests.e2e.support import ControllerProcess, Relay
from tests.e2e.test_remote_logs import logs_path, registered, running_pods
from tests.e2e.worker_identity import SERVICE_ACCOUNT
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e
# Workers added as docs/add-a-worker.md says: the least-privilege identity reads the logs.
WORKERS_ADDED = SERVICE_ACCOUNT

__all__ = ["registered"]  # the module's fixture, shared with test_remote_logs

PODS_PER_JOB = 60
FOLLOWS = 6
STREAMS = 400  # room for the six follows (6 x (60 pods + 1 watch))
CONTROLLER_ARGS = [
    "--api-address", "127.0.0.1:0", "--api-register",
    # Probed every 2 s, each probe bounded by 4 s: a probe queued behind users' streams
    # (open for the whole test) would show Connected=False within seconds. Not tighter:
    # with two test fleets on two slow cores a worker's /version once took over 2 s
    # (ReadTimeout, answered late: not a wait for a connection).
    "--worker-health-timeout", "12",
    "--api-max-streams-per-user", str(STREAMS),
    "--api-max-streams-per-worker", str(STREAMS),
    "--api-max-streams", str(STREAMS),
]  # fmt: skip


def pinned(manifest: dict[str, Any], worker: str) -> dict[str, Any]:
    manifest["metadata"]["annotations"] = {"jobrelay.dev/clusters": worker}
    return manifest


async def api_client(fleet: FleetHandle) -> httpx2.AsyncClient:
    """The fleet's token admin on the manager's apiserver (the aggregated API behind it);
    60 s: a follow's stream stays open while its Job runs."""
    return await manager_client(fleet.kubeconfig("manager", Credential.TOKEN), timeout=60)


async def watch_connected(relay: Relay, worker: str, seen: list[str]) -> None:
    """Every Connected condition of ``worker`` that is not True, polled twice a second."""
    while True:
        found = await relay.manager.get(WORKER_CLUSTERS, worker)
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Connected" and condition.get("status") != "True":
                seen.append(f"{condition.get('reason')}: {condition.get('message')}")
        await asyncio.sleep(0.5)


async def test_six_follows_of_a_60_pod_job_leave_the_worker_connected(
    relay: Relay,
    relay_fleet: FleetHandle,
    controller: ControllerProcess,
    registered: dict[str, str],
) -> None:
    worker = relay_fleet.workers[0]
    manifest = job_manifest(
        "chatty", completions=PODS_PER_JOB, parallelism=PODS_PER_JOB,
        annotations={"fleet.jobrelay.dev/outcome": "run-forever"},
    )  # fmt: skip
    await relay.submit(pinned(manifest, worker))
    assert await relay.wait_placed("chatty") == worker
    await running_pods(relay, worker, "chatty", PODS_PER_JOB)
    path = logs_path(relay.namespace, "chatty")
    params = {"allPods": "true", "follow": "true"}
    not_connected: list[str] = []
    watcher = asyncio.create_task(watch_connected(relay, worker, not_connected))
    since = controller.log_size()
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(await api_client(relay_fleet))
        responses = await asyncio.gather(*(
            stack.enter_async_context(http.stream("GET", path, params=params))
            for _ in range(FOLLOWS)
        ))  # fmt: skip
        assert [r.status_code for r in responses] == [200] * FOLLOWS
        assert all(len(r.headers[POD_HEADER].split(",")) == PODS_PER_JOB for r in responses)

        async def every_pod(response: httpx2.Response) -> list[str]:
            """Lines until each pod has spoken (a line of its log, or KWOK's own complaint
            when the machine's inotify instances, shared by every fleet on it, run out)."""
            lines: list[str] = []
            pods: set[str] = set()
            async for line in response.aiter_lines():
                lines.append(line)
                pods.add(line.split(" ", 1)[0])
                if len(pods) == PODS_PER_JOB:
                    break
            return lines

        async with asyncio.timeout(120):
            followed = await asyncio.gather(*(every_pod(r) for r in responses))
        for lines in followed:
            assert len({line.split(" ", 1)[0] for line in lines}) == PODS_PER_JOB
            for line in lines:
                text = line.split(" ", 1)[1]
                assert text in SIMULATED_LOG or "fsnotify" in text, line
        # Meanwhile the worker takes and finishes another Job, its probe answered.
        await relay.submit(pinned(job_manifest("meanwhile"), worker))
        assert await relay.wait_placed("meanwhile") == worker
        done = await relay.wait_finished("meanwhile", timeout=60)
        assert done["status"].get("succeeded") == 1
        # Time itself: the probes run on a 2 s timer, so three more with every follow open.
        await asyncio.sleep(6)
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    assert not_connected == [], not_connected
    warnings = [
        r for r in controller.run_records()
        if r.get("level") in ("WARNING", "ERROR") and f"worker {worker}" in str(r.get("msg"))
    ]  # fmt: skip
    assert warnings == [], warnings[:3]
    assert "Traceback" not in controller.log_text(since)

    # The six went away: their streams are released, and a new follow is served.
    async def served_again() -> bool:
        async with (
            await api_client(relay_fleet) as http,
            http.stream("GET", path, params=params) as response,
        ):
            return response.status_code == 200

    await eventually(served_again, timeout=30, what="a follow served once the six ended")


async def test_a_namesake_and_an_edited_cluster_annotation_are_never_read(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    home, other = relay_fleet.workers[0], relay_fleet.workers[1]
    manifest = job_manifest("dup", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    await relay.submit(pinned(manifest, home))
    assert await relay.wait_placed("dup") == home
    (real,) = await running_pods(relay, home, "dup", 1)
    # Someone else's Job of the same name on the other worker, running...
    namesake = job_manifest("dup", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    await relay.clients[other].create(JOBS, namesake, namespace=relay.namespace)
    (foreign,) = await running_pods(relay, other, "dup", 1)
    # ...and a pod on the mirror's own worker labelled like the mirror's pods, controlled by
    # something else (an orphan would be adopted by the worker's Job controller, and then
    # be the mirror's pod by the worker's own word).
    mirror = (await relay.clients[home].get(JOBS, "dup", namespace=relay.namespace))["metadata"]
    owner = await relay.clients[home].create(CONFIGMAPS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dup-owner"},
    }, namespace=relay.namespace)  # fmt: skip
    await relay.clients[home].create(PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dup-forged", "labels": {
            "batch.kubernetes.io/job-name": "dup",
            "batch.kubernetes.io/controller-uid": mirror["uid"],
        }, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "dup-owner",
            "uid": owner["metadata"]["uid"], "controller": True,
        }]},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }, namespace=relay.namespace)  # fmt: skip
    # The Job's user points its jobrelay.dev/cluster at the namesake's worker.
    await relay.manager.patch(
        JOBS, "dup", {"metadata": {"annotations": {"jobrelay.dev/cluster": other}}},
        namespace=relay.namespace,
    )  # fmt: skip
    async with await api_client(relay_fleet) as http:
        view = await http.get(logs_path(relay.namespace, "dup", "mirror"))
        logs = await http.get(logs_path(relay.namespace, "dup"), params={"allPods": "true"})
    assert view.status_code == 200, view.text
    assert view.json()["cluster"] == home
    assert view.json()["mirror"]["metadata"]["uid"] == mirror["uid"]
    assert [p["name"] for p in view.json()["pods"]] == [real["metadata"]["name"]]
    assert logs.status_code == 200, logs.text
    assert logs.headers[POD_HEADER] == real["metadata"]["name"]
    for stranger in (foreign["metadata"]["name"], "dup-forged"):
        assert stranger not in view.text and stranger not in logs.text
