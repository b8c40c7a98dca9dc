"""What every mirror carries, whatever its kind: the marks that tie it to its origin.

A restarted controller keeps no state, so a mirror must say on the worker
which controller made it and from which management cluster (its origin), as
labels to select on, and for which management object (its UID, so a namesake
created later never inherits it). A mirror is ours only when all of them match:
another manager sharing the worker may run a controller of the same name.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import annotations_of, labels_of, uid_of
from jobrelay.vocabulary.names import (
    CARRIED_OVER_ANNOTATION,
    CONTROLLER_ANNOTATION,
    MIRROR_LABEL,
    ORIGIN_LABEL,
    ORIGIN_UID_LABEL,
    RUN_ANNOTATION,
    controller_label_value,
    is_own_mark,
)
from jobrelay.vocabulary.resource import Resource

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


def mirror_metadata(
    obj: JsonObj,
    *,
    controller_name: str,
    origin: str,
    dropped_labels: Collection[str] = (),
    run: int = 1,
    carried_over: JsonObj | None = None,
) -> JsonObj:
    """The mirror's metadata: same namespace and name, the user's labels and
    annotations (less ``dropped_labels`` and every jobrelay.dev/ key but the
    user-facing ones), the origin marks, the run it is, and what earlier runs did
    (``carried_over``), when any.

    jobrelay's own marks on a mirror are jobrelay's alone: one a user wrote on the
    management object (a ``carried-over`` claiming work done, a ``run``) is
    dropped, never passed on to be read back as jobrelay's record.
    """
    metadata = obj.get("metadata") or {}
    marks = {RUN_ANNOTATION: str(run)}
    if carried_over:
        marks[CARRIED_OVER_ANNOTATION] = json.dumps(carried_over, sort_keys=True)
    return {
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "labels": {
            **{
                k: v
                for k, v in (metadata.get("labels") or {}).items()
                if k not in dropped_labels and not is_own_mark(k)
            },
            MIRROR_LABEL: controller_label_value(controller_name),
            ORIGIN_LABEL: origin,
            ORIGIN_UID_LABEL: metadata["uid"],
        },
        "annotations": {
            **{
                k: v
                for k, v in (metadata.get("annotations") or {}).items()
                if k != LAST_APPLIED_ANNOTATION and not is_own_mark(k)
            },
            CONTROLLER_ANNOTATION: controller_name,
            **marks,
        },
    }


def run_of(mirror: JsonObj) -> int:
    """Which run of its management object a mirror is (mirrors from before runs were
    numbered, or with a mangled mark, count as the first)."""
    try:
        return max(1, int(annotations_of(mirror).get(RUN_ANNOTATION) or 1))
    except (ValueError, TypeError, OverflowError):
        return 1


def carried_over(mirror: JsonObj) -> dict[str, Any]:
    """What earlier runs did, as recorded on the mirror when it was created (``{}``: nothing)."""
    text = annotations_of(mirror).get(CARRIED_OVER_ANNOTATION)
    if not text:
        return {}
    try:
        value = json.loads(str(text))
    except (ValueError, RecursionError):  # a worker may write "[[[[…" 100 000 deep
        return {}
    return value if isinstance(value, dict) else {}


def is_ours(mirror: JsonObj, controller_name: str, origin: str) -> bool:
    """Whether a worker object is a mirror made by the controller of that name and origin."""
    # labels_of tolerates whatever a worker wrote there (it may write anything).
    labels = labels_of(mirror)
    return bool(
        labels.get(MIRROR_LABEL) == controller_label_value(controller_name)
        and labels.get(ORIGIN_LABEL) == origin
    )


def origin_uid(mirror: JsonObj) -> str | None:
    """The UID of the management object a mirror was made for."""
    value = labels_of(mirror).get(ORIGIN_UID_LABEL)
    return str(value) if value else None


def is_mirror_of(mirror: JsonObj, obj: JsonObj, controller_name: str, origin: str) -> bool:
    """Whether a worker object is our mirror of this very management object (not of a namesake).

    The UID, not the name, decides: an object deleted and created again under
    the same name must not inherit the old one's mirror.
    """
    uid = uid_of(obj)
    return is_ours(mirror, controller_name, origin) and bool(uid) and origin_uid(mirror) == uid


def slim_metadata(obj: JsonObj) -> JsonObj:
    """The metadata a cached mirror keeps: identity, marks and versions."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    keep = (
        "name",
        "namespace",
        "uid",
        "labels",
        "annotations",
        "resourceVersion",
        "deletionTimestamp",
        # Worker Events older than the mirror are not about it (fleet/workerevents_rules.py).
        "creationTimestamp",
    )
    return {key: metadata[key] for key in keep if key in metadata}


def mirror_object(
    ref: Resource,
    obj: JsonObj,
    spec: JsonObj,
    *,
    controller_name: str,
    origin: str,
    run: int,
    carried_over: JsonObj | None = None,
) -> JsonObj:
    """A mirror of kind ``ref``: ``spec`` under the metadata of :func:`mirror_metadata`."""
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": mirror_metadata(
            obj,
            controller_name=controller_name,
            origin=origin,
            run=run,
            carried_over=carried_over,
        ),
        "spec": spec,
    }


def slim_suspendable(obj: JsonObj) -> JsonObj:
    """A cached mirror of a kind whose only mutable spec field is ``spec.suspend``."""
    spec = obj.get("spec") or {}
    return {
        "metadata": slim_metadata(obj),
        "spec": {"suspend": spec["suspend"]} if "suspend" in spec else {},
        "status": obj.get("status") or {},
    }
