"""JobSetKind: mirrors, the never-backwards status merge, finishing, pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.kinds.base import Finish, PodSet
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import (
    CONTROLLER_ANNOTATION,
    MIRROR_LABEL,
    ORIGIN_LABEL,
    ORIGIN_UID_LABEL,
)

KIND = JobSetKind()
NOW = "2026-03-01T12:10:00Z"
EARLIER = "2026-03-01T12:00:00Z"


def jobset(*, suspend: bool | None = None, status: JsonObj | None = None) -> JsonObj:
    spec: JsonObj = {
        "managedBy": "jobrelay.dev/relay",
        "ttlSecondsAfterFinished": 60,
        "failurePolicy": {"maxRestarts": 3},
        "replicatedJobs": [
            {
                "name": "leader",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "l", "resources": {"requests": {"cpu": "1"}}}
                                ]
                            }
                        }
                    }
                },
            },
            {
                "name": "workers",
                "replicas": 3,
                "template": {
                    "spec": {
                        "parallelism": 4,
                        "completions": 2,
                        "template": {
                            "spec": {
                                "nodeSelector": {"pool": "gpu"},
                                "containers": [
                                    {"name": "w", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                                ],
                            }
                        },
                    }
                },
            },
        ],
    }
    if suspend is not None:
        spec["suspend"] = suspend
    obj: JsonObj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "uid-1",
            "resourceVersion": "7",
            "labels": {"app": "train"},
        },
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def mirror_with(status: JsonObj, *, suspend: bool = False) -> JsonObj:
    mirror = KIND.build_mirror(jobset(), controller_name="jobrelay.dev/relay", origin="hq")
    mirror["spec"]["suspend"] = suspend
    mirror["status"] = status
    return mirror


def true(kind: str, reason: str = "", message: str = "") -> JsonObj:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def replicated(name: str, **counters: int) -> JsonObj:
    return {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, **counters}


# -- the mirror ------------------------------------------------------------------------


def test_ref() -> None:
    assert KIND.name == "JobSet.v1alpha2.jobset.x-k8s.io"
    assert KIND.ref.plural == "jobsets"


def test_build_mirror_drops_manager_only_fields_and_marks_its_origin() -> None:
    obj = jobset(suspend=False)
    before = copy.deepcopy(obj)
    mirror = KIND.build_mirror(obj, controller_name="jobrelay.dev/relay", origin="hq")
    assert (mirror["apiVersion"], mirror["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert "managedBy" not in mirror["spec"]
    assert "ttlSecondsAfterFinished" not in mirror["spec"]
    assert mirror["spec"]["failurePolicy"] == {"maxRestarts": 3}
    assert mirror["spec"]["replicatedJobs"] == obj["spec"]["replicatedJobs"]
    metadata = mirror["metadata"]
    assert (metadata["name"], metadata["namespace"]) == ("train", "team-a")
    assert "uid" not in metadata and "resourceVersion" not in metadata
    assert metadata["labels"] == {
        "app": "train",
        MIRROR_LABEL: "jobrelay.dev.relay",
        ORIGIN_LABEL: "hq",
        ORIGIN_UID_LABEL: "uid-1",
    }
    assert metadata["annotations"][CONTROLLER_ANNOTATION] == "jobrelay.dev/relay"
    assert "status" not in mirror
    # A deep copy: editing the mirror leaves the management object alone.
    mirror["spec"]["replicatedJobs"][0]["name"] = "changed"
    assert obj == before


def test_slim_mirror_keeps_what_is_compared_and_the_status() -> None:
    mirror = mirror_with({"restarts": 1})
    mirror["metadata"].update({"uid": "m-1", "managedFields": [{}]})
    slim = KIND.slim_mirror(mirror)
    assert "replicatedJobs" not in slim["spec"]
    assert slim["spec"]["suspend"] is False
    assert slim["status"] == {"restarts": 1}
    assert slim["metadata"]["uid"] == "m-1" and "managedFields" not in slim["metadata"]
    assert KIND.spec_patch(jobset(), slim) is None
    assert KIND.slim_mirror({"metadata": {}})["spec"] == {}


@pytest.mark.parametrize(
    ("mine", "theirs", "patch"),
    [
        (None, False, None),  # absent means not suspended
        (False, False, None),
        (True, True, None),
        (True, False, {"spec": {"suspend": True}}),
        (False, True, {"spec": {"suspend": False}}),
        (None, True, {"spec": {"suspend": False}}),
    ],
)
def test_spec_patch_follows_suspend(mine: bool | None, theirs: bool, patch: JsonObj | None) -> None:
    assert KIND.spec_patch(jobset(suspend=mine), mirror_with({}, suspend=theirs)) == patch


# -- the status ------------------------------------------------------------------------


def test_not_placed_only_its_own_suspend_shows() -> None:
    assert KIND.next_status(jobset(), None, now=NOW) is None
    status = KIND.next_status(jobset(suspend=True), None, now=NOW)
    assert status == {
        "conditions": [
            {
                "type": "Suspended",
                "status": "True",
                "reason": "SuspendedJobs",
                "message": "jobset is suspended",
                "lastTransitionTime": NOW,
            }
        ]
    }
    assert KIND.next_status(jobset(suspend=True, status=status), None, now=NOW) is None
    resumed = KIND.next_status(jobset(suspend=False, status=status), None, now=NOW)
    assert resumed is not None
    (condition,) = resumed["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "ResumeJobs")


def test_the_mirror_status_is_copied() -> None:
    theirs = {
        "restarts": 0,
        "replicatedJobsStatus": [replicated("workers", active=3, ready=2)],
        "conditions": [],
    }
    status = KIND.next_status(jobset(), mirror_with(theirs), now=NOW)
    assert status is not None
    assert status["replicatedJobsStatus"] == [replicated("workers", active=3, ready=2)]
    assert "conditions" not in status  # empty values are left out, as the API omits them
    # In step: nothing to write.
    assert KIND.next_status(jobset(status=status), mirror_with(theirs), now=NOW) is None


def test_a_stale_status_of_the_same_attempt_takes_no_counter_back() -> None:
    current = {"replicatedJobsStatus": [replicated("workers", succeeded=2, failed=1, active=1)]}
    stale = {"replicatedJobsStatus": [replicated("workers", succeeded=1, active=2)]}
    status = KIND.next_status(jobset(status=current), mirror_with(stale), now=NOW)
    assert status is not None
    (workers,) = status["replicatedJobsStatus"]
    assert (workers["succeeded"], workers["failed"]) == (2, 1)
    assert workers["active"] == 2  # a gauge: the newest seen is the truth


def test_an_older_attempt_changes_nothing_and_a_restart_resets_the_counters() -> None:
    current = {
        "restarts": 2,
        "replicatedJobsStatus": [replicated("workers", succeeded=1)],
    }
    older = {"restarts": 1, "replicatedJobsStatus": [replicated("workers", succeeded=3)]}
    assert KIND.next_status(jobset(status=current), mirror_with(older), now=NOW) is None
    restarted = {
        "restarts": 3,
        "restartsCountTowardsMax": 2,
        "replicatedJobsStatus": [replicated("workers", active=1)],
    }
    status = KIND.next_status(jobset(status=current), mirror_with(restarted), now=NOW)
    assert status is not None
    assert status["restarts"] == 3 and status["restartsCountTowardsMax"] == 2
    assert status["replicatedJobsStatus"] == [replicated("workers", active=1)]


def test_restarts_counting_towards_max_never_drop() -> None:
    current = {"restarts": 2, "restartsCountTowardsMax": 2}
    theirs = {"restarts": 2, "restartsCountTowardsMax": 1}
    assert KIND.next_status(jobset(status=current), mirror_with(theirs), now=NOW) is None


def test_a_terminal_state_once_shown_stays() -> None:
    current = {"terminalState": "Failed", "restarts": 1}
    theirs = {"restarts": 1, "replicatedJobsStatus": [replicated("workers", failed=1)]}
    status = KIND.next_status(jobset(status=current), mirror_with(theirs), now=NOW)
    assert status is not None and status["terminalState"] == "Failed"


def test_the_management_objects_suspend_decides_the_suspended_condition() -> None:
    paused = {"conditions": [true("Suspended", "SuspendedJobs", "jobset is suspended")]}
    # The mirror still says suspended, but this JobSet was resumed: it shows resumed.
    status = KIND.next_status(jobset(suspend=False), mirror_with(paused), now=NOW)
    assert status is not None
    (condition,) = status["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "ResumeJobs")
    # Suspended here, the mirror not yet: shows suspended.
    status = KIND.next_status(jobset(suspend=True), mirror_with({}), now=NOW)
    assert status is not None
    assert status["conditions"][0]["status"] == "True"


def test_finishing_conditions_are_copied_and_freeze_the_status() -> None:
    theirs = {
        "terminalState": "Completed",
        "conditions": [true("Completed", "AllJobsCompleted", "jobset completed successfully")],
    }
    status = KIND.next_status(jobset(suspend=True), mirror_with(theirs), now=NOW)
    assert status is not None
    # Finished: no Suspended condition is added, whatever the spec says.
    assert [c["type"] for c in status["conditions"]] == ["Completed"]
    finished = jobset(status=status)
    assert KIND.finish(finished) == Finish(
        True, "AllJobsCompleted", "jobset completed successfully"
    )
    assert KIND.next_status(finished, mirror_with({"restarts": 5}), now=NOW) is None


@pytest.mark.parametrize(
    ("conditions", "finish"),
    [
        ([], None),
        ([{"type": "Completed", "status": "False"}], None),
        ([true("Suspended")], None),
        ([true("Completed", "AllJobsCompleted")], Finish(True, "AllJobsCompleted", "")),
        ([true("Failed", "FailedJobs", "job failed")], Finish(False, "FailedJobs", "job failed")),
    ],
)
def test_finish(conditions: list[JsonObj], finish: Finish | None) -> None:
    obj = jobset(status={"conditions": conditions})
    assert KIND.finish(obj) == finish
    assert KIND.is_finished(obj) is (finish is not None)


def test_input_objects_are_not_mutated() -> None:
    obj = jobset(status={"replicatedJobsStatus": [replicated("workers", succeeded=1)]})
    mirror = mirror_with(
        {"replicatedJobsStatus": [replicated("workers", succeeded=2)], "conditions": []}
    )
    before = copy.deepcopy((obj, mirror))
    status = KIND.next_status(obj, mirror, now=NOW)
    assert status is not None
    status["replicatedJobsStatus"][0]["succeeded"] = 99
    assert (obj, mirror) == before


# -- statuses in any order: never backwards ---------------------------------------------


@st.composite
def mirror_histories(draw: st.DrawFn) -> list[JsonObj]:
    """The statuses a worker's JobSet controller writes: counters that grow, restarts that reset them."""
    restarts, counters = 0, {"succeeded": 0, "failed": 0}
    history: list[JsonObj] = []
    for step in draw(st.lists(st.sampled_from(["succeed", "fail", "restart"]), max_size=12)):
        if step == "restart":
            restarts, counters = restarts + 1, {"succeeded": 0, "failed": 0}
        else:
            field = "succeeded" if step == "succeed" else "failed"
            counters = {**counters, field: counters[field] + 1}
        history.append(
            {
                "restarts": restarts,
                "replicatedJobsStatus": [{"name": "workers", "active": 1, **counters}],
            }
        )
    if history and draw(st.booleans()):
        history.append(
            {
                **history[-1],
                "terminalState": "Completed",
                "conditions": [true("Completed", "AllJobsCompleted")],
            }
        )
    return history


