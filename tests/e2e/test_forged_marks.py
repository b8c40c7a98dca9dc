"""jobrelay's own marks are jobrelay's: a tenant or a worker that forges them gains nothing.

* A tenant writes ``jobrelay.dev/carried-over`` on its Job, claiming every
  completion done and most of its deadline spent: it used to reach the first
  mirror and be read back as work done. Now the worker runs all ten
  completions, with the whole deadline, and the Job ends with ``succeeded: 10``
  because ten ran.
* A worker creates a "mirror" of a running Job: our origin labels, the Job's UID
  and a higher ``jobrelay.dev/run``. It used to be followed (the Job re-placed
  onto that worker, PlacementConflict). Now jobrelay follows only the mirror it
  created and recorded (``jobrelay.dev/mirrors``): the forged one is reported
  (ForeignMirror) and left alone, the Job stays where it runs and completes once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from jobrelay.kube.resources import JOBS, PODS
from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    CONTROLLER_ANNOTATION,
    DEFAULT_CONTROLLER_NAME,
    MIRROR_LABEL,
    MIRRORS_ANNOTATION,
    ORIGIN_LABEL,
    ORIGIN_UID_LABEL,
    PLACEMENTS_ANNOTATION,
    RUN_ANNOTATION,
    controller_label_value,
)
from tests.e2e.support import Relay
from tests.kubetools import Obj, WatchRecorder, is_true, job_manifest

pytestmark = pytest.mark.e2e

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


@pytest.fixture
async def pod_watch(relay: Relay) -> AsyncIterator[dict[str, WatchRecorder]]:
    """Every version of every pod on each worker of the test's namespace, from the start
    (jobrelay deletes a finished mirror, and its pods with it)."""
    recorders = {
        worker: WatchRecorder(relay.clients[worker], PODS, namespace=relay.namespace)
        for worker in relay.workers
    }
    for recorder in recorders.values():
        await recorder.start()
    try:
        yield recorders
    finally:
        for recorder in recorders.values():
            await recorder.stop()


def pods_of(recorder: WatchRecorder, mirror_uid: str, phase: str | None = None) -> set[str]:
    """The names of the pods of one mirror ever seen (in ``phase``, when given)."""
    return {
        pod["metadata"]["name"]
        for _, pod in recorder.events
        if (pod["metadata"].get("labels") or {}).get(CONTROLLER_UID_LABEL) == mirror_uid
        and (phase is None or (pod.get("status") or {}).get("phase") == phase)
    }


async def test_a_forged_carried_over_is_not_work_done(
    relay: Relay, pod_watch: dict[str, WatchRecorder]
) -> None:
    completions, deadline = 10, 3600
    manifest = job_manifest(
        "forged-carry", completions=completions, parallelism=5, activeDeadlineSeconds=deadline
    )
    manifest["metadata"]["annotations"] = {
        CARRIED_OVER_ANNOTATION: json.dumps({"succeeded": completions, "elapsedSeconds": 3000})
    }
    created = await relay.submit(manifest)
    uid = created["metadata"]["uid"]
    worker = await relay.wait_placed("forged-carry")
    job = await relay.wait_finished("forged-carry", timeout=120)
    assert is_true(job, "Complete"), job.get("status")
    assert job["status"]["succeeded"] == completions

    (first, *_) = relay.mirror_versions(uid)[worker]
    # The mirror carries no record the tenant wrote, asks for every completion and the
    # whole deadline.
    assert CARRIED_OVER_ANNOTATION not in annotations_of(first)
    assert first["spec"]["completions"] == completions
    assert first["spec"]["activeDeadlineSeconds"] == deadline
    # Ten ran: every completion is a pod that succeeded on the worker.
    ran = pods_of(pod_watch[worker], first["metadata"]["uid"])
    assert len(pods_of(pod_watch[worker], first["metadata"]["uid"], "Succeeded")) == completions
    assert len(ran) == completions, sorted(ran)
    # The management Job never showed work its worker had not done.
    shown = [
        (version.get("status") or {}).get("succeeded") or 0
        for _, version in relay.jobs.events
        if version["metadata"].get("uid") == uid
    ]
    last_mirror = relay.mirror_versions(uid)[worker][-1]
    assert max(shown) == (last_mirror.get("status") or {}).get("succeeded") == completions


async def test_a_forged_mirror_with_a_higher_run_is_not_followed(
    relay: Relay, pod_watch: dict[str, WatchRecorder]
) -> None:
    """The forger waits for a moment the real mirror is gone (here: deleted by hand on
    its worker). jobrelay used to find the forged one the only live "mirror", re-place the
    Job onto the forger (PlacementConflict) and copy whatever it showed. Now the Job runs
    again on its own worker, from a mirror jobrelay creates, and completes once there."""
    created = await relay.submit(
        job_manifest(
            "forged-run",
            annotations={"fleet.jobrelay.dev/duration": "6s"},
            activeDeadlineSeconds=600,
        )
    )
    uid = created["metadata"]["uid"]
    worker = await relay.wait_placed("forged-run")
    other = next(name for name in relay.workers if name != worker)
    await relay.wait_active("forged-run")
    (ours, *_) = relay.mirror_versions(uid)[worker]
    first_uid = ours["metadata"]["uid"]
    # Its record (jobrelay.dev/mirrors) comes off the dispatch path, once it has run a
    # while (steps/mirror_record.py); meanwhile the create's own answer names it.

    # The other worker's admin forges a mirror: our labels, the Job's UID, run 7. Its pod
    # succeeds at once, so following it would complete the Job from the wrong worker.
    fake = job_manifest("forged-run", annotations={"fleet.jobrelay.dev/duration": "100ms"})
    fake["metadata"].update(
        namespace=relay.namespace,
        labels={
            MIRROR_LABEL: controller_label_value(DEFAULT_CONTROLLER_NAME),
            ORIGIN_LABEL: ours["metadata"]["labels"][ORIGIN_LABEL],
            ORIGIN_UID_LABEL: uid,
        },
        annotations={RUN_ANNOTATION: "7", CONTROLLER_ANNOTATION: DEFAULT_CONTROLLER_NAME},
    )
    relay.controller.mark(f"forging a mirror of forged-run on {other}")
    forged = await relay.clients[other].create(JOBS, fake, namespace=relay.namespace)
    forged_uid = forged["metadata"]["uid"]
    # The real mirror goes (as kubectl delete would): the forged one is now the only one.
    relay.controller.mark(f"deleting the mirror of forged-run on {worker} by hand")
    await relay.clients[worker].delete(
        JOBS, "forged-run", namespace=relay.namespace, propagation_policy="Background",
        uid=first_uid,
    )  # fmt: skip

    job = await relay.wait_finished("forged-run", timeout=90)
    reasons = [e.get("reason") for e in await relay.events(uid)]
    # Never placed on the forger, never moved: it ran again where it was placed.
    assert annotations_of(job)[PLACEMENTS_ANNOTATION] == worker, (annotations_of(job), reasons)
    assert "PlacementConflict" not in reasons and "Redispatched" not in reasons, reasons
    assert "MirrorVanished" in reasons, reasons
    assert is_true(job, "Complete") and job["status"]["succeeded"] == 1, job.get("status")
    # Every mirror jobrelay made is on its worker; the last one is recorded, and it is the
    # one that completed, by one pod.
    made = {(w, u) for w, u in relay.mirror_uids(uid) if u != forged_uid}
    assert {w for w, _ in made} == {worker}, made
    (second_uid,) = {u for _, u in made} - {first_uid}
    # Only jobrelay's own mirrors were ever recorded: never the forged one (a workload
    # that finishes before its record is due needs none).
    records = {
        (version["metadata"].get("annotations") or {}).get(MIRRORS_ANNOTATION)
        for _, version in relay.jobs.events
        if version["metadata"].get("uid") == uid
    }
    assert records <= {None, f"1:{worker}:{first_uid}", f"1:{worker}:{second_uid}"}, records
    assert annotations_of(job).get(MIRRORS_ANNOTATION) in (None, f"1:{worker}:{second_uid}")
    final = next(v for v in reversed(relay.mirror_versions(uid)[worker])
                 if v["metadata"]["uid"] == second_uid)  # fmt: skip
    assert is_true(final, "Complete")
    assert len(pods_of(pod_watch[worker], second_uid, "Succeeded")) == 1
    assert pods_of(pod_watch[worker], first_uid, "Succeeded") == set()
    # jobrelay said what it saw, and left the forged object alone.
    await relay.wait_event(
        uid,
        lambda e: e.get("reason") == "ForeignMirror" and other in (e.get("message") or ""),
        what=f"a ForeignMirror Event naming {other}",
    )
    still = await relay.clients[other].get(JOBS, "forged-run", namespace=relay.namespace)
    assert still["metadata"]["uid"] == forged_uid
