"""What the real operators make from an object they run, as the stand-ins make it (pure):
the pods (KWOK runs them; each prints the fleet's simulated log), and the objects that
make pods in turn, with the operators' own names, labels and controller references, so
that whoever reads a workload's pods finds them as on a real cluster.

- RayCluster (ray-operator ``common/pod.go``): a head pod and each worker group's
  ``replicas`` x ``numOfHosts`` pods, labelled ``ray.io/cluster`` and the rest,
  controlled by the RayCluster; they run until it goes.
- RayJob (``rayjob_controller.go``): while it initializes or runs, a RayCluster named
  in its status (the RayJob's labels and annotations copied, its ``rayClusterSpec``)
  and, once running in ``K8sJobMode``, the submitter Job named as itself; both
  controlled by the RayJob, deleted when it is suspended.
- PyTorchJob (training-operator v1): ``<name>-<type>-<index>`` pods per replica
  type, labelled with the job's name, the replica type and index (and the master's
  ``job-role``), controlled by the PyTorchJob.
- MPIJob v2beta1 (mpi-operator): ``<name>-worker-<index>`` pods controlled by it, and
  the launcher Job ``<name>-launcher`` (controlled by it) whose pod the Job makes.
- TrainJob (Trainer v2): a JobSet named as itself, controlled by it, of
  ``trainer.numNodes`` pods (the JobSet controller makes its Jobs).

Job-like pods run for the object's run seconds and end as its outcome says (the
stand-in's annotations, lifecycle_rules.py); a suspended object's are deleted.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kinds.kubeflow import (
    JOB_ROLE_LABEL,
    KUBEFLOW_JOB_NAME_LABEL,
    MPI_LAUNCHER_SUFFIX,
    MPI_OPERATOR_NAME,
    OPERATOR_NAME_LABEL,
    PYTORCH_OPERATOR_NAME,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    MPIJobKind,
    PyTorchJobKind,
)
from jobrelay.kinds.ray import (
    CREATED_BY_LABEL,
    HEAD_GROUP,
    HEAD_NODE,
    KUBERAY_APP,
    KUBERAY_APP_LABEL,
    KUBERAY_COMPONENT,
    ORIGINATED_FROM_KIND_LABEL,
    ORIGINATED_FROM_NAME_LABEL,
    RAY_CLUSTER_LABEL,
    RAY_GROUP_LABEL,
    RAY_ID_LABEL,
    RAY_NODE_LABEL,
    RAY_NODE_TYPE_LABEL,
    SUBMISSION_MODE_LABEL,
    WORKER_NODE,
    RayClusterKind,
    RayJobKind,
    ray_cluster_name,
)
from jobrelay.kinds.trainjob import TRAINJOB_ANCESTOR_LABEL, TrainJobKind
from jobrelay.localfleet.standin.lifecycle_rules import FAILED, Obj, Run, field, is_true
from jobrelay.localfleet.standin.ray_rules import standin_cluster_name
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "POD",
    "Child",
    "Children",
    "MakeChildren",
    "mpijob_children",
    "pytorchjob_children",
    "raycluster_children",
    "rayjob_children",
    "trainjob_children",
]

POD = Resource("", "v1", "pods", "Pod")
# How a simulated pod runs (the fleet's KWOK stages, kwok-stages.yaml).
DURATION_ANNOTATION = "fleet.jobrelay.dev/duration"
OUTCOME_ANNOTATION = "fleet.jobrelay.dev/outcome"
# KubeRay's default submitter container (common/job.go).
SUBMITTER_CONTAINER = {
    "name": "ray-job-submitter",
    "image": "rayproject/ray:2.46.0",
    "resources": {"requests": {"cpu": "500m", "memory": "200Mi"},
                  "limits": {"cpu": "1", "memory": "1Gi"}},
}  # fmt: skip
SUBMITTER_BACKOFF_LIMIT = 2
K8S_JOB_MODE = "K8sJobMode"


@dataclass(frozen=True)
class Child:
    """An object an operator makes from the one it runs: where, and all of it."""

    resource: Resource
    body: Obj

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


@dataclass(frozen=True)
class Children:
    """What should exist now (``wanted``: made when missing) and what should not
    (``unwanted``: (resource, name) deleted when there)."""

    wanted: tuple[Child, ...] = ()
    unwanted: tuple[tuple[Resource, str], ...] = ()


MakeChildren = Callable[[Run], Children]


def _controller(run: Run, ref: Resource) -> Obj:
    meta = run.obj["metadata"]
    return {"apiVersion": ref.api_version, "kind": ref.kind, "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _runs_as_its_object(run: Run) -> dict[str, str]:
    """A job-like pod's fate: as long as the object runs, ending as its outcome says."""
    return {
        DURATION_ANNOTATION: f"{int(run.run_seconds * 1000)}ms",
        OUTCOME_ANNOTATION: "fail" if run.outcome == FAILED else "succeed",
    }


