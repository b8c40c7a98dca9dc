"""KubeRay's RayJob and RayCluster lifecycles as ray-operator v1.5.0 writes them (pure):
``controllers/ray/rayjob_controller.go`` (JobDeploymentStatus ``Initializing``,
``Running``, ``Complete`` / ``Failed``, ``Suspending``, ``Suspended`` and back to new) and
``raycluster_controller.go`` (``state``, the ``HeadPodReady``, ``RayClusterProvisioned``,
``RayClusterSuspending`` and ``RayClusterSuspended`` conditions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobrelay.kinds.ray import KUBERAY_OPERATOR
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

RAY_OPERATOR = KUBERAY_OPERATOR


# -- RayJob --------------------------------------------------------------------------


def standin_cluster_name(run: Run) -> str:
    # utils.GenerateRayClusterName: the job's name and a random suffix.
    return f"{run.name}-standin"


def _ray_cluster_status(run: Run) -> Obj:
    """What a RayJob copies of its ready RayCluster (``Status.RayClusterStatus``)."""
    cluster_spec = field(run.obj, ("spec", "rayClusterSpec")) or {}
    return ready_cluster_status(run, cluster_spec, {})


def _counter(status: Mapping[str, Any], name: str) -> int:
    value = status.get(name)
    return value if isinstance(value, int) else 0


def rayjob_step(run: Run) -> LifecycleStep:
    status = run.status
    deployment = status.get("jobDeploymentStatus") or ""
    if deployment == "":
        # initRayJobStatusIfNeed: a job id, a cluster name and the start time, Initializing.
        return LifecycleStep(
            with_changes(
                status,
                jobId=field(run.obj, ("spec", "jobId")) or f"{run.name}-standin",
                rayClusterName=standin_cluster_name(run),
                jobStatus="",
                jobDeploymentStatus="Initializing",
                startTime=run.stamp,
                endTime=None,
                succeeded=_counter(status, "succeeded"),
                failed=_counter(status, "failed"),
            )
        )
    if deployment in ("Initializing", "Running") and run.suspended:
        # updateStatusToSuspendingIfNeeded: only from Initializing and Running.
        return LifecycleStep(with_changes(status, jobDeploymentStatus="Suspending"))
    if deployment == "Initializing":
        return LifecycleStep(
            with_changes(
                status,
                dashboardURL=f"{standin_cluster_name(run)}-head-svc.{run.namespace}.svc:8265",
                jobDeploymentStatus="Running",
                jobStatus="RUNNING",
                rayJobInfo={"startTime": run.stamp},
                rayClusterStatus=_ray_cluster_status(run),
            )
        )
    if deployment == "Running":
        remaining = run.run_seconds - run.seconds_since(status.get("startTime"))
        if remaining > 0:
            return after(remaining)
        failed = run.outcome == FAILED
        return LifecycleStep(
            with_changes(
                status,
                jobStatus="FAILED" if failed else "SUCCEEDED",
                jobDeploymentStatus="Failed" if failed else "Complete",
                reason="AppFailed" if failed else None,
                message=(
                    "Job entrypoint command failed with exit code 1"
                    if failed
                    else "Job finished successfully."
                ),
                rayJobInfo={**(status.get("rayJobInfo") or {}), "endTime": run.stamp},
                endTime=run.stamp,
                succeeded=_counter(status, "succeeded") + (0 if failed else 1),
                failed=_counter(status, "failed") + (1 if failed else 0),
            )
        )
    if deployment == "Suspending":
        # The cluster and the submitter deleted: everything of the run reset, Suspended.
        return LifecycleStep(
            with_changes(
                status,
                rayClusterStatus=None,
                rayClusterName=None,
                dashboardURL=None,
                jobId=None,
                message=None,
                reason=None,
                rayJobInfo=None,
                jobStatus=None,
                jobDeploymentStatus="Suspended",
            )
        )
    if deployment == "Suspended" and not run.suspended:
        return LifecycleStep(with_changes(status, jobStatus=None, jobDeploymentStatus=None))
    return WAIT_FOR_A_CHANGE  # Complete, Failed, Suspended while suspended


# -- RayCluster ----------------------------------------------------------------------


def _worker_replicas(cluster_spec: Mapping[str, Any], key: str, fallback: str) -> int:
    """Sum of ``replicas * numOfHosts`` (or min/max) over the worker groups, as
    utils.CalculateDesiredReplicas and friends count."""
    total = 0
    for group in cluster_spec.get("workerGroupSpecs") or []:
        value = group.get(key, group.get(fallback, 0))
        hosts = group.get("numOfHosts") or 1
        if isinstance(value, int) and isinstance(hosts, int):
            total += value * hosts
    return total


def ready_cluster_status(
    run: Run, cluster_spec: Mapping[str, Any], status: Mapping[str, Any]
) -> Obj:
    """The ``state: ready`` part of a RayCluster's status, every pod running."""
    desired = _worker_replicas(cluster_spec, "replicas", "minReplicas")
    transitions = dict(status.get("stateTransitionTimes") or {})
    if status.get("state") != "ready":
        transitions["ready"] = run.stamp
    name = run.name
    return with_changes(
        status,
        state="ready",
        reason=None,
        readyWorkerReplicas=desired,
        availableWorkerReplicas=desired,
        desiredWorkerReplicas=desired,
        minWorkerReplicas=_worker_replicas(cluster_spec, "minReplicas", "replicas"),
        maxWorkerReplicas=_worker_replicas(cluster_spec, "maxReplicas", "replicas"),
        head={
            "podIP": "10.0.0.10",
            "podName": f"{name}-head-standin",
            "serviceIP": "10.0.0.11",
            "serviceName": f"{name}-head-svc",
        },
        endpoints={"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080"},
        stateTransitionTimes=transitions,
        lastUpdateTime=run.stamp,
    )


