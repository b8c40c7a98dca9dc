"""Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1).

Its CRD accepts in ``spec.managedBy`` only ``trainer.kubeflow.org/trainjob-controller``
(the default it writes) or ``kueue.x-k8s.io/multikueue`` (immutable): jobrelay
claims the second.

- Finished: a True ``Complete`` (success) or ``Failed`` condition.
- Only forward: each ``jobsStatus`` entry's ``succeeded`` and ``failed``; a True
  Complete or Failed condition. Our own ``spec.suspend``, not the mirror's,
  decides the ``Suspended`` condition (the mirror follows it a moment later).
- The mirror drops ``managedBy``; a TrainJob has no TTL of its own.
- Pods: a TrainJob names a runtime (``runtimeRef``: a TrainingRuntime or
  ClusterTrainingRuntime, which must exist on the worker too) whose JobSet
  template makes them, so the TrainJob itself has no pod template. Counted:
  ``trainer.numNodes`` pods of ``trainer.resourcesPerNode`` when both are given
  (the trainer nodes; initializer pods are not counted); nothing otherwise.
- Its pods on a worker: Trainer makes a JobSet named as the TrainJob, which it
  controls; the pods are that JobSet's (its name and UID labels), and the mirror's
  only while the mirror controls that JobSet.
"""

from __future__ import annotations

import copy

from jobrelay.kinds.base import Finish, PodSet, WorkloadKind
from jobrelay.kinds.forward import (
    changed,
    condition,
    conditions_of,
    count,
    finish_by_conditions,
    keep_counters,
    keep_true_conditions,
    status_of,
    true_condition,
)
from jobrelay.kinds.job.pod_labels import COMPLETION_INDEX_LABEL
from jobrelay.kinds.jobset import (
    JOBSET_NAME_LABEL,
    JOBSET_POD_OWNER,
    JOBSET_UID_LABEL,
    JobSetKind,
)
from jobrelay.kinds.mirrors import mirror_object, slim_suspendable
from jobrelay.kinds.pod_ownership import OwnerHop
from jobrelay.kinds.pods import QuantityError, pod_requests
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource

TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
# Which step of a TrainJob a JobSet's pods are (Trainer's constants.go).
TRAINJOB_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
COMPLETE = "Complete"
FAILED = "Failed"
SUSPENDED = "Suspended"
_JOB_COUNTERS = ("succeeded", "failed")


def _spec(obj: JsonObj) -> JsonObj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


