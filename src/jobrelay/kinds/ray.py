"""KubeRay's kinds: RayJob and RayCluster (ray.io/v1).

Their CRDs accept in ``spec.managedBy`` only ``ray.io/kuberay-operator`` or
``kueue.x-k8s.io/multikueue`` (and the field is immutable): jobrelay claims the
second (``--kind RayJob.v1.ray.io=kueue.x-k8s.io/multikueue``).

RayJob
- Finished: ``jobDeploymentStatus`` ``Complete`` (succeeded unless ``jobStatus``
  is ``FAILED`` or ``STOPPED``) or ``Failed``, KubeRay's terminal states; also
  ``ValidationFailed``, which KubeRay never leaves.
- Only forward: ``succeeded`` and ``failed`` (attempts); ``startTime`` and
  ``endTime`` never move earlier (a resumed RayJob starts again: KubeRay sets a new
  ``startTime``).
- The mirror drops ``managedBy``; a ``deletionStrategy`` policy ``DeleteSelf``
  becomes ``DeleteCluster`` there (the worker's operator would delete the mirror
  before its final status is copied; the pods still go). ``shutdownAfterJobFinishes``
  and ``ttlSecondsAfterFinished`` delete only the RayCluster: they stay.
- Pod sets: its ``rayClusterSpec`` (as a RayCluster's) and, in ``K8sJobMode``
  (the default), the submitter pod (its template's requests, else KubeRay's
  default submitter's 500m CPU and 200Mi). A RayJob with ``clusterSelector``
  runs on an existing RayCluster: it must exist on the worker.

RayCluster: a long-running service, it never finishes (jobrelay follows it until
it is deleted). Only forward: a True ``RayClusterProvisioned`` condition (KubeRay
never sets it back). Pod sets: the head group's one pod and each worker group's
``replicas`` (else ``minReplicas``) x ``numOfHosts`` pods.

Their pods on a worker (ray-operator's ``common/pod.go``, ``rayjob_controller.go``):
a RayCluster's head and worker pods are labelled ``ray.io/cluster=<its name>`` and
controlled by it. A RayJob makes a RayCluster (named in ``status.rayClusterName``)
and, in ``K8sJobMode``, a submitter Job named as itself, both controlled by the
RayJob; its pods are theirs, and the mirror's only while the mirror controls them.
"""

from __future__ import annotations

import copy

from jobrelay.kinds.base import Finish, PodSet, WorkloadKind
from jobrelay.kinds.forward import (
    changed,
    conditions_of,
    count,
    keep_counters,
    keep_latest,
    keep_true_conditions,
    status_of,
    true_condition,
)
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.job.pod_labels import JOB_NAME_LABEL, JOB_POD_OWNER
from jobrelay.kinds.mirrors import mirror_object, slim_suspendable
from jobrelay.kinds.pod_ownership import OwnerHop, name_prefixes
from jobrelay.kinds.pods import QuantityError, pod_requests
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource

# Where RayClusters are served (a RayJob's hop, and a kind of its own).
RAY_CLUSTER_REF = Resource("ray.io", "v1", "rayclusters", "RayCluster")
KUBERAY_OPERATOR = "ray.io/kuberay-operator"
_CRD_VALUES = (KUBERAY_OPERATOR, "kueue.x-k8s.io/multikueue")

COMPLETE = "Complete"
FAILED = "Failed"
VALIDATION_FAILED = "ValidationFailed"
SUSPENDED = "Suspended"
RUNNING = "Running"
_FINISHED_DEPLOYMENTS = (COMPLETE, FAILED, VALIDATION_FAILED)
_UNSUCCESSFUL_JOB_STATUSES = ("FAILED", "STOPPED")
K8S_JOB_MODE = "K8sJobMode"
# KubeRay's default submitter container asks for this much (controllers/ray/common/job.go).
DEFAULT_SUBMITTER_REQUESTS = {"cpu": "500m", "memory": "200Mi"}

