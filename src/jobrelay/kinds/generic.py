"""Any workload CRD with ``spec.managedBy``: the adapter for kinds jobrelay knows nothing of.

(Or with ``spec.runPolicy.managedBy``, as ``--managed-by-field`` says.) The
mirror is the object less that field, its status and server-set
metadata; the status is copied as it stands; the workload is finished once a
condition of one of the configured types is True; ``spec.suspend``, when the
kind has it, is followed. Like MultiKueue's external frameworks: enough for a
CRD whose controller honours managedBy, with nothing kind-specific to trust.
Its pods on a worker are those its mirror controls (owner reference, by UID),
found among the namespace's: it names no label.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from jobrelay.kinds.base import SPEC_MANAGED_BY, Finish, WorkloadKind, without_path
from jobrelay.kinds.jobset import replicated_jobs_at_work
from jobrelay.kinds.mirrors import mirror_object, slim_suspendable
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.resource import Resource

DEFAULT_FINISHED_CONDITIONS = ("Complete", "Failed", "Succeeded")
# Finishing condition types that mean failure; any other finishing type is a success.
FAILURE_CONDITIONS = frozenset({"Failed", "Failure", "Error", "Errored", "Aborted"})


class GenericKind(WorkloadKind):
    def __init__(
        self,
        ref: Resource,
        finished_conditions: Iterable[str] = DEFAULT_FINISHED_CONDITIONS,
        managed_by_field: tuple[str, ...] = SPEC_MANAGED_BY,
    ) -> None:
        self.ref = ref
        self.managed_by_field = managed_by_field
        self.finished_conditions = tuple(finished_conditions)
        if not self.finished_conditions:
            raise ValueError(f"{ref.name}: at least one finishing condition type is needed")

    def slim_mirror(self, obj: JsonObj) -> JsonObj:
        return slim_suspendable(obj)

    def build_mirror(
        self, obj: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
    ) -> JsonObj:
        # Nothing is carried over: a later run starts the workload from the beginning
        # (its status still never goes backwards).
        del now
        # The worker's own controller of the kind runs the mirror: the field goes.
        spec = without_path(copy.deepcopy(obj.get("spec") or {}), self.managed_by_field[1:])
        return mirror_object(
            self.ref, obj, spec, controller_name=controller_name, origin=origin, run=run
        )

    def spec_patch(self, obj: JsonObj, mirror: JsonObj) -> JsonObj | None:
        mine = obj.get("spec") or {}
        if "suspend" not in mine:
            return None
        if bool(mine["suspend"]) == bool((mirror.get("spec") or {}).get("suspend")):
            return None
        return {"spec": {"suspend": bool(mine["suspend"])}}

    def next_status(
        self, obj: JsonObj, mirror: JsonObj | None, *, now: str, gone: bool = False
    ) -> JsonObj | None:
        del now
        if mirror is None or self.is_finished(obj):
            return None
        theirs: JsonObj = mirror.get("status") or {}
        if not isinstance(theirs, dict):  # decide reports it: StatusNotCopied
            raise TypeError(f"the status is a {type(theirs).__name__}, not an object")
        if not theirs or theirs == (obj.get("status") or {}):
            return None
        return copy.deepcopy(theirs)

    def finish(self, obj: JsonObj) -> Finish | None:
        status = obj.get("status") or {}
        conditions = status.get("conditions") if isinstance(status, dict) else None
        for condition in conditions if isinstance(conditions, list) else []:
            if (
                isinstance(condition, dict)
                and condition.get("type") in self.finished_conditions
                and condition.get("status") == "True"
            ):
                return Finish(
                    succeeded=condition.get("type") not in FAILURE_CONDITIONS,
                    reason=str(condition.get("reason") or condition.get("type")),
                    message=str(condition.get("message") or ""),
                    at=str(condition.get("lastTransitionTime") or ""),
                )
        return None

    def is_suspended(self, obj: JsonObj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def has_run(self, obj: JsonObj) -> bool:
        return bool(obj.get("status"))

    def pods_at_work(self, obj: JsonObj) -> bool:
        # Nothing kind-specific to read: the counters a Job-like status has, by convention.
        status = obj.get("status")
        if not isinstance(status, dict):
            return False
        return any(
            isinstance(value, int) and not isinstance(value, bool) and value > 0
            for value in (status.get(k) for k in ("active", "ready", "succeeded"))
        ) or replicated_jobs_at_work(obj)
