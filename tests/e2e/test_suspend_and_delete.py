"""The user suspends, resumes and deletes management Jobs; the mirrors follow. And an
admin restores them into the manager from a backup: they follow their mirrors again."""

from __future__ import annotations

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS, PODS
from jobrelay.vocabulary.names import (
    RESTORED_ANNOTATION,
    RESTORED_HELD_ANNOTATION,
)
from tests.e2e.support import CONTROLLER_UID_LABEL, ControllerProcess, Relay, placement
from tests.kubetools import (
    Obj,
    WatchRecorder,
    eventually,
    finished,
    is_true,
    job_manifest,
    wait_for,
)

pytestmark = pytest.mark.e2e

RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


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


# -- a manager restored from a backup ------------------------------------------------------

RESTORED_JOBS = ("restored-a", "restored-b", "restored-c", "restored-d")
# Restored without the runbook's annotation: held by its placement until adopted.
NOT_ANNOTATED = "restored-d"
# Long enough to outlast a controller stop, a restore and a start.
RESTORE_RUN = {"fleet.jobrelay.dev/duration": "20s"}


def saved_manifest(job: Obj) -> Obj:
    """A Job as a backup restores it: metadata (annotations, labels) kept, a new UID on
    create, no status; Velero's Job action drops the selector and the controller-uid
    labels, which the apiserver makes again for the new UID."""
    metadata = job["metadata"]
    generated = (CONTROLLER_UID_LABEL, "controller-uid")

    def kept(labels: dict[str, str] | None) -> dict[str, str]:
        return {k: v for k, v in (labels or {}).items() if k not in generated}

    spec = {k: v for k, v in job["spec"].items() if k not in ("selector", "manualSelector")}
    template = dict(spec["template"])
    template["metadata"] = {
        **(template.get("metadata") or {}),
        "labels": kept((template.get("metadata") or {}).get("labels")),
    }
    spec["template"] = template
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "labels": kept(metadata.get("labels")),
            "annotations": dict(metadata.get("annotations") or {}),
        },
        "spec": spec,
    }


async def test_jobs_restored_into_the_manager_follow_their_running_mirrors_once_adopted(
    relay: Relay, clients: dict[str, ApiClient], controller: ControllerProcess
) -> None:
    """The runbook's restore (docs/operations.md, Disaster recovery): Jobs deleted and
    created again from their saved manifests while the controller is down (new UIDs,
    their mirrors running on, not yet recorded), annotated ``jobrelay.dev/restored=adopt``
    before it starts; each follows its mirror to Complete: no second mirror, its pods run
    once, no mirror left behind. One not annotated is held by its placement alone (a
    Warning, its mirror left running, none created) until annotated adopt; then it
    follows its mirror the same way. (A recorded one is held too: unit tests.)"""
    namespace = relay.namespace
    # Every pod ever made on each worker (jobrelay deletes a finished mirror, its pods too).
    pods = {w: WatchRecorder(clients[w], PODS, namespace=namespace) for w in relay.workers}
    for recorder in pods.values():
        await recorder.start()
    try:
        await _restore_and_adopt(relay, clients, controller, pods)
    finally:
        for recorder in pods.values():
            await recorder.stop()