PROVISIONED = "RayClusterProvisioned"
HEAD_POD_READY = "HeadPodReady"

# The labels KubeRay writes on a RayCluster's pods (utils/constant.go), and on the
# RayCluster and the submitter Job a RayJob makes (the RayJob's name and kind).
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_GROUP_LABEL = "ray.io/group"
RAY_NODE_LABEL = "ray.io/is-ray-node"
RAY_ID_LABEL = "ray.io/identifier"
ORIGINATED_FROM_NAME_LABEL = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_KIND_LABEL = "ray.io/originated-from-crd"
SUBMISSION_MODE_LABEL = "ray.io/job-submission-mode"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
KUBERAY_APP_LABEL = "app.kubernetes.io/name"
KUBERAY_COMPONENT = "kuberay-operator"
KUBERAY_APP = "kuberay"
HEAD_NODE, WORKER_NODE = "head", "worker"
HEAD_GROUP = "headgroup"


def _spec(obj: JsonObj) -> JsonObj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _pod_set(name: str, count_: int, template: object) -> PodSet:
    pod_spec = (template.get("spec") if isinstance(template, dict) else None) or {}
    try:
        requests = pod_requests(pod_spec)
    except QuantityError as error:
        raise error.within(f"group {name[:63]!r}") from None
    return PodSet(
        name=name,
        count=count_,
        requests=requests,
        node_selector=dict(pod_spec.get("nodeSelector") or {}),
    )


def cluster_pod_templates(cluster_spec: JsonObj) -> list[JsonObj]:
    """The head's and each worker group's pod template of a RayClusterSpec."""
    head = (cluster_spec.get("headGroupSpec") or {}).get("template")
    templates = [head] if isinstance(head, dict) else []
    for group in cluster_spec.get("workerGroupSpecs") or []:
        template = group.get("template") if isinstance(group, dict) else None
        if isinstance(template, dict):
            templates.append(template)
    return templates


def cluster_pod_sets(cluster_spec: JsonObj) -> list[PodSet]:
    """The head's one pod and each worker group's replicas x numOfHosts pods."""
    sets = []
    head = cluster_spec.get("headGroupSpec")
    if isinstance(head, dict):
        sets.append(_pod_set("head", 1, head.get("template")))
    for group in cluster_spec.get("workerGroupSpecs") or []:
        if not isinstance(group, dict):
            continue
        replicas = group.get("replicas")
        if replicas is None:
            replicas = group.get("minReplicas")
        hosts = group.get("numOfHosts")
        pods = 0 if group.get("suspend") else count(replicas) * (count(hosts) if hosts else 1)
        sets.append(_pod_set(str(group.get("groupName") or "workers"), pods, group.get("template")))
    return sets


class _RayKind(WorkloadKind):
    crd_managed_by_values = _CRD_VALUES
    pod_selector_labels = (RAY_CLUSTER_LABEL,)

    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        return slim_suspendable(obj)

    def spec_patch(self, obj: JsonObj, mirror: JsonObj) -> JsonObj | None:
        mine = bool(_spec(obj).get("suspend"))
        if mine == bool(_spec(mirror).get("suspend")):
            return None
        return {"spec": {"suspend": mine}}

    def is_suspended(self, obj: JsonObj) -> bool:
        return bool(_spec(obj).get("suspend"))


