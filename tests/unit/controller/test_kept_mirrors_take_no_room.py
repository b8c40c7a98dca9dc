"""A finished mirror kept for its logs (--finished-mirror-ttl) counts as finished, never as
load: not among its worker's unfinished mirrors (placement's load, activeMirrors, a
drain's count), its pods hold no room on a node, and its placement's reservation is
spent."""

from __future__ import annotations

from typing import Any

from tests.unit.controller.builders import FAILED, JOB, NAMESPACE, RUNNING, job, mirror

from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.snapshot import WorkerSnapshot, placement_cluster
from jobrelay.fleet.workers.record import Worker
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.placement.slim_objects import slim_pod
from jobrelay.placement.workload import PodGroup

KEY = WorkloadKey(JOB.name, f"{NAMESPACE}/train")


def _pod(phase: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "train-0", "namespace": NAMESPACE, "uid": "p-1",
                     "labels": {"batch.kubernetes.io/controller-uid": "m-1"}},
        "spec": {"nodeName": "node-0", "containers": [
            {"name": "main", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": phase},
    }  # fmt: skip


def test_a_kept_finished_mirror_takes_no_room() -> None:
    worker = Worker("w1", None, None)  # type: ignore[arg-type]
    running = mirror(job(), status=RUNNING)
    worker.track(JOB, InformerEvent(Change.ADDED, KEY.key, None, running))
    assert worker.unfinished == {KEY} and worker.active_mirrors() == 1
    # It failed, and is kept on its worker for its logs: finished, so no load.
    kept = mirror(job(), status=FAILED)
    worker.track(JOB, InformerEvent(Change.UPDATED, KEY.key, running, kept))
    assert worker.unfinished == set() and worker.active_mirrors() == 0
    # Its pods ended: they hold nothing on their node (the capacity tracker drops them).
    assert slim_pod(_pod("Running")) is not None
    assert slim_pod(_pod("Failed")) is None and slim_pod(_pod("Succeeded")) is None
    # What jobrelay reserved for its placement is spent once its mirror is finished.
    memory = RelayMemory()
    memory.reservations.reserve("w1", KEY, (PodGroup("main", 1, {"cpu": 1000}),))
    memory.reservations.mirror_visible(KEY)
    assert memory.reserved_on(worker) == ()
    memory.prune_reservations(worker)
    assert memory.reservations.on("w1") == [] and memory.reservations.count("w1") == 0
    # So placement sees the worker as empty as it is.
    load = worker.active_mirrors() + memory.reservations.count("w1")
    cluster = placement_cluster(WorkerSnapshot("w1", synced=True, connected=True, load=load))
    assert cluster.load == 0
