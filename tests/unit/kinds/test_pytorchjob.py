"""The PyTorchJob adapter (kubeflow.org/v1): managedBy and suspend in spec.runPolicy."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.base import RUN_POLICY_MANAGED_BY, Finish, PodSet
from jobrelay.kinds.kubeflow import KubeflowJobKind, PyTorchJobKind
from jobrelay.kinds.pods import pod_requests
from jobrelay.vocabulary.json_types import JsonObj

PYTORCH = PyTorchJobKind()
NOW = "2026-01-01T00:00:10Z"
T0 = "2026-01-01T00:00:00Z"


def template(cpu: str) -> JsonObj:
    return {"spec": {"containers": [{"name": "pytorch", "image": "torch",
                                     "resources": {"requests": {"cpu": cpu}}}]}}  # fmt: skip


def pytorchjob(status: JsonObj | None = None, **run_policy: Any) -> JsonObj:
    obj: JsonObj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u-4"},
        "spec": {
            "runPolicy": {"managedBy": "jobrelay.dev/relay", "ttlSecondsAfterFinished": 60,
                          "backoffLimit": 2, **run_policy},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template("2")},
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template("1")},
            },
        },
    }  # fmt: skip
    if status is not None:
        obj["status"] = status
    return obj


def cond(kind: str, status: str = "True", reason: str = "R") -> JsonObj:
    return {"type": kind, "status": status, "reason": reason, "message": "m",
            "lastUpdateTime": T0, "lastTransitionTime": T0}  # fmt: skip


def mirror_with(kind: KubeflowJobKind, obj: JsonObj, status: JsonObj) -> JsonObj:
    return {**kind.build_mirror(obj, controller_name="c", origin="o"), "status": status}


def test_the_mirror_drops_managed_by_and_the_ttl_from_the_run_policy() -> None:
    obj = pytorchjob()
    given = copy.deepcopy(obj)
    mirror = PYTORCH.build_mirror(obj, controller_name="c", origin="o")
    assert obj == given
    assert mirror["spec"]["runPolicy"] == {"backoffLimit": 2}
    assert mirror["spec"]["pytorchReplicaSpecs"] == obj["spec"]["pytorchReplicaSpecs"]
    assert PYTORCH.managed_by_field == RUN_POLICY_MANAGED_BY
    assert PYTORCH.managed_by(obj) == "jobrelay.dev/relay"
    assert PYTORCH.managed_by({"spec": {"managedBy": "jobrelay.dev/relay"}}) is None


def test_suspend_lives_in_the_run_policy() -> None:
    mirror = mirror_with(PYTORCH, pytorchjob(), {})
    assert PYTORCH.is_suspended(pytorchjob(suspend=True))
    assert PYTORCH.spec_patch(pytorchjob(suspend=True), mirror) == {
        "spec": {"runPolicy": {"suspend": True}}
    }
    assert PYTORCH.spec_patch(pytorchjob(), mirror) is None
    mirror["spec"]["runPolicy"]["suspend"] = True
    assert PYTORCH.slim_mirror(mirror)["spec"] == {"runPolicy": {"suspend": True}}
    assert PYTORCH.spec_patch(pytorchjob(suspend=False), mirror) == {
        "spec": {"runPolicy": {"suspend": False}}
    }


RUNNING = {
    "conditions": [cond("Created"), cond("Running")],
    "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 3, "succeeded": 0}},
    "startTime": T0,
}


@pytest.mark.parametrize(
    ("current", "theirs", "expected"),
    [
        ({}, RUNNING, RUNNING),
        # Stale: a replica type's succeeded and failed never go back, nor startTime.
        ({**RUNNING, "replicaStatuses": {"Worker": {"active": 1, "succeeded": 2, "failed": 1}},
          "startTime": "2026-01-01T00:00:05Z"},
         RUNNING,
         {**RUNNING, "replicaStatuses": {"Master": {"active": 1},
                                         "Worker": {"active": 3, "succeeded": 2, "failed": 1}},
          "startTime": "2026-01-01T00:00:05Z"}),
        # Resumed after a suspension: the operator starts it again, later.
        (RUNNING, {**RUNNING, "startTime": "2026-01-01T00:00:09Z"},
         {**RUNNING, "startTime": "2026-01-01T00:00:09Z"}),
        (RUNNING, RUNNING, None),
        (RUNNING, {}, None),
    ],
)  # fmt: skip
def test_the_status_follows_the_mirror_forward_only(
    current: JsonObj, theirs: JsonObj, expected: JsonObj | None
) -> None:
    obj = pytorchjob(current)
    assert PYTORCH.next_status(obj, mirror_with(PYTORCH, obj, theirs), now=NOW) == expected


def test_without_a_mirror_nothing_is_active() -> None:
    idle = PYTORCH.next_status(pytorchjob(RUNNING), None, now=NOW)
    assert idle is not None
    assert idle["replicaStatuses"] == {
        "Master": {"active": 0},
        "Worker": {"active": 0, "succeeded": 0},
    }
    gone = PYTORCH.next_status(pytorchjob({}), mirror_with(PYTORCH, pytorchjob(), RUNNING), now=NOW,
                               gone=True)  # fmt: skip
    assert gone is not None and gone["replicaStatuses"]["Worker"]["active"] == 0


@pytest.mark.parametrize(
    ("conditions", "finish"),
    [
        ([cond("Running", "False"), cond("Succeeded", reason="PyTorchJobSucceeded")],
         Finish(True, "PyTorchJobSucceeded", "m")),
        ([cond("Failed", reason="PyTorchJobFailed")], Finish(False, "PyTorchJobFailed", "m")),
        ([cond("Running"), cond("Restarting", "False")], None),
        ([cond("Suspended")], None),
    ],
)  # fmt: skip
def test_how_it_finishes(conditions: list[JsonObj], finish: Finish | None) -> None:
    assert PYTORCH.finish(pytorchjob({"conditions": conditions})) == finish


def test_failed_status_running_and_pod_sets() -> None:
    failed = PYTORCH.failed_status(pytorchjob(RUNNING), "Unplaceable", "no worker", now=NOW)
    assert failed is not None
    assert [c["type"] for c in failed["conditions"]] == ["Created", "Failed"]
    assert PYTORCH.finish(pytorchjob(failed)) == Finish(False, "Unplaceable", "no worker")
    assert PYTORCH.shows_running(pytorchjob(RUNNING)) and PYTORCH.has_run(pytorchjob(RUNNING))
    assert not PYTORCH.has_run(pytorchjob({}))
    assert PYTORCH.pod_sets(pytorchjob()) == [
        PodSet("Master", 1, pod_requests(template("2")["spec"])),
        PodSet("Worker", 3, pod_requests(template("1")["spec"])),
    ]
    assert len(PYTORCH.pod_templates(pytorchjob())) == 2


replica = st.fixed_dictionaries(
    {}, optional={"active": st.integers(0, 3), "succeeded": st.integers(0, 3),
                  "failed": st.integers(0, 3)},
)  # fmt: skip
statuses = st.fixed_dictionaries(
    {"replicaStatuses": st.dictionaries(st.sampled_from(["Master", "Worker"]), replica)},
    optional={"startTime": st.sampled_from([T0, "2026-01-01T00:00:04Z"]),
              "conditions": st.lists(st.sampled_from([cond("Running"), cond("Created")]),
                                     max_size=2, unique_by=lambda c: c["type"])},
)  # fmt: skip


def never_backwards(kind: KubeflowJobKind, obj: JsonObj, seen: list[JsonObj]) -> None:
    for theirs in seen:
        before = copy.deepcopy(obj.get("status") or {})
        status = kind.next_status(obj, mirror_with(kind, obj, copy.deepcopy(theirs)), now=NOW)
        if status is not None:
            obj["status"] = status
        after = obj.get("status") or {}
        for name, was in (before.get("replicaStatuses") or {}).items():
            now_ = (after.get("replicaStatuses") or {}).get(name) or {}
            for counter in ("succeeded", "failed"):
                assert int(now_.get(counter) or 0) >= int(was.get(counter) or 0)
        if before.get("startTime") and after.get("startTime"):
            assert after["startTime"] >= before["startTime"]


@given(st.lists(statuses, min_size=1, max_size=8))
def test_a_merged_status_never_moves_a_counter_backwards(seen: list[JsonObj]) -> None:
    never_backwards(PYTORCH, pytorchjob({}), seen)
