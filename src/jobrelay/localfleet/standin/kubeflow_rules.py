"""Kubeflow's lifecycles (pure): Trainer v2.0.0's TrainJob (``Suspended``, ``Complete``
and ``Failed`` conditions, as ``pkg/controller/trainjob_controller.go`` and its JobSet
plugin write them), the training operator v1.9.0's PyTorchJob and the MPI operator
v0.7.0's MPIJob v2beta1 (``JobStatus``: ``Created``, ``Running``, ``Suspended``,
``Succeeded``, ``Failed`` conditions kept by their ``setCondition``, ``replicaStatuses``,
``startTime``, ``completionTime``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.trainjob import TRAINJOB_CONTROLLER
from jobrelay.localfleet.standin.lifecycle_rules import (
    FAILED,
    WAIT_FOR_A_CHANGE,
    LifecycleStep,
    Obj,
    Run,
    after,
    field,
    find,
    is_true,
    set_metav1_condition,
    with_changes,
)

TRAINER = TRAINJOB_CONTROLLER
TRAINING_OPERATOR = "kubeflow.org/training-operator"
MPI_OPERATOR = "kubeflow.org/mpi-operator"


# -- TrainJob ------------------------------------------------------------------------


def trainjob_step(run: Run) -> LifecycleStep:
    status = run.status
    conditions = status.get("conditions") or []
    if is_true(conditions, "Complete") or is_true(conditions, "Failed"):
        return WAIT_FOR_A_CHANGE  # isTrainJobFinished
    now = run.stamp
    if run.suspended:
        if is_true(conditions, "Suspended"):
            return WAIT_FOR_A_CHANGE
        new = set_metav1_condition(
            conditions, "Suspended", "True", "Suspended", "TrainJob is suspended", now
        )
        return LifecycleStep(with_changes(status, conditions=new))
    if is_true(conditions, "Suspended"):
        new = set_metav1_condition(
            conditions, "Suspended", "False", "Resumed", "TrainJob is resumed", now
        )
        return LifecycleStep(with_changes(status, conditions=new))
    # Running: the JobSet's jobs run; v2.0.0 writes nothing until its terminal condition.
    resumed = find(conditions, "Suspended")
    began = resumed.get("lastTransitionTime") if resumed else None
    remaining = run.run_seconds - run.seconds_since(began)
    if remaining > 0:
        return after(remaining)
    # JobSet.TerminalCondition: the JobSet's Completed or Failed condition, retyped.
    if run.outcome == FAILED:
        new = set_metav1_condition(
            conditions, "Failed", "True", "FailedJobs",
            "jobset failed due to one or more job failures", now,
        )  # fmt: skip
    else:
        new = set_metav1_condition(
            conditions, "Complete", "True", "AllJobsCompleted", "jobset completed successfully", now
        )
    return LifecycleStep(with_changes(status, conditions=new))


# -- Kubeflow JobStatus (PyTorchJob v1, MPIJob v2beta1) --------------------------------


@dataclass(frozen=True)
class JobWords:
    """What one operator writes in a JobStatus: its replica specs' field and the reason
    and message of each transition."""

    replica_specs: str
    created: tuple[str, str]
    running: tuple[str, str]
    succeeded: tuple[str, str]
    failed: tuple[str, str]
    suspended: tuple[str, str]
    suspended_running: tuple[str, str]  # the Running=False written on suspension
    resumed: tuple[str, str]
    # The MPI operator's filterOutCondition also sets a Failed condition False on success.
    success_clears_failed: bool
    # The MPI operator writes Running=False on every suspension; the training operator
    # only when it was running.
    suspension_always_writes_running: bool


def pytorch_words(run: Run) -> JobWords:
    name = run.name
    # PyTorchJob with a Master: "PyTorchJob %s is running." (the name alone).
    return JobWords(
        replica_specs="pytorchReplicaSpecs",
        created=("PyTorchJobCreated", f"PyTorchJob {name} is created."),
        running=("PyTorchJobRunning", f"PyTorchJob {name} is running."),
        succeeded=("PyTorchJobSucceeded", f"PyTorchJob {name} is successfully completed."),
        failed=(
            "PyTorchJobFailed",
            f"PyTorchJob {name} is failed because 1 Master replica(s) failed.",
        ),
        suspended=("PyTorchJobSuspended", f"PyTorchJob {name} is suspended."),
        suspended_running=("PyTorchJobSuspended", f"PyTorchJob {name} is suspended."),
        resumed=("PyTorchJobResumed", f"PyTorchJob {name} is resumed."),
        success_clears_failed=False,
        suspension_always_writes_running=False,
    )


def mpi_words(run: Run) -> JobWords:
    job = f"{run.namespace}/{run.name}"
    return JobWords(
        replica_specs="mpiReplicaSpecs",
        created=("MPIJobCreated", f"MPIJob {job} is created."),
        running=("MPIJobRunning", f"MPIJob {job} is running."),
        succeeded=("MPIJobSucceeded", f"MPIJob {job} successfully completed."),
        failed=("MPIJobFailed", f"MPIJob {job} has failed"),
        suspended=("MPIJobSuspended", "MPIJob suspended"),
        suspended_running=("MPIJobSuspended", f"MPIJob {job} is suspended."),
        resumed=("MPIJobResumed", "MPIJob resumed"),
        success_clears_failed=True,
        suspension_always_writes_running=True,
    )


def set_job_condition(
    conditions: Sequence[Mapping[str, Any]],
    kind: str,
    status: str,
    words: tuple[str, str],
    now: str,
    *,
    success_clears_failed: bool = False,
) -> list[Obj]:
    """The operators' ``setCondition``: unchanged when status and reason are; the
    transition time kept while the status is; the condition moved to the end; Running and
    Restarting exclusive; Running set False when the job succeeds or fails."""
    reason, message = words
    current = find(conditions, kind)
    if current is not None and current.get("status") == status and current.get("reason") == reason:
        return [dict(c) for c in conditions]
    transition = now
    if current is not None and current.get("status") == status:
        transition = current.get("lastTransitionTime") or now
    kept: list[Obj] = []
    for condition in conditions:
        other = condition.get("type")
        if other == kind or {kind, other} == {"Running", "Restarting"}:
            continue
        copy = dict(condition)
        ending = kind in ("Succeeded", "Failed")
        if ending and (other == "Running" or (success_clears_failed and other == "Failed")):
            copy["status"] = "False"
        kept.append(copy)
    kept.append(
        {"type": kind, "status": status, "reason": reason, "message": message,
         "lastUpdateTime": now, "lastTransitionTime": transition}
    )  # fmt: skip
    return kept


def _replica_types(run: Run, words: JobWords) -> list[tuple[str, int]]:
    specs = field(run.obj, ("spec", words.replica_specs)) or {}
    found = []
    for kind, spec in specs.items():
        replicas = (spec or {}).get("replicas")
        found.append((kind, replicas if isinstance(replicas, int) else 1))
    return sorted(found)


def _replica_statuses(run: Run, words: JobWords, phase: str) -> Obj:
    """Per replica type: all active while running, none while suspended; at the end the
    first (Launcher, Master) type succeeded or failed once, the others succeeded."""
    statuses: Obj = {}
    for index, (kind, replicas) in enumerate(_replica_types(run, words)):
        if phase == "running":
            statuses[kind] = {"active": replicas} if replicas else {}
        elif phase == "failed" and index == 0:
            statuses[kind] = {"failed": 1}
        elif phase in ("succeeded", "failed"):
            statuses[kind] = {"succeeded": replicas} if replicas else {}
        else:
            statuses[kind] = {}
    return statuses


def kubeflow_job_step(run: Run, words: JobWords) -> LifecycleStep:
    status = run.status
    conditions = status.get("conditions") or []
    now = run.stamp
    if is_true(conditions, "Succeeded") or is_true(conditions, "Failed"):
        return WAIT_FOR_A_CHANGE
    if not conditions:
        created = set_job_condition([], "Created", "True", words.created, now)
        return LifecycleStep(
            with_changes(
                status, conditions=created, replicaStatuses=_replica_statuses(run, words, "")
            )
        )
    if run.suspended:
        if is_true(conditions, "Suspended") and not is_true(conditions, "Running"):
            return WAIT_FOR_A_CHANGE
        new = [dict(c) for c in conditions]
        if words.suspension_always_writes_running or is_true(conditions, "Running"):
            new = set_job_condition(new, "Running", "False", words.suspended_running, now)
        new = set_job_condition(new, "Suspended", "True", words.suspended, now)
        return LifecycleStep(
            with_changes(status, conditions=new, replicaStatuses=_replica_statuses(run, words, ""))
        )
    if is_true(conditions, "Suspended"):
        new = set_job_condition(conditions, "Suspended", "False", words.resumed, now)
        return LifecycleStep(with_changes(status, conditions=new, startTime=now))
    if not is_true(conditions, "Running"):
        new = set_job_condition(conditions, "Running", "True", words.running, now)
        return LifecycleStep(
            with_changes(
                status,
                conditions=new,
                startTime=status.get("startTime") or now,
                replicaStatuses=_replica_statuses(run, words, "running"),
            )
        )
    remaining = run.run_seconds - run.seconds_since(status.get("startTime"))
    if remaining > 0:
        return after(remaining)
    ending, phase = ("Failed", "failed") if run.outcome == FAILED else ("Succeeded", "succeeded")
    new = set_job_condition(
        conditions, ending, "True", words.failed if phase == "failed" else words.succeeded, now,
        success_clears_failed=words.success_clears_failed,
    )  # fmt: skip
    return LifecycleStep(
        with_changes(
            status,
            conditions=new,
            completionTime=now,
            replicaStatuses=_replica_statuses(run, words, phase),
        )
    )


def pytorchjob_step(run: Run) -> LifecycleStep:
    return kubeflow_job_step(run, pytorch_words(run))


def mpijob_step(run: Run) -> LifecycleStep:
    return kubeflow_job_step(run, mpi_words(run))