_RUNS_UNTIL_DELETED = {OUTCOME_ANNOTATION: "run-forever"}


def _meta_of(template: object) -> Mapping[str, Any]:
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _pod(
    run: Run,
    ref: Resource,
    name: str,
    template: object,
    labels: Mapping[str, str],
    fate: Mapping[str, str],
    restart_policy: str | None = None,
) -> Child:
    """A pod of ``template`` controlled by ``run``'s object (of ``ref``): the operator's
    ``labels`` over the template's; the template's own fate annotations win."""
    meta = _meta_of(template)
    spec = copy.deepcopy(template.get("spec") if isinstance(template, Mapping) else None) or {}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return Child(POD, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": run.namespace,
            "labels": {**(meta.get("labels") or {}), **labels},
            "annotations": {**fate, **(meta.get("annotations") or {})},
            "ownerReferences": [_controller(run, ref)],
        },
        "spec": spec,
    })  # fmt: skip


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# -- KubeRay ----------------------------------------------------------------------------


def _ray_labels(cluster: str, node_type: str, group: str) -> dict[str, str]:
    return {
        RAY_NODE_LABEL: "yes", RAY_CLUSTER_LABEL: cluster, RAY_NODE_TYPE_LABEL: node_type,
        RAY_GROUP_LABEL: group, RAY_ID_LABEL: f"{cluster}-{node_type}",
        KUBERAY_APP_LABEL: KUBERAY_APP, CREATED_BY_LABEL: KUBERAY_COMPONENT,
    }  # fmt: skip


def raycluster_children(run: Run) -> Children:
    spec = run.obj.get("spec") or {}
    name = run.name
    head = spec.get("headGroupSpec") or {}
    pods = [
        _pod(run, RayClusterKind.ref, f"{name}-head", head.get("template"),
             _ray_labels(name, HEAD_NODE, HEAD_GROUP), _RUNS_UNTIL_DELETED)
    ]  # fmt: skip
    for group in spec.get("workerGroupSpecs") or []:
        if not isinstance(group, Mapping) or group.get("suspend"):
            continue
        group_name = str(group.get("groupName") or "workers")
        replicas = _count(group.get("replicas"), _count(group.get("minReplicas"), 0))
        count = replicas * _count(group.get("numOfHosts"), 1)
        pods += [
            _pod(run, RayClusterKind.ref, f"{name}-{group_name}-worker-{index}",
                 group.get("template"), _ray_labels(name, WORKER_NODE, group_name),
                 _RUNS_UNTIL_DELETED)
            for index in range(count)
        ]  # fmt: skip
    if run.suspended:
        return Children(unwanted=tuple((POD, pod.name) for pod in pods))
    return Children(wanted=tuple(pods))


def _originated(run: Run) -> dict[str, str]:
    return {ORIGINATED_FROM_NAME_LABEL: run.name, ORIGINATED_FROM_KIND_LABEL: RayJobKind.ref.kind}