def raycluster_step(run: Run) -> LifecycleStep:
    status = run.status
    spec = run.obj.get("spec") or {}
    conditions = status.get("conditions") or []
    now = run.stamp
    generation = run.obj["metadata"].get("generation")
    if run.suspended:
        if is_true(conditions, "RayClusterSuspended"):
            return WAIT_FOR_A_CHANGE
        if not is_true(conditions, "RayClusterSuspending"):
            suspending = set_metav1_condition(
                conditions, "RayClusterSuspending", "True", "RayClusterSuspending", "", now
            )
            return LifecycleStep(with_changes(status, conditions=suspending, lastUpdateTime=now))
        # Every pod deleted: Suspended, no longer provisioned, the head gone.
        new = set_metav1_condition(
            conditions, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
            "RayCluster has been suspended", now,
        )  # fmt: skip
        new = set_metav1_condition(
            new, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found", now
        )
        new = set_metav1_condition(
            new, "RayClusterSuspending", "False", "RayClusterSuspending", "", now
        )
        new = set_metav1_condition(
            new, "RayClusterSuspended", "True", "RayClusterSuspended", "", now
        )
        transitions = {**(status.get("stateTransitionTimes") or {}), "suspended": now}
        return LifecycleStep(
            with_changes(
                status,
                conditions=new,
                state="suspended",
                readyWorkerReplicas=None,
                availableWorkerReplicas=None,
                head=None,
                stateTransitionTimes=transitions,
                observedGeneration=generation,
                lastUpdateTime=now,
            )
        )
    if is_true(conditions, "RayClusterSuspended"):
        resumed = set_metav1_condition(
            conditions, "RayClusterSuspended", "False", "RayClusterSuspended", "", now
        )
        return LifecycleStep(with_changes(status, conditions=resumed, lastUpdateTime=now))
    if find(conditions, "RayClusterProvisioned") is None:
        # First reconcile: no head pod yet, the pods being provisioned.
        new = set_metav1_condition(
            conditions, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found", now
        )
        new = set_metav1_condition(
            new, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
            "RayCluster Pods are being provisioned for first time", now,
        )  # fmt: skip
        new = set_metav1_condition(
            new, "RayClusterSuspended", "False", "RayClusterSuspended", "", now
        )
        new = set_metav1_condition(
            new, "RayClusterSuspending", "False", "RayClusterSuspending", "", now
        )
        return LifecycleStep(
            with_changes(
                status,
                conditions=new,
                desiredWorkerReplicas=_worker_replicas(spec, "replicas", "minReplicas"),
                observedGeneration=generation,
                lastUpdateTime=now,
            )
        )
    if status.get("state") != "ready" or not is_true(conditions, "RayClusterProvisioned"):
        new = set_metav1_condition(
            conditions, "HeadPodReady", "True", "HeadPodRunningAndReady", "", now
        )
        new = set_metav1_condition(
            new, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
            "All Ray Pods are ready for the first time", now,
        )  # fmt: skip
        new = set_metav1_condition(
            new, "RayClusterSuspending", "False", "RayClusterSuspending", "", now
        )
        ready = ready_cluster_status(run, spec, status)
        return LifecycleStep(with_changes(ready, conditions=new, observedGeneration=generation))
    return WAIT_FOR_A_CHANGE  # ready, and it stays ready
