"""The TrainJob adapter (trainer.kubeflow.org/v1alpha1)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.base import Finish, PodSet
from jobrelay.kinds.pods import pod_requests
from jobrelay.kinds.trainjob import TrainJobKind
from jobrelay.vocabulary.json_types import JsonObj

TRAINJOB = TrainJobKind()
NOW = "2026-01-01T00:00:10Z"
T0 = "2026-01-01T00:00:00Z"


def trainjob(status: JsonObj | None = None, **spec: object) -> JsonObj:
    obj: JsonObj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "team-a", "uid": "u-3"},
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 4,
                        "resourcesPerNode": {"requests": {"cpu": "8", "nvidia.com/gpu": "1"}}},
            **spec,
        },
    }  # fmt: skip
    if status is not None:
        obj["status"] = status
    return obj


def job(name: str, **counts: int) -> JsonObj:
    return {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0,
            **counts}  # fmt: skip


def cond(kind: str, status: str = "True", reason: str = "R") -> JsonObj:
    return {"type": kind, "status": status, "reason": reason, "message": "m",
            "lastTransitionTime": T0}  # fmt: skip


def mirror_with(status: JsonObj) -> JsonObj:
    return {**TRAINJOB.build_mirror(trainjob(), controller_name="c", origin="o"), "status": status}


def test_the_mirror_drops_managed_by() -> None:
    mirror = TRAINJOB.build_mirror(trainjob(), controller_name="c", origin="o")
    assert "managedBy" not in mirror["spec"]
    assert mirror["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    assert TRAINJOB.crd_managed_by_values == (
        "trainer.kubeflow.org/trainjob-controller",
        "kueue.x-k8s.io/multikueue",
    )


@pytest.mark.parametrize(
    ("current", "theirs", "expected"),
    [
        ({}, {"jobsStatus": [job("node", active=4, ready=4)]},
         {"jobsStatus": [job("node", active=4, ready=4)]}),
        # A stale status: succeeded never goes back.
        ({"jobsStatus": [job("node", succeeded=3, active=1)]},
         {"jobsStatus": [job("node", succeeded=2, active=2)]},
         {"jobsStatus": [job("node", succeeded=3, active=2)]}),
        # A job only we know stays.
        ({"jobsStatus": [job("init", succeeded=1)]}, {"jobsStatus": [job("node", active=4)]},
         {"jobsStatus": [job("node", active=4), job("init", succeeded=1)]}),
        ({"jobsStatus": [job("node", active=4)]}, {"jobsStatus": [job("node", active=4)]}, None),
    ],
)  # fmt: skip
def test_the_status_follows_the_mirror_forward_only(
    current: JsonObj, theirs: JsonObj, expected: JsonObj | None
) -> None:
    assert TRAINJOB.next_status(trainjob(current), mirror_with(theirs), now=NOW) == expected


def test_our_suspend_decides_the_suspended_condition() -> None:
    suspended = TRAINJOB.next_status(trainjob({}, suspend=True), mirror_with({}), now=NOW)
    assert suspended == {"conditions": [
        {"type": "Suspended", "status": "True", "reason": "Suspended",
         "message": "TrainJob is suspended", "lastTransitionTime": NOW}]}  # fmt: skip
    resumed = TRAINJOB.next_status(trainjob(suspended), mirror_with({"conditions": [
        cond("Suspended")]}), now=NOW)  # fmt: skip
    assert resumed is not None
    assert [(c["type"], c["status"], c["reason"]) for c in resumed["conditions"]] == [
        ("Suspended", "False", "Resumed")
    ]
    idle = TRAINJOB.next_status(trainjob({"jobsStatus": [job("node", active=4, ready=4)]}), None,
                                now=NOW)  # fmt: skip
    assert idle == {"jobsStatus": [job("node")]}


@pytest.mark.parametrize(
    ("conditions", "finish"),
    [
        ([cond("Complete", reason="JobsCompleted")], Finish(True, "JobsCompleted", "m")),
        ([cond("Failed", reason="JobsFailed")], Finish(False, "JobsFailed", "m")),
        ([cond("Complete", "False"), cond("Suspended")], None),
        ([], None),
    ],
)
def test_how_a_trainjob_finishes(conditions: list[JsonObj], finish: Finish | None) -> None:
    assert TRAINJOB.finish(trainjob({"conditions": conditions})) == finish


def test_failed_status_running_and_pod_sets() -> None:
    failed = TRAINJOB.failed_status(trainjob({}), "Unplaceable", "no worker", now=NOW)
    assert TRAINJOB.finish(trainjob(failed)) == Finish(False, "Unplaceable", "no worker")
    assert TRAINJOB.next_status(trainjob(failed), mirror_with({"jobsStatus": [job("n")]}),
                                now=NOW) is None  # fmt: skip
    assert TRAINJOB.shows_running(trainjob({"jobsStatus": [job("node", active=1)]}))
    assert not TRAINJOB.has_run(trainjob({"jobsStatus": [job("node")]}))
    assert TRAINJOB.pod_sets(trainjob()) == [
        PodSet(
            "node",
            4,
            pod_requests(
                {"containers": [{"resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "1"}}}]}
            ),
        )
    ]
    # Its pods come from the runtime: without numNodes and resourcesPerNode nothing is counted.
    assert TRAINJOB.pod_sets(trainjob(trainer={"numNodes": 2})) == []
    assert TRAINJOB.pod_templates(trainjob()) == []
    assert TRAINJOB.spec_patch(trainjob(suspend=True), mirror_with({})) == {
        "spec": {"suspend": True}
    }


jobs = st.lists(
    st.builds(lambda n, s, f, a: job(n, succeeded=s, failed=f, active=a),
              st.sampled_from(["node", "init"]), st.integers(0, 5), st.integers(0, 5),
              st.integers(0, 5)),
    max_size=2, unique_by=lambda j: j["name"],
)  # fmt: skip


@given(st.lists(st.fixed_dictionaries({"jobsStatus": jobs}), min_size=1, max_size=8))
def test_a_merged_status_never_moves_a_counter_backwards(seen: list[JsonObj]) -> None:
    obj = trainjob({})
    for theirs in seen:
        before = {j["name"]: j for j in (obj.get("status") or {}).get("jobsStatus") or []}
        status = TRAINJOB.next_status(obj, mirror_with(copy.deepcopy(theirs)), now=NOW)
        if status is not None:
            obj["status"] = status
        after = {j["name"]: j for j in (obj.get("status") or {}).get("jobsStatus") or []}
        for name, was in before.items():
            for counter in ("succeeded", "failed"):
                assert after[name][counter] >= was[counter]
