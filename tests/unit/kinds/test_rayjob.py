"""The RayJob adapter (ray.io/v1): mirror, spec patch, status merge, finish, pod sets."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.base import Finish, PodSet
from jobrelay.kinds.pods import pod_requests
from jobrelay.kinds.ray import RayJobKind
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL

RAYJOB = RayJobKind()
NOW = "2026-01-01T00:00:10Z"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def pod(cpu: str = "1", memory: str = "1Gi") -> JsonObj:
    return {"spec": {"containers": [{"name": "c", "image": "ray",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}  # fmt: skip


def rayjob(status: JsonObj | None = None, **spec: Any) -> JsonObj:
    obj: JsonObj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1", "resourceVersion": "5",
                     "generation": 3},
        "spec": {
            "managedBy": MULTIKUEUE,
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": pod("2", "4Gi")},
                "workerGroupSpecs": [
                    {"groupName": "small", "replicas": 3, "minReplicas": 1, "maxReplicas": 5,
                     "rayStartParams": {}, "template": pod("1", "2Gi")},
                    {"groupName": "tpu", "minReplicas": 2, "maxReplicas": 4, "numOfHosts": 4,
                     "rayStartParams": {}, "template": pod("4", "8Gi")},
                ],
            },
            **spec,
        },
    }  # fmt: skip
    if status is not None:
        obj["status"] = status
    return obj


def mirror_with(status: JsonObj) -> JsonObj:
    mirror = RAYJOB.build_mirror(rayjob(), controller_name="jobrelay.dev/relay", origin="o")
    return {**mirror, "status": status}


def test_the_mirror_drops_managed_by_and_never_deletes_itself() -> None:
    obj = rayjob(
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=60,
        deletionStrategy={"deletionRules": [
            {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}},
            {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}},
        ]},
    )  # fmt: skip
    given = copy.deepcopy(obj)
    mirror = RAYJOB.build_mirror(obj, controller_name="jobrelay.dev/relay", origin="o")
    assert obj == given
    assert "managedBy" not in mirror["spec"]
    assert (mirror["apiVersion"], mirror["kind"]) == ("ray.io/v1", "RayJob")
    assert mirror["metadata"]["labels"][ORIGIN_UID_LABEL] == "u-1"
    # Deleting only the RayCluster leaves the mirror's final status for jobrelay to copy.
    assert mirror["spec"]["shutdownAfterJobFinishes"] is True
    assert mirror["spec"]["ttlSecondsAfterFinished"] == 60
    assert [r["policy"] for r in mirror["spec"]["deletionStrategy"]["deletionRules"]] == [
        "DeleteWorkers",
        "DeleteCluster",
    ]
    legacy = RAYJOB.build_mirror(
        rayjob(deletionStrategy={"onSuccess": {"policy": "DeleteSelf"},
                                 "onFailure": {"policy": "DeleteNone"}}),
        controller_name="c", origin="o",
    )  # fmt: skip
    assert legacy["spec"]["deletionStrategy"] == {
        "onSuccess": {"policy": "DeleteCluster"},
        "onFailure": {"policy": "DeleteNone"},
    }


@pytest.mark.parametrize(
    ("mine", "theirs", "patch"),
    [
        (True, False, {"spec": {"suspend": True}}),
        (False, True, {"spec": {"suspend": False}}),
        (False, None, None),
        (True, True, None),
    ],
)
def test_suspend_reaches_the_mirror(mine: bool, theirs: bool | None, patch: JsonObj | None) -> None:
    mirror = mirror_with({})
    if theirs is not None:
        mirror["spec"]["suspend"] = theirs
    assert RAYJOB.spec_patch(rayjob(suspend=mine), mirror) == patch
    assert RAYJOB.slim_mirror(mirror)["spec"] == ({"suspend": theirs} if theirs is not None else {})


RUNNING = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": "train-x",
           "rayClusterName": "train-raycluster-abc", "startTime": "2026-01-01T00:00:01Z",
           "observedGeneration": 1}  # fmt: skip


@pytest.mark.parametrize(
    ("current", "theirs", "expected"),
    [
        # The mirror's status is copied as the operator wrote it.
        ({}, RUNNING, RUNNING),
        # A stale status with fewer attempts and an older start keeps ours.
        ({**RUNNING, "failed": 2, "startTime": "2026-01-01T00:00:05Z"},
         {**RUNNING, "failed": 1, "jobDeploymentStatus": "Retrying"},
         {**RUNNING, "failed": 2, "jobDeploymentStatus": "Retrying",
          "startTime": "2026-01-01T00:00:05Z"}),
        # Resumed: KubeRay starts it again, later.
        ({**RUNNING, "startTime": "2026-01-01T00:00:00Z"},
         {**RUNNING, "startTime": "2026-01-01T00:00:07Z"},
         {**RUNNING, "startTime": "2026-01-01T00:00:07Z"}),
        # In step: nothing to write.
        (RUNNING, RUNNING, None),
        # An empty mirror status says nothing yet.
        ({"jobDeploymentStatus": "Initializing"}, {}, None),
    ],
)  # fmt: skip
def test_the_status_follows_the_mirror_forward_only(
    current: JsonObj, theirs: JsonObj, expected: JsonObj | None
) -> None:
    assert RAYJOB.next_status(rayjob(current), mirror_with(theirs), now=NOW) == expected


def test_no_status_is_written_once_finished_and_suspension_shows_without_a_mirror() -> None:
    done = rayjob({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"})
    assert RAYJOB.next_status(done, mirror_with(RUNNING), now=NOW) is None
    suspended = rayjob({"jobDeploymentStatus": "Running"}, suspend=True)
    assert RAYJOB.next_status(suspended, None, now=NOW) == {"jobDeploymentStatus": "Suspended"}
    assert RAYJOB.next_status(rayjob({}), None, now=NOW) is None


@pytest.mark.parametrize(
    ("status", "finish"),
    [
        ({"jobDeploymentStatus": "Running", "jobStatus": "SUCCEEDED"}, None),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"},
         Finish(True, "SUCCEEDED", "")),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, Finish(False, "STOPPED", "")),
        ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed",
          "message": "exit 1"}, Finish(False, "AppFailed", "exit 1")),
        ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"},
         Finish(False, "DeadlineExceeded", "")),
        ({"jobDeploymentStatus": "ValidationFailed", "message": "bad"},
         Finish(False, "ValidationFailed", "bad")),
        ({"jobDeploymentStatus": "Retrying", "jobStatus": "FAILED"}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_how_a_rayjob_finishes(status: JsonObj, finish: Finish | None) -> None:
    assert RAYJOB.finish(rayjob(status)) == finish


def test_failed_status_is_a_failed_deployment() -> None:
    status = RAYJOB.failed_status(rayjob({"failed": 1}), "Unplaceable", "no worker", now=NOW)
    assert status == {"failed": 1, "jobDeploymentStatus": "Failed", "reason": "Unplaceable",
                      "message": "no worker", "endTime": NOW}  # fmt: skip
    assert RAYJOB.finish(rayjob(status)) == Finish(False, "Unplaceable", "no worker")


def test_running_and_run() -> None:
    assert RAYJOB.shows_running(rayjob(RUNNING))
    assert not RAYJOB.shows_running(rayjob({"jobDeploymentStatus": "Initializing"}))
    assert RAYJOB.has_run(rayjob(RUNNING)) and not RAYJOB.has_run(rayjob({}))
    assert RAYJOB.is_suspended(rayjob(suspend=True)) and not RAYJOB.is_suspended(rayjob())


def asks(cpu: str, memory: str) -> dict[str, str]:
    return pod_requests(pod(cpu, memory)["spec"])


def test_pod_sets_are_the_cluster_and_the_submitter() -> None:
    assert RAYJOB.pod_sets(rayjob()) == [
        PodSet("head", 1, asks("2", "4Gi")),
        PodSet("small", 3, asks("1", "2Gi")),
        PodSet("tpu", 8, asks("4", "8Gi")),  # minReplicas 2 x numOfHosts 4
        PodSet("submitter", 1, asks("500m", "200Mi")),  # KubeRay's default submitter
    ]
    custom = rayjob(submitterPodTemplate=pod("100m", "64Mi"))
    assert RAYJOB.pod_sets(custom)[-1] == PodSet("submitter", 1, asks("100m", "64Mi"))
    assert len(RAYJOB.pod_templates(custom)) == 4
    http = rayjob(submissionMode="HTTPMode")
    assert [s.name for s in RAYJOB.pod_sets(http)] == ["head", "small", "tpu"]
    assert len(RAYJOB.pod_templates(http)) == 3
    # On an existing cluster (clusterSelector): only the submitter.
    selector = {**rayjob(), "spec": {"clusterSelector": {"ray.io/cluster": "c"}}}
    assert [s.name for s in RAYJOB.pod_sets(selector)] == ["submitter"]


# -- properties --------------------------------------------------------------------------

deployments = st.sampled_from(
    ["", "Initializing", "Running", "Suspending", "Suspended", "Retrying", "Waiting"]
)
statuses = st.fixed_dictionaries(
    {},
    optional={
        "jobDeploymentStatus": deployments,
        "jobStatus": st.sampled_from(["", "PENDING", "RUNNING", "FAILED"]),
        "succeeded": st.integers(0, 5),
        "failed": st.integers(0, 5),
        "startTime": st.sampled_from(["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]),
        "endTime": st.sampled_from(["2026-01-01T00:00:05Z"]),
    },
)


@given(st.lists(statuses, min_size=1, max_size=8))
def test_a_merged_status_never_moves_a_counter_or_a_time_backwards(seen: list[JsonObj]) -> None:
    """Mirror statuses arriving in any order: succeeded and failed only grow, startTime
    and endTime never move earlier."""
    obj = rayjob({})
    for theirs in seen:
        before = copy.deepcopy(obj.get("status") or {})
        status = RAYJOB.next_status(obj, mirror_with(theirs), now=NOW)
        if status is not None:
            obj["status"] = status
        after = obj.get("status") or {}
        for counter in ("succeeded", "failed"):
            assert int(after.get(counter) or 0) >= int(before.get(counter) or 0)
        for time in ("startTime", "endTime"):
            if before.get(time) and after.get(time):
                assert after[time] >= before[time]


@given(statuses, st.sampled_from(["Complete", "Failed"]))
def test_a_finished_rayjob_stays_finished(theirs: JsonObj, end: str) -> None:
    obj = rayjob({"jobDeploymentStatus": end})
    assert RAYJOB.next_status(obj, mirror_with(theirs), now=NOW) is None
