"""The JobSet adapter (jobset.x-k8s.io/v1alpha2).

A JobSet's status is not guarded by apiserver rules the way a Job's is, but a
user watching it must never see it go backwards: statuses reach us stale,
repeated and reordered. So the copy is a merge: ``restarts`` only grows; the
replicated-job counters of the newest attempt win (a restart legitimately
resets them, which is why the attempt decides and not each counter), and
within one attempt ``succeeded`` and ``failed`` only grow; ``terminalState``
and a True ``Completed`` or ``Failed`` condition, once seen, stay.

One trade-off, knowingly made: the JobSet controller (v0.11) first writes
``restarts: N+1`` with the previous attempt's counters and only then resets
them as it recreates the child Jobs. Keeping each counter's maximum within an
attempt means a ``failed`` seen in that transitional status stays on the
management JobSet for the new attempt, where the worker shows 0: a counter
that never goes back is worth more to a user watching it than that blip.
"""

from __future__ import annotations

import copy
from typing import Any

from jobrelay.kinds.base import Finish, PodSet, WorkloadKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.job.pod_labels import COMPLETION_INDEX_LABEL
from jobrelay.kinds.mirrors import carried_over, mirror_object, slim_metadata
from jobrelay.kinds.pod_ownership import PodOwnerLabels, name_prefixes
from jobrelay.kinds.pods import QuantityError, pod_requests
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource

COMPLETED = "Completed"
FAILED = "Failed"
SUSPENDED = "Suspended"
_TERMINAL = (COMPLETED, FAILED)
# Counters of one attempt that never go down until the JobSet restarts.
_MONOTONIC_COUNTERS = ("succeeded", "failed")
# Spec fields a mirror follows: the apiserver lets them change on a live JobSet.
_MUTABLE_SPEC_DEFAULTS: dict[str, Any] = {"suspend": False}
# The JobSet controller labels every pod of its child Jobs with the JobSet's name and UID
# (the pods' own controller is a child Job).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_POD_OWNER = PodOwnerLabels((JOBSET_NAME_LABEL,), (JOBSET_UID_LABEL,))
_JOB = (JobKind.ref.group, JobKind.ref.kind)
# The managedBy value the JobSet controller claims as its own.
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
# Only meaningful on the management cluster: managedBy would make the worker's
# JobSet controller skip the mirror; a TTL would let the worker delete the
# mirror before its final status has been copied.
_MANAGER_ONLY_SPEC_FIELDS = ("managedBy", "ttlSecondsAfterFinished")


def _conditions(obj: JsonObj) -> list[JsonObj]:
    status = obj.get("status") or {}
    found = status.get("conditions") or [] if isinstance(status, dict) else []
    # A worker may write anything: only the entries that are objects are conditions.
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _true(conditions: list[JsonObj], condition_type: str) -> JsonObj | None:
    return next(
        (c for c in conditions if c.get("type") == condition_type and c.get("status") == "True"),
        None,
    )


