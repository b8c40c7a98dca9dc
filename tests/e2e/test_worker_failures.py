"""Retries that move when the worker is at fault, and stay when the workload is.

worker-1's KWOK refuses to pull the image ``fleet.jobrelay.dev/refused-on-worker-1``
(localfleet/image_refusals.py: its pods wait in ``ErrImagePull`` there, and run
anywhere else). A Job of that image placed on worker-1 moves to worker-2 and completes
there once; a Job whose container exits 1 stays on its worker and fails by its own
backoffLimit. Both run at once, so the module costs one wait.
"""

from __future__ import annotations

import asyncio

import pytest

from jobrelay.localfleet.image_refusals import REFUSED_IMAGE_PREFIX
from jobrelay.vocabulary.names import (
    CLUSTERS_ANNOTATION,
    PLACEMENT_ANNOTATION,
    WORKER_FAILURES_ANNOTATION,
)
from jobrelay.vocabulary.placement import placements_of
from tests.e2e.support import Relay, assert_finished_status_is_sound
from tests.kubetools import is_true, job_manifest

pytestmark = pytest.mark.e2e

# Placed in this order: worker-1 first while it fits.
FIRST_WORKER_1 = {CLUSTERS_ANNOTATION: "worker-1,worker-2", PLACEMENT_ANNOTATION: "ordered"}


def _with_image(manifest: dict[str, object], image: str) -> dict[str, object]:
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    spec["template"]["spec"]["containers"][0]["image"] = image
    return manifest


async def test_an_image_refused_on_one_worker_moves_and_an_exit_1_stays(relay: Relay) -> None:
    refused = job_manifest("refused", annotations={"fleet.jobrelay.dev/duration": "1s"})
    refused["metadata"]["annotations"] = dict(FIRST_WORKER_1)
    _with_image(refused, f"{REFUSED_IMAGE_PREFIX}worker-1")
    failing = job_manifest(
        "exits-1", backoff_limit=1, annotations={"fleet.jobrelay.dev/outcome": "fail"}
    )
    failing["metadata"]["annotations"] = dict(FIRST_WORKER_1)
    moved, stayed = await asyncio.gather(relay.submit(refused), relay.submit(failing))

    # The refused image: off worker-1, run once on worker-2, counters sound.
    job = await relay.wait_finished("refused", timeout=120)
    assert is_true(job, "Complete"), job.get("status")
    assert_finished_status_is_sound(job)
    assert job["status"]["succeeded"] == 1
    assert job["status"].get("failed", 0) == 0, "a worker-side failure used backoffLimit"
    assert placements_of(job) == ("worker-1", "worker-2")
    record = job["metadata"]["annotations"][WORKER_FAILURES_ANNOTATION]
    assert record.startswith("worker-1@"), record
    warning = await relay.wait_event(
        moved["metadata"]["uid"],
        lambda e: e.get("type") == "Warning" and e.get("reason") == "MovedAfterWorkerFailure",
        what="a Warning MovedAfterWorkerFailure",
    )
    message = warning.get("message") or ""
    assert "worker-1" in message and "ErrImagePull" in message, message
    uid = moved["metadata"]["uid"]
    mirrors = relay.mirror_versions(uid)
    assert set(mirrors) == {"worker-1", "worker-2"}, mirrors
    assert not any((m.get("status") or {}).get("succeeded") for m in mirrors["worker-1"])
    assert [(m.get("status") or {}).get("succeeded") for m in mirrors["worker-2"]][-1] == 1
    await relay.wait_mirror_gone(uid)

    # The workload's own failure: it stays on worker-1, its backoffLimit decides.
    failed = await relay.verify("exits-1", outcome="Failed", reason="BackoffLimitExceeded")
    assert failed.job["status"]["failed"] == 2
    assert placements_of(failed.job) == ("worker-1",)
    assert WORKER_FAILURES_ANNOTATION not in (failed.job["metadata"].get("annotations") or {})
    events = await relay.events(stayed["metadata"]["uid"])
    assert not [e for e in events if e.get("reason") == "MovedAfterWorkerFailure"], events