async def _restore_and_adopt(
    relay: Relay,
    clients: dict[str, ApiClient],
    controller: ControllerProcess,
    pods: dict[str, WatchRecorder],
) -> None:
    manager, namespace = relay.manager, relay.namespace
    before: dict[str, tuple[Obj, str, str, str]] = {}  # saved, worker, mirror uid, old uid
    for name in RESTORED_JOBS:
        await relay.submit(job_manifest(name, annotations=RESTORE_RUN))
    for name in RESTORED_JOBS:
        # Backed up young: its mirror runs, and is not recorded yet (that takes 30 s).
        job = await relay.wait_active(name)
        cluster, mirror = await relay.wait_mirror(job["metadata"]["uid"])
        uid = job["metadata"]["uid"]
        before[name] = (saved_manifest(job), cluster, mirror["metadata"]["uid"], uid)

    await controller.stop()
    try:
        for name in RESTORED_JOBS:  # the manager lost them (no pods there: nothing else goes)
            await manager.delete(JOBS, name, namespace=namespace)
        for name in RESTORED_JOBS:
            await relay.wait_gone(name)
        restored = {
            name: await manager.create(JOBS, saved, namespace=namespace)
            for name, (saved, _, _, _) in before.items()
        }
        for name in RESTORED_JOBS:  # the runbook's step, before the controller starts
            if name == NOT_ANNOTATED:
                continue
            await manager.patch(
                JOBS, name, {"metadata": {"annotations": {RESTORED_ANNOTATION: "adopt"}}},
                namespace=namespace,
            )  # fmt: skip
    finally:
        await controller.start(manager)
    await controller.wait_ready(manager)
    await _held_then_adopted(relay, restored[NOT_ANNOTATED], *before[NOT_ANNOTATED][1:])
    for name in RESTORED_JOBS:
        await relay.wait_event(
            restored[name]["metadata"]["uid"],
            lambda e: e.get("reason") == "MirrorAdopted",
            what=f"{name}: a MirrorAdopted Event",
        )

    for name, (_, cluster, mirror_uid, old_uid) in before.items():
        job = await relay.wait_finished(name, timeout=90)
        assert is_true(job, "Complete"), job.get("status")
        assert job["metadata"]["uid"] == restored[name]["metadata"]["uid"]
        assert placement(job) == cluster
        await relay.wait(
            name,
            lambda j: (
                not {RESTORED_ANNOTATION, RESTORED_HELD_ANNOTATION}
                & set(j["metadata"].get("annotations") or {})
            ),
            timeout=30,
            what="the restore annotations removed once adopted",
        )
        # One mirror ever, for the old UID and the new: the one that ran before.
        ever = relay.mirror_uids(old_uid) | relay.mirror_uids(job["metadata"]["uid"])
        assert ever == {(cluster, mirror_uid)}, f"{name}: mirrors {ever}"
        for worker in relay.workers:
            named = [obj["metadata"]["uid"] for obj in relay.jobs_named(name, worker)]
            assert named == ([mirror_uid] if worker == cluster else []), f"{name} on {worker}"
        assert job["status"].get("succeeded") == 1, job["status"]
    for name in RESTORED_JOBS:
        await relay.wait_mirror_gone(restored[name]["metadata"]["uid"])
    for name, (_, cluster, mirror_uid, _) in before.items():
        # Its pods ran once: one pod, of the one mirror, on its worker, and none elsewhere.
        for worker, recorder in pods.items():
            ran = {
                (pod["metadata"]["name"], labels.get(CONTROLLER_UID_LABEL))
                for _, pod in recorder.events
                if (labels := pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) == name
            }
            assert len(ran) == (1 if worker == cluster else 0), f"{name} on {worker}: {ran}"
            assert all(uid == mirror_uid for _, uid in ran), f"{name}: pods of another mirror"


async def _held_then_adopted(
    relay: Relay, restored: Obj, cluster: str, mirror_uid: str, old_uid: str
) -> None:
    """Restored without the annotation, before its mirror was recorded: held (told, its
    mirror neither deleted nor followed, no other created), then adopted when annotated."""
    name, uid = restored["metadata"]["name"], restored["metadata"]["uid"]
    held = await relay.wait_event(
        uid,
        lambda e: e.get("type") == "Warning" and e.get("reason") == "RestoredMirror",
        what=f"{name}: a Warning RestoredMirror Event",
    )
    assert mirror_uid in held.get("message", ""), held
    job = await relay.wait(
        name,
        lambda j: RESTORED_HELD_ANNOTATION in (j["metadata"].get("annotations") or {}),
        timeout=30,
        what="the restored-held annotation",
    )
    assert placement(job) == cluster
    # Held, not run again: the one mirror still there, still its old UID's; none other.
    mirrors = relay.mirror_uids(old_uid) | relay.mirror_uids(uid)
    assert mirrors == {(cluster, mirror_uid)}, f"{name}: mirrors {mirrors}"
    assert not any(m["metadata"].get("deletionTimestamp") for m in relay.jobs_named(name, cluster))
    await relay.manager.patch(
        JOBS, name, {"metadata": {"annotations": {RESTORED_ANNOTATION: "adopt"}}},
        namespace=relay.namespace,
    )  # fmt: skip