class RayJobKind(_RayKind):
    ref = Resource("ray.io", "v1", "rayjobs", "RayJob")
    # Its submitter pod is a Job's.
    pod_owner_labels = (JOB_POD_OWNER,)
    owner_hop_refs = (RAY_CLUSTER_REF, JobKind.ref)

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        # A later run submits the job again from the beginning (its counters still add up).
        del now
        spec = {k: copy.deepcopy(v) for k, v in _spec(obj).items() if k != "managedBy"}
        strategy = spec.get("deletionStrategy")
        if isinstance(strategy, dict):
            spec["deletionStrategy"] = _never_delete_self(strategy)
        return mirror_object(
            self.ref, obj, spec, controller_name=controller_name, origin=origin, run=run
        )

    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        del now, gone
        if self.is_finished(obj):
            return None
        current = status_of(obj)
        if mirror is None:
            desired = dict(current)
            deployment = current.get("jobDeploymentStatus")
            if self.is_suspended(obj) and deployment and deployment != SUSPENDED:
                desired["jobDeploymentStatus"] = SUSPENDED
        else:
            theirs = status_of(mirror)
            if not theirs:
                return None
            # As the worker's operator wrote it (observedGeneration too: the operator's
            # view of the mirror, whose spec follows ours).
            desired = copy.deepcopy(theirs)
            keep_counters(desired, current, theirs, ("succeeded", "failed"))
            keep_latest(desired, current, ("startTime", "endTime"))
        return changed(current, desired)

    def failed_status(self, obj: JsonObj, reason: str, message: str, *, now: str) -> JsonObj | None:
        status = copy.deepcopy(status_of(obj))
        status.update(
            {"jobDeploymentStatus": FAILED, "reason": reason, "message": message, "endTime": now}
        )
        return status

    def finish(self, obj: JsonObj) -> Finish | None:
        status = obj.get("status")
        if not isinstance(status, dict):
            return None
        deployment = status.get("jobDeploymentStatus")
        if deployment not in _FINISHED_DEPLOYMENTS:
            return None
        job_status = str(status.get("jobStatus") or "")
        succeeded = deployment == COMPLETE and job_status not in _UNSUCCESSFUL_JOB_STATUSES
        return Finish(
            succeeded=succeeded,
            reason=str(status.get("reason") or job_status or deployment),
            message=str(status.get("message") or ""),
            at=str(status.get("endTime") or ""),
        )

    def has_run(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict):
            return False
        return bool(status.get("startTime")) or bool(
            count(status.get("succeeded")) or count(status.get("failed"))
        )

    def shows_running(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        return isinstance(status, dict) and status.get("jobDeploymentStatus") == RUNNING

    def _submitter(self, spec: JsonObj) -> list[PodSet]:
        if (spec.get("submissionMode") or K8S_JOB_MODE) != K8S_JOB_MODE:
            return []
        template = spec.get("submitterPodTemplate")
        if isinstance(template, dict):
            return [_pod_set("submitter", 1, template)]
        default = {
            "spec": {"containers": [{"resources": {"requests": DEFAULT_SUBMITTER_REQUESTS}}]}
        }
        return [_pod_set("submitter", 1, default)]

    def pod_templates(self, obj: JsonObj) -> list[JsonObj]:
        spec = _spec(obj)
        cluster = spec.get("rayClusterSpec")
        templates = cluster_pod_templates(cluster) if isinstance(cluster, dict) else []
        submitter = spec.get("submitterPodTemplate")
        if (
            isinstance(submitter, dict)
            and (spec.get("submissionMode") or K8S_JOB_MODE) == K8S_JOB_MODE
        ):
            templates.append(submitter)
        return templates

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        spec = _spec(obj)
        cluster = spec.get("rayClusterSpec")
        sets = cluster_pod_sets(cluster) if isinstance(cluster, dict) else []
        return sets + self._submitter(spec)

    # -- its pods on the worker ---------------------------------------------------------

    def owner_hops(self, mirror: JsonObj) -> tuple[OwnerHop, ...]:
        cluster = ray_cluster_name(mirror)
        submitter = OwnerHop(JobKind.ref, Meta(mirror).name)
        return (OwnerHop(RAY_CLUSTER_REF, cluster), submitter) if cluster else (submitter,)

    def made_for(self, made: tuple[str, str], name: str) -> tuple[str, ...]:
        # Its RayCluster, <rayjob>-<random>, and its submitter Job, named as itself.
        if made == (RAY_CLUSTER_REF.group, RAY_CLUSTER_REF.kind):
            return name_prefixes(name)
        return (name,) if made == (JobKind.ref.group, JobKind.ref.kind) else ()

    def pod_selectors(self, mirror: JsonObj) -> tuple[str, ...]:
        cluster = ray_cluster_name(mirror)
        submitter = f"{JOB_NAME_LABEL}={Meta(mirror).name}"
        return (f"{RAY_CLUSTER_LABEL}={cluster}", submitter) if cluster else (submitter,)

    def pods_at_work(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict):
            return False
        cluster = status.get("rayClusterStatus")
        return status.get("jobDeploymentStatus") in (RUNNING, COMPLETE) or (
            isinstance(cluster, dict) and count(cluster.get("readyWorkerReplicas")) > 0
        )


def ray_cluster_name(rayjob: JsonObj) -> str:
    """The RayCluster a RayJob runs on, as its status names it (``""`` before it has one)."""
    status = rayjob.get("status")
    name = status.get("rayClusterName") if isinstance(status, dict) else None
    return name if isinstance(name, str) else ""


class RayClusterKind(_RayKind):
    ref = RAY_CLUSTER_REF

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        del now
        spec = {k: copy.deepcopy(v) for k, v in _spec(obj).items() if k != "managedBy"}
        return mirror_object(
            self.ref, obj, spec, controller_name=controller_name, origin=origin, run=run
        )

    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        del now
        current = status_of(obj)
        if mirror is None or gone:
            desired = copy.deepcopy(current if mirror is None else status_of(mirror))
            if not desired:
                return None
            # No mirror runs: no pod of it is ready.
            for key in ("readyWorkerReplicas", "availableWorkerReplicas"):
                if desired.get(key):
                    desired[key] = 0
            desired["conditions"] = [
                c for c in conditions_of(desired) if c.get("type") != HEAD_POD_READY
            ]
        else:
            theirs = status_of(mirror)
            if not theirs:
                return None
            desired = copy.deepcopy(theirs)
        keep_true_conditions(desired, current, (PROVISIONED,))
        return changed(current, desired)

    def finish(self, obj: JsonObj) -> Finish | None:
        # A RayCluster is a service: it runs until it is deleted, never finishing.
        del obj
        return None

    def has_run(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict):
            return False
        return bool(
            status.get("state")
            or (status.get("head") or {}).get("podIP")
            or true_condition(conditions_of(status), PROVISIONED)
            or count(status.get("readyWorkerReplicas"))
        )

    def shows_running(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict) or self.is_suspended(obj):
            return False
        return status.get("state") == "ready" or bool(
            true_condition(conditions_of(status), HEAD_POD_READY)
        )

    def pod_templates(self, obj: JsonObj) -> list[JsonObj]:
        return cluster_pod_templates(_spec(obj))

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        return cluster_pod_sets(_spec(obj))

    # -- its pods on the worker ---------------------------------------------------------

    def pod_selectors(self, mirror: JsonObj) -> tuple[str, ...]:
        return (f"{RAY_CLUSTER_LABEL}={Meta(mirror).name}",)

    def pods_at_work(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        return self.shows_running(obj) or (
            isinstance(status, dict) and count(status.get("readyWorkerReplicas")) > 0
        )


def _never_delete_self(strategy: JsonObj) -> JsonObj:
    """A deletionStrategy whose DeleteSelf policies delete the RayCluster instead."""

    def rewritten(policy: object) -> object:
        if isinstance(policy, dict) and policy.get("policy") == "DeleteSelf":
            return {**policy, "policy": "DeleteCluster"}
        return policy

    out: JsonObj = {key: rewritten(value) for key, value in strategy.items()}
    rules = strategy.get("deletionRules")
    if isinstance(rules, list):
        out["deletionRules"] = [rewritten(rule) for rule in rules]
    return out
