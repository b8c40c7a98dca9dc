"""The MPIJob adapter (kubeflow.org/v2beta1): PyTorchJob's rules over mpiReplicaSpecs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.kinds.test_pytorchjob import T0, cond, mirror_with, never_backwards, statuses

from jobrelay.kinds.base import Finish, PodSet
from jobrelay.kinds.kubeflow import MPIJobKind
from jobrelay.kinds.pods import pod_requests
from jobrelay.vocabulary.json_types import JsonObj

MPIJOB = MPIJobKind()
NOW = "2026-01-01T00:00:10Z"


def mpijob(status: JsonObj | None = None, **run_policy: object) -> JsonObj:
    worker = {"spec": {"containers": [{"name": "w", "image": "mpi",
                                       "resources": {"requests": {"cpu": "2"}}}]}}  # fmt: skip
    obj: JsonObj = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "team-a", "uid": "u-5"},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue", "cleanPodPolicy": "Running",
                          **run_policy},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "l", "image": "mpi"}]}}},
                "Worker": {"replicas": 2, "template": worker},
            },
        },
    }  # fmt: skip
    if status is not None:
        obj["status"] = status
    return obj


def test_the_mirror_the_suspend_and_the_pod_sets() -> None:
    mirror = MPIJOB.build_mirror(mpijob(ttlSecondsAfterFinished=5), controller_name="c", origin="o")
    assert mirror["apiVersion"] == "kubeflow.org/v2beta1"
    assert mirror["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert MPIJOB.spec_patch(mpijob(suspend=True), mirror) == {
        "spec": {"runPolicy": {"suspend": True}}
    }
    assert MPIJOB.pod_sets(mpijob()) == [
        PodSet("Launcher", 1, {}),
        PodSet(
            "Worker", 2, pod_requests({"containers": [{"resources": {"requests": {"cpu": "2"}}}]})
        ),
    ]


def test_how_it_finishes_and_what_it_copies() -> None:
    done = mpijob({"conditions": [cond("Succeeded", reason="MPIJobSucceeded")],
                   "completionTime": T0})  # fmt: skip
    assert MPIJOB.finish(done) == Finish(True, "MPIJobSucceeded", "m")
    assert MPIJOB.finish(
        mpijob({"conditions": [cond("Failed", reason="BackoffLimitExceeded")]})
    ) == (Finish(False, "BackoffLimitExceeded", "m"))
    running = {"conditions": [cond("Running")], "replicaStatuses": {"Launcher": {"active": 1}}}
    assert (
        MPIJOB.next_status(mpijob({}), mirror_with(MPIJOB, mpijob(), running), now=NOW) == running
    )
    assert MPIJOB.next_status(done, mirror_with(MPIJOB, mpijob(), running), now=NOW) is None


@given(st.lists(statuses, min_size=1, max_size=8))
def test_a_merged_status_never_moves_a_counter_backwards(seen: list[JsonObj]) -> None:
    never_backwards(MPIJOB, mpijob({}), seen)