def progress(status: JsonObj) -> tuple[int, int, int]:
    (workers,) = status.get("replicatedJobsStatus") or [{"succeeded": 0, "failed": 0}]
    return int(status.get("restarts") or 0), workers["succeeded"], workers["failed"]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(mirror_histories(), st.data())
def test_statuses_in_any_order_never_go_backwards(history: list[JsonObj], data: Any) -> None:
    deliveries = data.draw(
        st.lists(st.sampled_from(history), max_size=20) if history else st.just([])
    )
    obj = jobset()
    shown: list[tuple[int, int, int]] = [(0, 0, 0)]
    finished = False
    for theirs in [*deliveries, *history]:  # whatever came first, the latest arrives at last
        status = KIND.next_status(obj, mirror_with(copy.deepcopy(theirs)), now=NOW)
        if finished:
            assert status is None, "a finished JobSet's status changed"
            continue
        if status is None:
            continue
        obj = jobset(status=status)
        restarts, succeeded, failed = progress(status)
        before = shown[-1]
        assert restarts >= before[0]
        if restarts == before[0]:
            assert succeeded >= before[1] and failed >= before[2]
        shown.append((restarts, succeeded, failed))
        finished = KIND.is_finished(obj)
    if history:
        # Once the newest status has arrived, it is shown.
        assert progress(obj.get("status") or {}) == progress(history[-1])