class TrainJobKind(WorkloadKind):
    ref = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
    crd_managed_by_values = (TRAINJOB_CONTROLLER, "kueue.x-k8s.io/multikueue")
    crd_managed_by_default = TRAINJOB_CONTROLLER
    pod_owner_labels = (JOBSET_POD_OWNER,)
    pod_uid_labels = (JOBSET_UID_LABEL,)
    pod_index_labels = (COMPLETION_INDEX_LABEL,)
    pod_selector_labels = (JOBSET_NAME_LABEL,)
    owner_hop_refs = (JobSetKind.ref,)

    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        return slim_suspendable(obj)

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        del now
        spec = {k: copy.deepcopy(v) for k, v in _spec(obj).items() if k != "managedBy"}
        return mirror_object(
            self.ref, obj, spec, controller_name=controller_name, origin=origin, run=run
        )

    def spec_patch(self, obj: JsonObj, mirror: JsonObj) -> JsonObj | None:
        mine = bool(_spec(obj).get("suspend"))
        if mine == bool(_spec(mirror).get("suspend")):
            return None
        return {"spec": {"suspend": mine}}

    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        if self.is_finished(obj):
            return None
        current = status_of(obj)
        if mirror is None:
            desired = dict(current)
            desired["jobsStatus"] = _idle(current.get("jobsStatus"))
        else:
            theirs = status_of(mirror)
            if not theirs and not self.is_suspended(obj):
                return None
            desired = copy.deepcopy(theirs)
            desired["jobsStatus"] = _merged_jobs(
                current.get("jobsStatus"), theirs.get("jobsStatus")
            )
            if gone:
                desired["jobsStatus"] = _idle(desired["jobsStatus"])
            keep_true_conditions(desired, current, (COMPLETE, FAILED))
        desired["conditions"] = self._suspended_condition(obj, conditions_of(desired), now)
        return changed(current, desired)

    def _suspended_condition(
        self, obj: JsonObj, conditions: list[JsonObj], now: str
    ) -> list[JsonObj]:
        suspended = self.is_suspended(obj)
        if any(true_condition(conditions, t) for t in (COMPLETE, FAILED)):
            return conditions
        existing = next((c for c in conditions if c.get("type") == SUSPENDED), None)
        if existing is None and not suspended:
            return conditions
        wanted = "True" if suspended else "False"
        if existing is not None and existing.get("status") == wanted:
            return conditions
        replacement = condition(
            SUSPENDED,
            "Suspended" if suspended else "Resumed",
            "TrainJob is suspended" if suspended else "TrainJob is resumed",
            now,
        )
        replacement["status"] = wanted
        return [c for c in conditions if c.get("type") != SUSPENDED] + [replacement]

    def failed_status(self, obj: JsonObj, reason: str, message: str, *, now: str) -> JsonObj | None:
        status = copy.deepcopy(status_of(obj))
        others = [c for c in conditions_of(status) if c.get("type") != FAILED]
        status["conditions"] = [*others, condition(FAILED, reason, message, now)]
        return status

    def finish(self, obj: JsonObj) -> Finish | None:
        return finish_by_conditions(obj, COMPLETE, FAILED)

    def is_suspended(self, obj: JsonObj) -> bool:
        return bool(_spec(obj).get("suspend"))

    def has_run(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict):
            return False
        jobs = status.get("jobsStatus")
        return any(
            count(entry.get(k))
            for entry in (jobs if isinstance(jobs, list) else [])
            if isinstance(entry, dict)
            for k in ("active", "ready", "succeeded", "failed")
        )

    def shows_running(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        if not isinstance(status, dict) or self.is_finished(obj):
            return False
        jobs = status.get("jobsStatus")
        return any(
            count(entry.get("active"))
            for entry in (jobs if isinstance(jobs, list) else [])
            if isinstance(entry, dict)
        )

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        trainer = _spec(obj).get("trainer")
        if not isinstance(trainer, dict):
            return []
        nodes, resources = trainer.get("numNodes"), trainer.get("resourcesPerNode")
        if nodes is None or not isinstance(resources, dict):
            return []
        try:
            requests = pod_requests({"containers": [{"resources": resources}]})
        except QuantityError as error:
            raise error.within("trainer.resourcesPerNode") from None
        return [PodSet(name="node", count=count(nodes), requests=requests)]

    # -- its pods on the worker ---------------------------------------------------------

    def owner_hops(self, mirror: JsonObj) -> tuple[OwnerHop, ...]:
        return (OwnerHop(JobSetKind.ref, Meta(mirror).name),)

    def pod_selectors(self, mirror: JsonObj) -> tuple[str, ...]:
        return (f"{JOBSET_NAME_LABEL}={Meta(mirror).name}",)

    def made_for(self, made: tuple[str, str], name: str) -> tuple[str, ...]:
        # Its JobSet, named as itself, and that JobSet's Jobs.
        if made == (JobSetKind.ref.group, JobSetKind.ref.kind):
            return (name,)
        return JobSetKind().made_for(made, name)

    def pods_at_work(self, obj: JsonObj) -> bool:
        status = obj.get("status")
        jobs = status.get("jobsStatus") if isinstance(status, dict) else None
        return any(
            count(entry.get(k)) > 0
            for entry in (jobs if isinstance(jobs, list) else [])
            if isinstance(entry, dict)
            for k in ("active", "ready", "succeeded")
        )


def _merged_jobs(mine: object, theirs: object) -> list[JsonObj]:
    """The mirror's jobsStatus, each job's succeeded and failed never lower than ours."""
    before = {
        entry.get("name"): entry
        for entry in (mine if isinstance(mine, list) else [])
        if isinstance(entry, dict)
    }
    merged = []
    for entry in theirs if isinstance(theirs, list) else []:
        if not isinstance(entry, dict):
            continue
        out = copy.deepcopy(entry)
        keep_counters(out, before.get(entry.get("name")) or {}, entry, _JOB_COUNTERS)
        merged.append(out)
    named = {entry.get("name") for entry in merged}
    merged += [copy.deepcopy(e) for name, e in before.items() if name not in named]
    return merged


def _idle(jobs: object) -> list[JsonObj]:
    """jobsStatus with nothing active or ready: no mirror runs now (what was done stays)."""
    return [
        {**entry, "active": 0, "ready": 0}
        for entry in (jobs if isinstance(jobs, list) else [])
        if isinstance(entry, dict)
    ]