def _ray_cluster(run: Run, cluster: str) -> Child:
    meta = run.obj["metadata"]
    labels = {**(meta.get("labels") or {}), **_originated(run),
              SUBMISSION_MODE_LABEL: str(field(run.obj, ("spec", "submissionMode"))
                                         or K8S_JOB_MODE)}  # fmt: skip
    return Child(RayClusterKind.ref, {
        "apiVersion": RayClusterKind.ref.api_version, "kind": RayClusterKind.ref.kind,
        "metadata": {"name": cluster, "namespace": run.namespace, "labels": labels,
                     "annotations": dict(meta.get("annotations") or {}),
                     "ownerReferences": [_controller(run, RayJobKind.ref)]},
        "spec": copy.deepcopy(field(run.obj, ("spec", "rayClusterSpec")) or {}),
    })  # fmt: skip


def _submitter(run: Run) -> Child:
    labels = {**_originated(run), CREATED_BY_LABEL: KUBERAY_COMPONENT}
    template = copy.deepcopy(field(run.obj, ("spec", "submitterPodTemplate"))) or {
        "spec": {"containers": [copy.deepcopy(SUBMITTER_CONTAINER)]}
    }
    template.setdefault("metadata", {})
    template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), **labels}
    template["metadata"]["annotations"] = {
        **_runs_as_its_object(run),
        **(template["metadata"].get("annotations") or {}),
    }
    template.setdefault("spec", {})["restartPolicy"] = "Never"
    return Child(JobKind.ref, {
        "apiVersion": JobKind.ref.api_version, "kind": JobKind.ref.kind,
        "metadata": {"name": run.name, "namespace": run.namespace, "labels": labels,
                     "ownerReferences": [_controller(run, RayJobKind.ref)]},
        "spec": {"backoffLimit": SUBMITTER_BACKOFF_LIMIT, "template": template},
    })  # fmt: skip


def rayjob_children(run: Run) -> Children:
    cluster_name = standin_cluster_name(run)  # what the status names (a suspension clears it)
    spec = run.obj.get("spec") or {}
    deployment = (run.obj.get("status") or {}).get("jobDeploymentStatus") or ""
    cluster = ray_cluster_name(dict(run.obj)) or cluster_name
    k8s_job_mode = (spec.get("submissionMode") or K8S_JOB_MODE) == K8S_JOB_MODE
    if run.suspended or deployment in ("Suspending", "Suspended"):
        return Children(unwanted=((RayClusterKind.ref, cluster_name), (JobKind.ref, run.name)))
    wanted = []
    if deployment in ("Initializing", "Running") and not spec.get("clusterSelector"):
        wanted.append(_ray_cluster(run, cluster))
    if deployment == "Running" and k8s_job_mode:
        wanted.append(_submitter(run))
    return Children(wanted=tuple(wanted))


# -- Kubeflow ---------------------------------------------------------------------------


def _replica_specs(run: Run, field_name: str) -> list[tuple[str, Mapping[str, Any]]]:
    specs = field(run.obj, ("spec", field_name))
    if not isinstance(specs, Mapping):
        return []
    return sorted((str(k), v) for k, v in specs.items() if isinstance(v, Mapping))


def _running_job(run: Run) -> bool | None:
    """True while a Kubeflow job runs (its pods wanted), None once it has finished
    (nothing more made), False while suspended (its pods deleted)."""
    conditions = (run.obj.get("status") or {}).get("conditions") or []
    if is_true(conditions, "Succeeded") or is_true(conditions, "Failed"):
        return None
    return not run.suspended


