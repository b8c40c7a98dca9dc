"""The mirror: the plain Job that runs a management Job on a worker cluster.

A mirror must look to the worker like any Job a user created there, so the
worker's built-in controller runs it; and it must carry enough of its origin
(labels and annotations) that a restarted jobrelay can find the management Job
it belongs to without any state of its own.
"""

from __future__ import annotations

import copy
from typing import Any

from jobrelay.kinds.job.carry import carry_of, mirror_carry, remaining_spec
from jobrelay.kinds.job.pod_labels import GENERATED_JOB_LABELS
from jobrelay.kinds.job.spec import is_elastic_indexed
from jobrelay.kinds.mirrors import LAST_APPLIED_ANNOTATION, is_mirror_of, is_ours, mirror_metadata
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.merge_patch import merge_patch

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "build_mirror",
    "is_mirror_of",
    "is_ours",
    "mirror_spec_patch",
]

# Spec fields that belong to the management cluster only: managedBy would make
# the worker's controller skip the mirror, the selector and manualSelector name
# the management Job's controller-uid, and a TTL would let the worker delete
# the mirror before its final status has been copied back.
_MANAGER_ONLY_SPEC_FIELDS = ("managedBy", "selector", "manualSelector", "ttlSecondsAfterFinished")

# Spec fields the apiserver lets change on an existing Job, kept in step on the
# mirror. The value is the default the apiserver fills in, so that an absent
# field and its default compare equal; None means absence itself is meaningful
# (no deadline, no limit), and a patch then sets the field to null.
_MUTABLE_SPEC_DEFAULTS: dict[str, Any] = {
    "suspend": False,
    "parallelism": 1,
    "activeDeadlineSeconds": None,
    "maxFailedIndexes": None,
}
# Mutable fields whose default depends on other fields (backoffLimit is 6, or
# unlimited with backoffLimitPerIndex): followed only when the management Job
# states them, which a Job read back from the apiserver always does.
_MUTABLE_SPEC_DEFAULTED_ELSEWHERE = ("backoffLimit",)
# Pod template fields the apiserver lets change on a suspended Job that never
# ran (mutable scheduling directives, KEP-2926; KEP-5440 builds on them).
SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations", "schedulingGates")


def build_mirror(
    job: JsonObj, *, controller_name: str, origin: str, run: int = 1, now: str = ""
) -> JsonObj:
    """The mirror Job to create on a worker for run ``run`` of the management Job ``job``.

    Same namespace and name; the user's labels and annotations without the
    generated ones; origin labels and annotations added; the spec without the
    management-only fields. When the Job's status shows earlier work (an
    earlier run, or this run's mirror lost), the mirror carries that record
    and asks only for what remains (carry.py); ``now`` dates the record.
    ``job`` is not modified.
    """
    carry = carry_of(job, now=now)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": mirror_metadata(
            job,
            controller_name=controller_name,
            origin=origin,
            dropped_labels=GENERATED_JOB_LABELS,
            run=run,
            carried_over=carry.to_json(),
        ),
        "spec": _mirror_spec(remaining_spec(job.get("spec") or {}, carry)),
    }


def mirror_spec_patch(job: JsonObj, mirror: JsonObj) -> JsonObj | None:
    """A JSON merge patch bringing the mirror's mutable spec fields in line with ``job``.

    Only fields the apiserver accepts changes to are considered; ``completions``
    only for an elastic Indexed Job (``completions == parallelism``), where the
    apiserver requires both to change together; and, while both are suspended
    and the mirror has not started, the pod template's scheduling directives
    (KEP-2926 / KEP-5440). None when nothing differs.
    """
    # A mirror made after earlier runs asks only for what remains: compare with that.
    job_spec = remaining_spec(job.get("spec") or {}, mirror_carry(mirror))
    mirror_spec = mirror.get("spec") or {}
    changes: JsonObj = {
        field: job_spec.get(field, default)
        for field, default in _MUTABLE_SPEC_DEFAULTS.items()
        if job_spec.get(field, default) != mirror_spec.get(field, default)
    }
    changes.update(
        {
            field: job_spec[field]
            for field in _MUTABLE_SPEC_DEFAULTED_ELSEWHERE
            if job_spec.get(field) is not None and job_spec[field] != mirror_spec.get(field)
        }
    )
    if is_elastic_indexed(job_spec) and job_spec["completions"] != mirror_spec.get("completions"):
        changes["completions"] = job_spec["completions"]
        changes["parallelism"] = job_spec["parallelism"]
    template = _scheduling_patch(job, mirror)
    if template:
        changes["template"] = template
    return {"spec": changes} if changes else None


def _scheduling_patch(job: JsonObj, mirror: JsonObj) -> JsonObj:
    """The template edits a suspended, never-started Job accepts, as a merge patch."""
    status = mirror.get("status")  # a worker's: anything may be there
    mirror_started = isinstance(status, dict) and bool(status.get("startTime"))
    if not (
        (job.get("spec") or {}).get("suspend")
        and (mirror.get("spec") or {}).get("suspend")
        and not mirror_started
    ):
        return {}
    wanted = scheduling_directives((job.get("spec") or {}).get("template") or {})
    current = scheduling_directives((mirror.get("spec") or {}).get("template") or {})
    return merge_patch(current, wanted)


def scheduling_directives(template: JsonObj) -> JsonObj:
    """The parts of a pod template that scheduling edits may change, user labels only."""
    metadata = template.get("metadata") or {}
    spec = template.get("spec") or {}
    kept_metadata = {
        "labels": _user_labels(metadata.get("labels")),
        "annotations": dict(metadata.get("annotations") or {}),
    }
    kept_spec = {field: spec[field] for field in SCHEDULING_FIELDS if field in spec}
    return {"metadata": kept_metadata, "spec": kept_spec}


def _user_labels(labels: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (labels or {}).items() if k not in GENERATED_JOB_LABELS}


def _mirror_spec(spec: JsonObj) -> JsonObj:
    mirror_spec = {
        k: copy.deepcopy(v) for k, v in spec.items() if k not in _MANAGER_ONLY_SPEC_FIELDS
    }
    template_metadata = (mirror_spec.get("template") or {}).get("metadata")
    if template_metadata and "labels" in template_metadata:
        labels = _user_labels(template_metadata["labels"])
        if labels:
            template_metadata["labels"] = labels
        else:
            del template_metadata["labels"]
    return mirror_spec