# -- placement ---------------------------------------------------------------------------


def test_suspended_and_has_run() -> None:
    assert KIND.is_suspended(jobset(suspend=True))
    assert not KIND.is_suspended(jobset())
    assert not KIND.has_run(jobset())
    assert not KIND.has_run(jobset(status={"replicatedJobsStatus": [replicated("workers")]}))
    assert KIND.has_run(jobset(status={"restarts": 1}))
    assert KIND.has_run(jobset(status={"replicatedJobsStatus": [replicated("w", active=1)]}))
    assert KIND.has_run(jobset(status={"replicatedJobsStatus": [replicated("w", failed=1)]}))


@pytest.mark.parametrize(
    "status",
    [{}, {"replicatedJobsStatus": [{"name": "w", "active": 1, "ready": 1}]}, {"active": 1}],
)
def test_a_jobset_takes_the_generic_answer_on_running_pods(status: JsonObj) -> None:
    # Not the Job's gauges: the kinds' default (it cannot tell) until JobSet says.
    assert KIND.shows_running(jobset(status=status)) is False


def test_pod_sets() -> None:
    assert KIND.pod_sets(jobset()) == [
        PodSet("leader", 1, {"cpu": "1"}, {}),
        # 3 Jobs of min(parallelism 4, completions 2) pods each
        PodSet("workers", 6, {"nvidia.com/gpu": "1"}, {"pool": "gpu"}),
    ]
    assert KIND.pod_sets({"spec": {}}) == []


def test_a_later_run_carries_its_restarts_over() -> None:
    """Run 2 of a JobSet that restarted twice: fewer restarts remain, and its own add up."""
    earlier = jobset(status={"restarts": 2})
    body = KIND.build_mirror(earlier, controller_name="jobrelay.dev/relay", origin="hq", run=2)
    assert body["spec"]["failurePolicy"] == {"maxRestarts": 1}
    assert body["metadata"]["annotations"]["jobrelay.dev/run"] == "2"
    assert earlier["spec"]["failurePolicy"] == {"maxRestarts": 3}  # the input is not changed
    body["status"] = {"restarts": 1, "replicatedJobsStatus": [replicated("workers", active=3)]}
    status = KIND.next_status(earlier, body, now="2026-01-01T00:00:00Z")
    assert status is not None and status["restarts"] == 3
    # A first run carries nothing.
    first = KIND.build_mirror(jobset(), controller_name="jobrelay.dev/relay", origin="hq")
    assert "jobrelay.dev/carried-over" not in first["metadata"]["annotations"]