def pytorchjob_children(run: Run) -> Children:
    pods = []
    for replica_type, spec in _replica_specs(run, PyTorchJobKind.replica_specs):
        kind = replica_type.lower()
        for index in range(_count(spec.get("replicas"), 1)):
            labels = {OPERATOR_NAME_LABEL: PYTORCH_OPERATOR_NAME,
                      KUBEFLOW_JOB_NAME_LABEL: run.name, REPLICA_TYPE_LABEL: kind,
                      REPLICA_INDEX_LABEL: str(index)}  # fmt: skip
            if kind == "master":
                labels[JOB_ROLE_LABEL] = "master"
            pods.append(_pod(run, PyTorchJobKind.ref, f"{run.name}-{kind}-{index}",
                             spec.get("template"), labels, _runs_as_its_object(run),
                             str(spec.get("restartPolicy") or "") or None))  # fmt: skip
    return _while_running(run, pods)


def mpijob_children(run: Run) -> Children:
    specs = dict(_replica_specs(run, MPIJobKind.replica_specs))
    worker = specs.get("Worker") or {}
    made: list[Child] = [
        _pod(run, MPIJobKind.ref, f"{run.name}-worker-{index}", worker.get("template"),
             {OPERATOR_NAME_LABEL: MPI_OPERATOR_NAME, KUBEFLOW_JOB_NAME_LABEL: run.name,
              JOB_ROLE_LABEL: "worker", REPLICA_INDEX_LABEL: str(index)},
             _runs_as_its_object(run), "Never")
        for index in range(_count(worker.get("replicas"), 0))
    ]  # fmt: skip
    launcher = specs.get("Launcher")
    if launcher is not None:
        template = copy.deepcopy(launcher.get("template")) or {}
        meta = template.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), OPERATOR_NAME_LABEL: MPI_OPERATOR_NAME,
                          KUBEFLOW_JOB_NAME_LABEL: run.name, JOB_ROLE_LABEL: "launcher"}  # fmt: skip
        meta["annotations"] = {**_runs_as_its_object(run), **(meta.get("annotations") or {})}
        template.setdefault("spec", {})["restartPolicy"] = "Never"
        made.append(Child(JobKind.ref, {
            "apiVersion": JobKind.ref.api_version, "kind": JobKind.ref.kind,
            "metadata": {"name": run.name + MPI_LAUNCHER_SUFFIX, "namespace": run.namespace,
                         "labels": {"app": run.name},
                         "ownerReferences": [_controller(run, MPIJobKind.ref)]},
            "spec": {"backoffLimit": 0, "template": template},
        }))  # fmt: skip
    return _while_running(run, made)


def _while_running(run: Run, made: list[Child]) -> Children:
    running = _running_job(run)
    if running is None:
        return Children()
    if not running:
        return Children(unwanted=tuple((child.resource, child.name) for child in made))
    return Children(wanted=tuple(made))


# -- Trainer ------------------------------------------------------------------------------


def trainjob_children(run: Run) -> Children:
    trainer = field(run.obj, ("spec", "trainer")) or {}
    nodes = _count(trainer.get("numNodes"), 1)
    container: Obj = {"name": "node", "image": str(trainer.get("image") or "busybox")}
    if isinstance(trainer.get("resourcesPerNode"), Mapping):
        container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    template = {
        "metadata": {"labels": {TRAINJOB_ANCESTOR_LABEL: "trainer"},
                     "annotations": _runs_as_its_object(run)},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }  # fmt: skip
    jobset = Child(JobSetKind.ref, {
        "apiVersion": JobSetKind.ref.api_version, "kind": JobSetKind.ref.kind,
        "metadata": {"name": run.name, "namespace": run.namespace,
                     "ownerReferences": [_controller(run, TrainJobKind.ref)]},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
            "parallelism": nodes, "completions": nodes, "backoffLimit": 0,
            "template": template}}}]},
    })  # fmt: skip
    conditions = (run.obj.get("status") or {}).get("conditions") or []
    if is_true(conditions, "Complete") or is_true(conditions, "Failed"):
        return Children()
    if run.suspended:
        return Children(unwanted=((JobSetKind.ref, run.name),))
    return Children(wanted=(jobset,))
