"""Kubeflow's replica-spec jobs: PyTorchJob (kubeflow.org/v1) and MPIJob (kubeflow.org/v2beta1).

Both keep managedBy and suspend in ``spec.runPolicy`` and share one status
shape (training-operator's ``JobStatus``, mpi-operator's copy of it):
``conditions`` (Created, Running, Restarting, Succeeded, Suspended, Failed),
``replicaStatuses`` per replica type (active, succeeded, failed),
``startTime``, ``completionTime``, ``lastReconcileTime``.

- Finished: a True ``Succeeded`` (success) or ``Failed`` condition.
- Only forward: each replica type's ``succeeded`` and ``failed``; ``startTime``
  never earlier (the operators set a new one when a suspended job resumes);
  ``completionTime`` once set; a True Succeeded or Failed condition.
- The mirror drops ``runPolicy.managedBy`` (the worker's operator runs it) and
  ``runPolicy.ttlSecondsAfterFinished`` (the operator would delete the mirror
  before its final status is copied; the manager's object keeps its TTL).
- Pod sets: one per replica type, ``replicas`` (default 1) pods of its template.
- Their CRDs take any managedBy value, but the operators' own validation (the
  training-operator's webhook, mpi-operator's controller) accepts only their
  value or ``kueue.x-k8s.io/multikueue``: claim that one where they run.
- Their pods on a worker: the operator controls each (``<job>-<type>-<index>``),
  labelled with the job's name, the replica type and index (and ``job-role``). An
  MPIJob's launcher pod is its launcher Job's (``<job>-launcher``, which the MPIJob
  controls), labelled the same.
"""

from __future__ import annotations

import copy

from jobrelay.kinds.base import RUN_POLICY_MANAGED_BY, Finish, PodSet, WorkloadKind
from jobrelay.kinds.forward import (
    changed,
    conditions_of,
    count,
    finish_by_conditions,
    keep_counters,
    keep_first,
    keep_latest,
    keep_true_conditions,
    status_of,
    true_condition,
)
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.job.pod_labels import JOB_POD_OWNER
from jobrelay.kinds.mirrors import mirror_object, slim_metadata
from jobrelay.kinds.pod_ownership import OwnerHop
from jobrelay.kinds.pods import QuantityError, pod_requests
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource

SUCCEEDED = "Succeeded"
FAILED = "Failed"
RUNNING = "Running"
# Fields of runPolicy meaningful on the manager only (see the module's docstring).
_MANAGER_ONLY_RUN_POLICY = ("managedBy", "ttlSecondsAfterFinished")
_REPLICA_COUNTERS = ("succeeded", "failed")

# What the operators write on each pod (training-operator's common_types.go, the same in
# mpi-operator's v2beta1 constants.go).
KUBEFLOW_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
# The operators' names in OPERATOR_NAME_LABEL.
PYTORCH_OPERATOR_NAME = "pytorchjob-controller"
MPI_OPERATOR_NAME = "mpi-operator"
# The MPI operator's launcher Job is named so after its MPIJob.
MPI_LAUNCHER_SUFFIX = "-launcher"


