"""The user suspends, resumes and deletes management Jobs; the mirrors follow."""

from __future__ import annotations

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, PODS
from tests.e2e.support import CONTROLLER_UID_LABEL, Relay, placement
from tests.kubetools import eventually, finished, is_true, job_manifest, wait_for

pytestmark = pytest.mark.e2e

RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


async def no_live_pods(client: ApiClient, namespace: str, mirror_uid: str) -> bool:
    """No pod of the mirror is left that has not finished."""
    listed = await client.list(
        PODS, namespace=namespace, label_selector=f"{CONTROLLER_UID_LABEL}={mirror_uid}"
    )
    return all(
        pod.get("status", {}).get("phase") in ("Succeeded", "Failed") for pod in listed.items
    )


async def test_created_suspended_waits_then_runs_when_resumed(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    created = await relay.submit(
        job_manifest("later", suspend=True, annotations={"fleet.jobrelay.dev/duration": "1s"})
    )
    uid = created["metadata"]["uid"]
    await relay.wait("later", lambda job: is_true(job, "Suspended"), timeout=30,
                     what="Suspended=True set by jobrelay")  # fmt: skip
    await relay.settled("later")  # looked at again since: held, not dispatched
    job = await relay.get("later")
    assert is_true(job, "Suspended"), job.get("status")
    assert not finished(job)
    status = job.get("status") or {}
    assert not status.get("active"), status
    assert not status.get("startTime"), f"a suspended Job that never ran has a startTime: {status}"
    assert relay.mirror_uids(uid) == set(), "a mirror was created while the Job was suspended"
    for worker in relay.workers:
        assert relay.jobs_named("later", worker) == [], f"a Job 'later' appeared on {worker}"
    pods = await relay.manager.list(PODS, namespace=relay.namespace)
    assert pods.items == [], "pods ran on the manager"
    placed_while_suspended = placement(job)

    await relay.set_suspend("later", False)
    done = await relay.verify("later", outcome="Complete")
    if placed_while_suspended:
        assert done.cluster == placed_while_suspended, "the Job moved when it was resumed"
    assert done.job["status"]["succeeded"] == 1
    assert not is_true(done.job, "Suspended")
    assert not done.mirror["spec"].get("suspend")


async def test_suspended_while_running_stops_and_resumes_on_the_same_worker(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    created = await relay.submit(
        job_manifest(
            "pause", completions=2, parallelism=2, annotations={"fleet.jobrelay.dev/duration": "6s"}
        )
    )
    uid = created["metadata"]["uid"]
    await relay.wait_active("pause")
    cluster = await relay.wait_placed("pause")
    mirror_cluster, mirror = await relay.wait_mirror(uid)
    assert mirror_cluster == cluster
    mirror_uid = mirror["metadata"]["uid"]
    worker = clients[cluster]

    await relay.set_suspend("pause", True)
    await wait_for(worker, "pause", relay.namespace, lambda m: m["spec"].get("suspend") is True,
                   timeout=30, what="the mirror suspended")  # fmt: skip
    job = await relay.wait(
        "pause",
        lambda j: is_true(j, "Suspended") and not (j.get("status") or {}).get("active"),
        timeout=30,
        what="Suspended=True and active 0",
    )
    assert not finished(job)
    await eventually(
        lambda: no_live_pods(worker, relay.namespace, mirror_uid),
        timeout=30,
        what="the mirror's pods gone while suspended",
    )
    await relay.settled("pause")  # its pods are gone: nothing can finish it now
    job = await relay.get("pause")
    assert is_true(job, "Suspended") and not finished(job), job.get("status")
    assert placement(job) == cluster

    await relay.set_suspend("pause", False)
    done = await relay.verify("pause", outcome="Complete")
    assert done.cluster == cluster, "resumed on another worker"
    assert done.mirror["metadata"]["uid"] == mirror_uid, "the mirror was replaced, not resumed"
    assert done.job["status"]["succeeded"] == 2
    assert not is_true(done.job, "Suspended")


async def test_deleting_a_running_job_deletes_its_mirror_and_pods(
    relay: Relay, clients: dict[str, ApiClient]
) -> None:
    created = await relay.submit(job_manifest("endless", annotations=RUN_FOREVER))
    uid = created["metadata"]["uid"]
    await relay.wait_active("endless")
    cluster, mirror = await relay.wait_mirror(uid)
    mirror_uid = mirror["metadata"]["uid"]

    await relay.manager.delete(JOBS, "endless", namespace=relay.namespace)
    await relay.wait_mirror_gone(uid, timeout=30)
    await eventually(
        lambda: no_live_pods(clients[cluster], relay.namespace, mirror_uid),
        timeout=30,
        what="the mirror's pods deleted with it",
    )
    await relay.wait_gone("endless")