class JobSetKind(WorkloadKind):
    ref = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
    pod_owner_labels = (JOBSET_POD_OWNER,)
    pod_uid_labels = (JOBSET_UID_LABEL,)
    # Its child Jobs are Indexed: their pods carry the Job's completion index.
    pod_index_labels = (COMPLETION_INDEX_LABEL,)

    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        spec = obj.get("spec") or {}
        return {
            "metadata": slim_metadata(obj),
            "spec": {key: value for key, value in spec.items() if key != "replicatedJobs"},
            "status": obj.get("status") or {},
        }

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        # A later run starts the JobSet from the beginning, as a restart would: its
        # restarts so far carry over (its status adds them, and fewer remain).
        del now
        spec = obj.get("spec") or {}
        restarts = int((obj.get("status") or {}).get("restarts") or 0)
        mirror_spec = {
            key: copy.deepcopy(value)
            for key, value in spec.items()
            if key not in _MANAGER_ONLY_SPEC_FIELDS
        }
        policy = mirror_spec.get("failurePolicy") or {}
        if restarts and policy.get("maxRestarts") is not None:
            policy["maxRestarts"] = max(0, int(policy["maxRestarts"]) - restarts)
        return mirror_object(
            self.ref,
            obj,
            mirror_spec,
            controller_name=controller_name,
            origin=origin,
            run=run,
            carried_over={"restarts": restarts} if restarts else None,
        )

    def spec_patch(self, obj: JsonObj, mirror: JsonObj) -> JsonObj | None:
        mine, theirs = obj.get("spec") or {}, mirror.get("spec") or {}
        changes = {
            field: mine.get(field, default)
            for field, default in _MUTABLE_SPEC_DEFAULTS.items()
            if mine.get(field, default) != theirs.get(field, default)
        }
        return {"spec": changes} if changes else None

    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        if self.is_finished(obj):
            return None
        current: JsonObj = obj.get("status") or {}
        if mirror is None:
            desired = dict(current)
            desired["conditions"] = self._suspended_condition(obj, _conditions(obj), now)
        else:
            desired = self._merged(obj, current, _with_carried_restarts(mirror), now)
        desired = {k: v for k, v in desired.items() if v not in (None, [], {})}
        if desired == {k: v for k, v in current.items() if v not in (None, [], {})}:
            return None
        return copy.deepcopy(desired)

    def _merged(self, obj: JsonObj, current: JsonObj, theirs: JsonObj, now: str) -> JsonObj:
        my_restarts = int(current.get("restarts") or 0)
        their_restarts = int(theirs.get("restarts") or 0)
        status = dict(current)
        if their_restarts >= my_restarts:
            status.update(
                {k: v for k, v in theirs.items() if k not in ("conditions", "terminalState")}
            )
            status["replicatedJobsStatus"] = self._replicated(
                current.get("replicatedJobsStatus") or [],
                theirs.get("replicatedJobsStatus") or [],
                same_attempt=their_restarts == my_restarts,
            )
        if "restarts" in current or "restarts" in theirs:
            status["restarts"] = max(my_restarts, their_restarts)
        if current.get("restartsCountTowardsMax") or theirs.get("restartsCountTowardsMax"):
            status["restartsCountTowardsMax"] = max(
                int(current.get("restartsCountTowardsMax") or 0),
                int(theirs.get("restartsCountTowardsMax") or 0),
            )
        if current.get("terminalState") or theirs.get("terminalState"):
            status["terminalState"] = current.get("terminalState") or theirs.get("terminalState")
        # Ours has no True terminal condition (next_status stops once it has one),
        # so the mirror's conditions are the ones to show.
        conditions = copy.deepcopy(theirs.get("conditions") or [])
        status["conditions"] = (
            conditions
            if any(_true(conditions, t) for t in _TERMINAL)
            else self._suspended_condition(obj, conditions, now)
        )
        return status

    @staticmethod
    def _replicated(
        mine: list[JsonObj], theirs: list[JsonObj], *, same_attempt: bool
    ) -> list[JsonObj]:
        if not same_attempt:
            return copy.deepcopy(theirs)
        previous = {entry.get("name"): entry for entry in mine}
        merged = []
        for entry in theirs:
            before = previous.get(entry.get("name")) or {}
            merged.append(
                {
                    **entry,
                    **{
                        counter: max(int(before.get(counter) or 0), int(entry.get(counter) or 0))
                        for counter in _MONOTONIC_COUNTERS
                    },
                }
            )
        return merged

    def _suspended_condition(
        self, obj: JsonObj, conditions: list[JsonObj], now: str
    ) -> list[JsonObj]:
        """Our own spec.suspend, not the mirror's, decides the Suspended condition."""
        suspended = self.is_suspended(obj)
        existing = next((c for c in conditions if c.get("type") == SUSPENDED), None)
        if existing is None and not suspended:
            return list(conditions)
        wanted_status = "True" if suspended else "False"
        if existing is not None and existing.get("status") == wanted_status:
            return list(conditions)
        replacement = {
            "type": SUSPENDED,
            "status": wanted_status,
            "reason": "SuspendedJobs" if suspended else "ResumeJobs",
            "message": "jobset is suspended" if suspended else "jobset is resumed",
            "lastTransitionTime": now,
        }
        return [c for c in conditions if c.get("type") != SUSPENDED] + [replacement]

    def finish(self, obj: JsonObj) -> Finish | None:
        conditions = _conditions(obj)
        for condition_type in _TERMINAL:
            found = _true(conditions, condition_type)
            if found is not None:
                return Finish(
                    succeeded=condition_type == COMPLETED,
                    reason=str(found.get("reason") or ""),
                    message=str(found.get("message") or ""),
                    at=str(found.get("lastTransitionTime") or ""),
                )
        return None

    def is_suspended(self, obj: JsonObj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def has_run(self, obj: JsonObj) -> bool:
        status = obj.get("status") or {}
        return bool(status.get("restarts")) or any(
            entry.get("active") or entry.get("succeeded") or entry.get("failed")
            for entry in status.get("replicatedJobsStatus") or []
        )

    def pod_templates(self, obj: JsonObj) -> list[JsonObj]:
        templates = []
        for replicated in (obj.get("spec") or {}).get("replicatedJobs") or []:
            job_spec = ((replicated or {}).get("template") or {}).get("spec") or {}
            template = job_spec.get("template")
            if isinstance(template, dict):
                templates.append(template)
        return templates

    def pod_sets(self, obj: JsonObj) -> list[PodSet]:
        sets = []
        for replicated in (obj.get("spec") or {}).get("replicatedJobs") or []:
            job_spec = (replicated.get("template") or {}).get("spec") or {}
            parallelism = job_spec.get("parallelism", 1)
            completions = job_spec.get("completions")
            per_job = parallelism if completions is None else min(parallelism, completions)
            pod_spec = (job_spec.get("template") or {}).get("spec") or {}
            name = str(replicated.get("name", ""))
            try:
                requests = pod_requests(pod_spec)
            except QuantityError as error:
                raise error.within(f"replicated job {name[:63]!r}") from None
            sets.append(
                PodSet(
                    name=name,
                    count=int(replicated.get("replicas", 1)) * int(per_job),
                    requests=requests,
                    node_selector=dict(pod_spec.get("nodeSelector") or {}),
                )
            )
        return sets

    # -- its pods on the worker ---------------------------------------------------------

    def pod_selectors(self, mirror: JsonObj) -> tuple[str, ...]:
        return (f"{JOBSET_UID_LABEL}={Meta(mirror).uid}",)

    def pods_at_work(self, obj: JsonObj) -> bool:
        return replicated_jobs_at_work(obj)

    def made_for(self, made: tuple[str, str], name: str) -> tuple[str, ...]:
        # Its child Jobs: <jobset>-<replicated job>-<index>.
        return name_prefixes(name) if made == _JOB else ()

    def completions(self, obj: JsonObj) -> str:
        """Its child Jobs: those succeeded over those wanted."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        wanted = sum(int((r or {}).get("replicas") or 1) for r in spec.get("replicatedJobs") or [])
        done = sum(
            int((r or {}).get("succeeded") or 0) for r in status.get("replicatedJobsStatus") or []
        )
        return f"{done}/{wanted}"


def replicated_jobs_at_work(obj: JsonObj) -> bool:
    """Whether a JobSet's status shows a child Job with active or ready pods."""
    found = (obj.get("status") or {}).get("replicatedJobsStatus")
    return any(
        _positive(entry.get("active")) or _positive(entry.get("ready"))
        for entry in (found if isinstance(found, list) else [])
        if isinstance(entry, dict)
    )


def _positive(value: object) -> bool:
    return isinstance(value, int) and value > 0


def _with_carried_restarts(mirror: JsonObj) -> JsonObj:
    """A later run's status, its restarts counted on top of those of earlier runs."""
    theirs: JsonObj = dict(mirror.get("status") or {})
    earlier = carried_over(mirror).get("restarts")
    if isinstance(earlier, int) and earlier > 0:
        theirs["restarts"] = earlier + int(theirs.get("restarts") or 0)
    return theirs