class KubeflowJobKind(WorkloadKind):
    """A Kubeflow job whose pods are described by ``spec.<replica_specs>``."""

    managed_by_field = RUN_POLICY_MANAGED_BY
    ttl_after_finished_field = ("spec", "runPolicy", "ttlSecondsAfterFinished")
    replica_specs: str
    pod_index_labels = (REPLICA_INDEX_LABEL,)
    pod_selector_labels = (KUBEFLOW_JOB_NAME_LABEL,)

    def _run_policy(self, obj: JsonObj) -> JsonObj:
        policy = (obj.get("spec") or {}).get("runPolicy")
        return policy if isinstance(policy, dict) else {}

    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        suspend = self._run_policy(obj).get("suspend")
        return {
            "metadata": slim_metadata(obj),
            "spec": {"runPolicy": {"suspend": suspend}} if suspend is not None else {},
            "status": obj.get("status") or {},
        }

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        # A later run starts the job from the beginning (its status still never goes back).
        del now
        spec = copy.deepcopy(obj.get("spec") or {})
        policy = spec.get("runPolicy")
        if isinstance(policy, dict):
            spec["runPolicy"] = {
                k: v for k, v in policy.items() if k not in _MANAGER_ONLY_RUN_POLICY
            }
        return mirror_object(
            self.ref, obj, spec, controller_name=controller_name, origin=origin, run=run
        )

    def spec_patch(self, obj: JsonObj, mirror: JsonObj) -> JsonObj | None:
        mine = bool(self._run_policy(obj).get("suspend"))
        if mine == bool(self._run_policy(mirror).get("suspend")):
            return None
        return {"spec": {"runPolicy": {"suspend": mine}}}

    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        del now
        if self.is_finished(obj):
            return None
        current = status_of(obj)
        if mirror is None:
            desired = {**current, "replicaStatuses": _idle(current.get("replicaStatuses"))}
        else:
            theirs = status_of(mirror)
            if not theirs:
                return None
            desired = copy.deepcopy(theirs)
            desired["replicaStatuses"] = _merged_replicas(
                current.get("replicaStatuses"), theirs.get("replicaStatuses")
            )
            if gone:
                desired["replicaStatuses"] = _idle(desired["replicaStatuses"])
            keep_latest(desired, current, ("startTime",))
            keep_first(desired, current, ("completionTime",))
            keep_true_conditions(desired, current, (SUCCEEDED, FAILED))
        return changed(current, desired)

    def failed_status(self, obj: JsonObj, reason: str, message: str, *, now: str) -> JsonObj | None:
        status = copy.deepcopy(status_of(obj))
        failed = {
            "type": FAILED,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        }
        others = [c for c in conditions_of(status) if c.get("type") not in (FAILED, RUNNING)]
        status["conditions"] = [*others, failed]
        status.setdefault("completionTime", now)
        return status

    def finish(self, obj: JsonObj) -> Finish | None:
        return finish_by_conditions(obj, SUCCEEDED, FAILED)

    def is_suspended(self, obj: JsonObj) -> bool:
        return bool(self._run_policy(obj).get("suspend"))

    def has_run(self, obj: JsonObj) -> bool:
        status = obj.get("status") or {}
        if not isinstance(status, dict):
            return False
        replicas = status.get("replicaStatuses")
        return bool(status.get("startTime")) or any(
            count(entry.get(k))
            for entry in (replicas.values() if isinstance(replicas, dict) else [])
            if isinstance(entry, dict)
            for k in ("active", "succeeded", "failed")
        )

    def shows_running(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict) or self.is_finished(obj):
            return False
        return true_condition(conditions_of(status), RUNNING) is not None

    def _replica_specs(self, obj: JsonObj) -> list[tuple[str, JsonObj]]:
        specs = (obj.get("spec") or {}).get(self.replica_specs)
        if not isinstance(specs, dict):
            return []
        return [(str(name), spec) for name, spec in specs.items() if isinstance(spec, dict)]

    def pod_templates(self, obj: JsonObj) -> list[JsonObj]:
        return [
            spec["template"]
            for _, spec in self._replica_specs(obj)
            if isinstance(spec.get("template"), dict)
        ]

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        sets = []
        for name, spec in self._replica_specs(obj):
            pod_spec = (spec.get("template") or {}).get("spec") or {}
            try:
                requests = pod_requests(pod_spec)
            except QuantityError as error:
                raise error.within(f"replica type {name[:63]!r}") from None
            replicas = spec.get("replicas", 1)
            sets.append(
                PodSet(
                    name=name,
                    count=count(replicas) if replicas is not None else 1,
                    requests=requests,
                    node_selector=dict(pod_spec.get("nodeSelector") or {}),
                )
            )
        return sets

    # -- its pods on the worker ---------------------------------------------------------

    def pod_selectors(self, mirror: JsonObj) -> tuple[str, ...]:
        return (f"{KUBEFLOW_JOB_NAME_LABEL}={Meta(mirror).name}",)

    def pods_at_work(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        replicas = status.get("replicaStatuses") if isinstance(status, dict) else None
        return any(
            count(entry.get(k)) > 0
            for entry in (replicas.values() if isinstance(replicas, dict) else [])
            if isinstance(entry, dict)
            for k in ("active", "succeeded")
        )


def _merged_replicas(mine: object, theirs: object) -> JsonObj:
    """Each replica type's counters: the mirror's, succeeded and failed never lower."""
    mine_map = mine if isinstance(mine, dict) else {}
    theirs_map = theirs if isinstance(theirs, dict) else {}
    merged: JsonObj = {}
    for name in {**mine_map, **theirs_map}:
        was, now = mine_map.get(name), theirs_map.get(name)
        before: JsonObj = was if isinstance(was, dict) else {}
        after: JsonObj | None = now if isinstance(now, dict) else None
        entry = copy.deepcopy(after if after is not None else before)
        keep_counters(entry, before, after or {}, _REPLICA_COUNTERS)
        merged[name] = entry
    return merged


def _idle(replicas: object) -> JsonObj:
    """Replica statuses with nothing active: no mirror runs now (what was done stays)."""
    if not isinstance(replicas, dict):
        return {}
    return {
        name: {**entry, "active": 0} if isinstance(entry, dict) and entry.get("active") else entry
        for name, entry in replicas.items()
    }


class PyTorchJobKind(KubeflowJobKind):
    ref = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
    replica_specs = "pytorchReplicaSpecs"


class MPIJobKind(KubeflowJobKind):
    ref = Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
    replica_specs = "mpiReplicaSpecs"
    # Its launcher pod is its launcher Job's.
    pod_owner_labels = (JOB_POD_OWNER,)
    owner_hop_refs = (JobKind.ref,)

    def owner_hops(self, mirror: JsonObj) -> tuple[OwnerHop, ...]:
        return (OwnerHop(JobKind.ref, Meta(mirror).name + MPI_LAUNCHER_SUFFIX),)

    def made_for(self, made: tuple[str, str], name: str) -> tuple[str, ...]:
        launcher = made == (JobKind.ref.group, JobKind.ref.kind)
        if launcher and name.endswith(MPI_LAUNCHER_SUFFIX) and len(name) > len(MPI_LAUNCHER_SUFFIX):
            return (name.removesuffix(MPI_LAUNCHER_SUFFIX),)
        return ()
