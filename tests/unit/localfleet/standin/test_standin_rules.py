"""The stand-in operators' decisions: whose objects they drive, and each kind's lifecycle
walked step by step (with the clock moved as a rule asks), as the upstream controllers
write it."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.ecosystem import BY_KIND, manifest

from jobrelay.localfleet.standin.kubeflow_rules import set_job_condition
from jobrelay.localfleet.standin.lifecycle_rules import (
    DEFAULT_RUN_SECONDS,
    WAIT_FOR_A_CHANGE,
    run_seconds_of,
    set_metav1_condition,
)
from jobrelay.localfleet.standin.standin_rules import KINDS, StandinKind, next_step

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
Obj = dict[str, Any]


def created(kind: str, **kwargs: Any) -> Obj:
    obj = manifest(kind, "job", **kwargs)
    obj["metadata"].update(
        namespace="team-a", uid="u1", generation=1, creationTimestamp="2026-01-01T12:00:00Z"
    )
    return obj


class Walk:
    """An object and a clock; each ``settle`` applies steps until the rule waits."""

    def __init__(self, kind: str, obj: Obj) -> None:
        self.kind: StandinKind = BY_KIND[kind]
        self.obj = obj
        self.now = T0
        self.history: list[Obj] = []

    def settle(self, *, wait: bool = True, limit: int = 20) -> Obj:
        for _ in range(limit):
            step = next_step(self.kind, self.obj, self.now)
            if step.status is not None and step.status != (self.obj.get("status") or {}):
                self.obj = {**self.obj, "status": step.status}
                self.history.append(copy.deepcopy(step.status))
                continue
            if wait and step.recheck_after is not None:
                self.now += datetime.timedelta(seconds=step.recheck_after)
                continue
            return self.obj.get("status") or {}
        raise AssertionError(f"no settled state after {limit} steps: {self.history[-3:]}")

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)

    def suspend(self, value: bool) -> None:
        into = self.obj
        for key in self.kind.fields_at:
            into = into.setdefault(key, {})
        into["suspend"] = value


def true_conditions(status: Obj) -> set[str]:
    return {c["type"] for c in status.get("conditions") or [] if c["status"] == "True"}


# -- whose objects ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.resource.kind)
@pytest.mark.parametrize(
    ("value", "ours"),
    [(None, True), ("", True), ("own", True), ("kueue.x-k8s.io/multikueue", False),
     ("jobrelay.dev/jobrelay", False)],
)  # fmt: skip
def test_only_objects_without_managed_by_or_with_its_own_are_driven(
    kind: StandinKind, value: str | None, ours: bool
) -> None:
    managed_by = kind.own_manager if value == "own" else value
    obj = created(kind.resource.kind, managed_by=managed_by)
    assert kind.is_ours(obj) is ours
    # Ours: a status to write or a time to look again (a running TrainJob writes nothing).
    assert (next_step(kind, obj, T0) != WAIT_FOR_A_CHANGE) is ours


def test_an_object_being_deleted_is_left_alone() -> None:
    obj = created("PyTorchJob")
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:01Z"
    assert next_step(BY_KIND["PyTorchJob"], obj, T0).status is None


@pytest.mark.parametrize(
    ("annotation", "seconds"),
    [(None, DEFAULT_RUN_SECONDS), ("7", 7.0), ("0.5", 0.5), ("-1", DEFAULT_RUN_SECONDS),
     ("soon", DEFAULT_RUN_SECONDS), ("1e9", DEFAULT_RUN_SECONDS)],
)  # fmt: skip
def test_run_seconds_are_read_from_the_annotation(annotation: str | None, seconds: float) -> None:
    annotations = {} if annotation is None else {"standin.jobrelay.dev/run-seconds": annotation}
    assert run_seconds_of(annotations) == seconds


# -- lifecycles ------------------------------------------------------------------------


def test_rayjob_initializes_runs_and_completes() -> None:
    walk = Walk("RayJob", created("RayJob", run_seconds=5))
    walk.settle(wait=False)
    status = walk.obj["status"]
    assert [s["jobDeploymentStatus"] for s in walk.history] == ["Initializing", "Running"]
    assert status["jobStatus"] == "RUNNING" and status["startTime"] == "2026-01-01T12:00:00Z"
    assert status["rayClusterName"] and status["jobId"]
    assert status["rayClusterStatus"]["state"] == "ready"
    status = walk.settle()
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert (status["succeeded"], status["failed"]) == (1, 0)
    assert "reason" not in status and status["endTime"] >= "2026-01-01T12:00:05Z"


def test_rayjob_that_fails_ends_failed_with_app_failed() -> None:
    walk = Walk("RayJob", created("RayJob", outcome="Failed"))
    status = walk.settle()
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Failed", "FAILED")
    assert status["reason"] == "AppFailed" and status["failed"] == 1


def test_rayjob_suspends_resets_and_starts_again_when_resumed() -> None:
    walk = Walk("RayJob", created("RayJob", run_seconds=10))
    walk.settle(wait=False)
    walk.advance(4)
    walk.suspend(True)
    status = walk.settle()
    assert [s["jobDeploymentStatus"] for s in walk.history[-2:]] == ["Suspending", "Suspended"]
    for reset in ("jobId", "rayClusterName", "dashboardURL", "jobStatus", "rayClusterStatus"):
        assert reset not in status, status
    walk.advance(60)  # suspended: never finishes
    assert walk.settle()["jobDeploymentStatus"] == "Suspended"
    walk.suspend(False)
    status = walk.settle(wait=False)
    assert status["jobDeploymentStatus"] == "Running"
    assert status["startTime"] == "2026-01-01T12:01:04Z"  # a new run, a new start
    assert walk.settle()["jobDeploymentStatus"] == "Complete"


def test_rayjob_created_suspended_goes_to_suspended_through_initializing() -> None:
    walk = Walk("RayJob", created("RayJob", suspend=True))
    assert walk.settle()["jobDeploymentStatus"] == "Suspended"
    assert [s["jobDeploymentStatus"] for s in walk.history] == [
        "Initializing", "Suspending", "Suspended",
    ]  # fmt: skip


def test_raycluster_becomes_ready_and_stays() -> None:
    walk = Walk("RayCluster", created("RayCluster"))
    status = walk.settle()
    assert status["state"] == "ready"
    assert true_conditions(status) == {"HeadPodReady", "RayClusterProvisioned"}
    assert status["desiredWorkerReplicas"] == 2 == status["readyWorkerReplicas"]
    assert (status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (0, 4)
    provisioning = walk.history[0]
    assert provisioning["conditions"][1]["reason"] == "RayClusterPodsProvisioning"
    walk.advance(3600)
    assert walk.settle() == status


def test_raycluster_suspends_and_is_provisioned_again() -> None:
    walk = Walk("RayCluster", created("RayCluster"))
    walk.settle()
    walk.suspend(True)
    status = walk.settle()
    assert status["state"] == "suspended"
    assert true_conditions(status) == {"RayClusterSuspended"}
    walk.suspend(False)
    status = walk.settle()
    assert status["state"] == "ready"
    assert true_conditions(status) == {"HeadPodReady", "RayClusterProvisioned"}


@pytest.mark.parametrize(("outcome", "ending", "reason"), [
    ("Succeeded", "Complete", "AllJobsCompleted"), ("Failed", "Failed", "FailedJobs"),
])  # fmt: skip
def test_trainjob_writes_nothing_while_running_then_its_terminal_condition(
    outcome: str, ending: str, reason: str
) -> None:
    walk = Walk("TrainJob", created("TrainJob", outcome=outcome, run_seconds=5))
    assert walk.settle(wait=False) == {}
    status = walk.settle()
    assert true_conditions(status) == {ending}
    assert status["conditions"][0]["reason"] == reason
    assert walk.now >= T0 + datetime.timedelta(seconds=5)


def test_trainjob_suspended_then_resumed_runs_its_full_time_again() -> None:
    walk = Walk("TrainJob", created("TrainJob", run_seconds=5))
    walk.advance(4)
    walk.suspend(True)
    status = walk.settle()
    assert status["conditions"] == [
        {"type": "Suspended", "status": "True", "reason": "Suspended",
         "message": "TrainJob is suspended", "lastTransitionTime": "2026-01-01T12:00:04Z"},
    ]  # fmt: skip
    walk.advance(10)
    walk.suspend(False)
    walk.settle(wait=False)
    resumed = walk.obj["status"]["conditions"][0]
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed")
    walk.advance(4)
    assert walk.settle(wait=False)["conditions"] == [resumed]  # 4 s of 5: still running
    assert "Complete" in true_conditions(walk.settle())


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])
@pytest.mark.parametrize("outcome", ["Succeeded", "Failed"])
def test_kubeflow_jobs_are_created_run_and_end(kind: str, outcome: str) -> None:
    walk = Walk(kind, created(kind, outcome=outcome))
    status = walk.settle()
    assert [sorted(true_conditions(s)) for s in walk.history] == [
        ["Created"], ["Created", "Running"], ["Created", outcome],
    ]  # fmt: skip
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", outcome]
    running = status["conditions"][1]
    assert running["status"] == "False" and running["reason"].endswith("Running")
    prefix = "PyTorchJob" if kind == "PyTorchJob" else "MPIJob"
    assert status["conditions"][2]["reason"] == f"{prefix}{outcome}"
    assert status["startTime"] and status["completionTime"]
    first = "Launcher" if kind == "MPIJob" else "Master"
    counted = "failed" if outcome == "Failed" else "succeeded"
    assert status["replicaStatuses"][first] == {counted: 1}


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob"])
def test_kubeflow_jobs_suspend_and_resume_with_a_new_start_time(kind: str) -> None:
    walk = Walk(kind, created(kind, run_seconds=10))
    walk.settle(wait=False)
    walk.advance(5)
    walk.suspend(True)
    status = walk.settle()
    assert true_conditions(status) == {"Created", "Suspended"}
    running = next(c for c in status["conditions"] if c["type"] == "Running")
    assert running["reason"] == f"{kind}Suspended"
    walk.advance(30)
    walk.suspend(False)
    status = walk.settle(wait=False)
    assert true_conditions(status) == {"Created", "Running"}
    suspended = next(c for c in status["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", f"{kind}Resumed")
    assert status["startTime"] == "2026-01-01T12:00:35Z"
    assert "Succeeded" in true_conditions(walk.settle())


def test_a_pytorchjob_created_suspended_gets_no_running_condition_an_mpijob_does() -> None:
    pytorch = Walk("PyTorchJob", created("PyTorchJob", suspend=True)).settle()
    assert [c["type"] for c in pytorch["conditions"]] == ["Created", "Suspended"]
    mpi = Walk("MPIJob", created("MPIJob", suspend=True)).settle()
    assert [c["type"] for c in mpi["conditions"]] == ["Created", "Running", "Suspended"]


# -- the condition helpers -------------------------------------------------------------


def test_set_metav1_condition_keeps_the_transition_time_while_the_status_holds() -> None:
    first = set_metav1_condition([], "Ready", "True", "A", "", "t1")
    again = set_metav1_condition(first, "Ready", "True", "B", "m", "t2")
    assert again == [{"type": "Ready", "status": "True", "reason": "B", "message": "m",
                      "lastTransitionTime": "t1"}]  # fmt: skip
    flipped = set_metav1_condition(again, "Ready", "False", "C", "", "t3")
    assert flipped[0]["lastTransitionTime"] == "t3"


def test_set_job_condition_moves_it_last_and_ends_running() -> None:
    words = ("R", "m")
    conditions = set_job_condition([], "Created", "True", words, "t1")
    conditions = set_job_condition(conditions, "Running", "True", words, "t2")
    conditions = set_job_condition(conditions, "Succeeded", "True", words, "t3")
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("Created", "True"), ("Running", "False"), ("Succeeded", "True"),
    ]  # fmt: skip
    same = set_job_condition(conditions, "Succeeded", "True", words, "t4")
    assert same == conditions


# -- properties ------------------------------------------------------------------------

Action = tuple[str, float]
ACTIONS = st.lists(
    st.tuples(st.sampled_from(["suspend", "resume", "wait"]), st.floats(0, 20)), max_size=12
)


@given(
    kind=st.sampled_from([k.resource.kind for k in KINDS]),
    outcome=st.sampled_from(["Succeeded", "Failed"]),
    actions=ACTIONS,
)
def test_any_sequence_of_suspensions_and_waits_settles_and_a_finished_run_stays_finished(
    kind: str, outcome: str, actions: list[Action]
) -> None:
    walk = Walk(kind, created(kind, outcome=outcome, run_seconds=5))
    finished: Obj | None = None
    for action, seconds in actions:
        if action == "wait":
            walk.advance(seconds)
        else:
            walk.suspend(action == "suspend")
        status = walk.settle(wait=False)
        if finished is not None:
            assert status == finished, "a finished run changed"
        elif _finished(kind, status):
            finished = status
    walk.suspend(False)
    status = walk.settle()
    assert kind == "RayCluster" or _finished(kind, status) or finished is not None


@given(kind=st.sampled_from([k.resource.kind for k in KINDS]), actions=ACTIONS)
def test_another_controllers_object_is_never_written(kind: str, actions: list[Action]) -> None:
    walk = Walk(kind, created(kind, managed_by="kueue.x-k8s.io/multikueue"))
    for action, seconds in actions:
        walk.advance(seconds)
        walk.suspend(action == "suspend")
        walk.settle()
    assert walk.history == [] and "status" not in walk.obj


def _finished(kind: str, status: Obj) -> bool:
    if kind == "RayJob":
        return status.get("jobDeploymentStatus") in ("Complete", "Failed")
    if kind == "RayCluster":
        return False
    ends = {"TrainJob": ("Complete", "Failed")}.get(kind, ("Succeeded", "Failed"))
    return bool(true_conditions(status) & set(ends))
