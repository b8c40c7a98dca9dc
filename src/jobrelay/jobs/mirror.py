"""The mirror: the plain Job that runs a management Job on a worker cluster.

A mirror must look to the worker like any Job a user created there, so the
worker's built-in controller runs it; and it must carry enough of its origin
(labels and annotations) that a restarted jobrelay can find the management Job
it belongs to without any state of its own.
"""

from __future__ import annotations

import copy
from typing import Any

from jobrelay.jobs.naming import (
    CONTROLLER_ANNOTATION,
    GENERATED_JOB_LABELS,
    MIRROR_LABEL,
    ORIGIN_CLUSTER_ANNOTATION,
    ORIGIN_UID_LABEL,
    controller_label_value,
)
from jobrelay.jobs.spec import is_elastic_indexed
from jobrelay.jobs.types import JsonObj

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

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


def build_mirror(job: JsonObj, *, controller_name: str, origin: str) -> JsonObj:
    """The mirror Job to create on a worker for the management Job ``job``.

    Same namespace and name; the user's labels and annotations without the
    generated ones; origin labels and annotations added; the spec without the
    management-only fields. ``job`` is not modified.
    """
    metadata = job.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "labels": {
                **_user_labels(metadata.get("labels")),
                MIRROR_LABEL: controller_label_value(controller_name),
                ORIGIN_UID_LABEL: metadata["uid"],
            },
            "annotations": {
                **_user_annotations(metadata.get("annotations")),
                CONTROLLER_ANNOTATION: controller_name,
                ORIGIN_CLUSTER_ANNOTATION: origin,
            },
        },
        "spec": _mirror_spec(job.get("spec") or {}),
    }


def is_ours(mirror: JsonObj, controller_name: str) -> bool:
    """Whether a worker Job is a mirror made by the controller of that name."""
    labels = (mirror.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(MIRROR_LABEL) == controller_label_value(controller_name))


def is_mirror_of(mirror: JsonObj, job: JsonObj, controller_name: str) -> bool:
    """Whether a worker Job is our mirror of this very management Job (not of a namesake).

    The management Job's UID, not its name, decides: a Job deleted and created
    again under the same name must not inherit the old one's mirror.
    """
    labels = (mirror.get("metadata") or {}).get("labels") or {}
    uid = (job.get("metadata") or {}).get("uid")
    return (
        is_ours(mirror, controller_name) and uid is not None and labels.get(ORIGIN_UID_LABEL) == uid
    )


def mirror_spec_patch(job: JsonObj, mirror: JsonObj) -> JsonObj | None:
    """A JSON merge patch bringing the mirror's mutable spec fields in line with ``job``.

    Only fields the apiserver accepts changes to are considered; ``completions``
    only for an elastic Indexed Job (``completions == parallelism``), where the
    apiserver requires both to change together. None when nothing differs.
    """
    job_spec = job.get("spec") or {}
    mirror_spec = mirror.get("spec") or {}
    changes = {
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
    return {"spec": changes} if changes else None


def _user_labels(labels: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (labels or {}).items() if k not in GENERATED_JOB_LABELS}


def _user_annotations(annotations: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (annotations or {}).items() if k != LAST_APPLIED_ANNOTATION}


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
