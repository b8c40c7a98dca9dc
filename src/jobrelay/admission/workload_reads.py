"""What admission reads of the manager's objects, pure: what its caches keep of Namespaces,
PriorityClasses and ResourceQuotas, a workload's priority and limits, the fleet's
allocatable, and a workload as every pass and verdict read it (:class:`WorkloadRead`,
made once per resourceVersion by the caller's cache).

The arithmetic itself (order, quotas, shares) is the other modules' of this package;
this only reads the objects.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobrelay.admission.priority_classes import stated_priority_classes
from jobrelay.admission.queue_model import Entry, Fleet
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import Invalid, Workload, read_workload
from jobrelay.vocabulary.interning import SHARED_TREES, intern_text
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    PLACEMENTS_ANNOTATION,
    PREEMPTED_BY_ANNOTATION,
    QUEUE_LABEL,
    REDISPATCH_ANNOTATION,
    REDISPATCH_NEVER,
)
from jobrelay.vocabulary.placement import mirror_records, placement_of

__all__ = [
    "MAX_NAMESPACE_LABELS",
    "Priorities",
    "WorkloadRead",
    "entry_key",
    "fit_likeness",
    "fleet_of",
    "limits_of",
    "preset_placement",
    "priority_of",
    "read_for_admission",
    "released",
    "slim_namespace",
    "slim_priority_class",
    "slim_resource_quota",
]

# A namespace's labels kept in the cache (queues select namespaces by them): bounded, so a
# namespace labelled by the thousand cannot grow the controller.
MAX_NAMESPACE_LABELS = 64
_MAX_LABEL_LENGTH = 317  # a prefixed key (253 + / + 63) or a value (63)


def slim_namespace(obj: JsonObj) -> JsonObj:
    """A Namespace as the cache keeps it: its name and UID, jobrelay's annotations (its
    placement policy) and its labels (queues' namespace selectors), bounded."""
    metadata = obj.get("metadata") or {}
    annotations = {
        k: v
        for k, v in (metadata.get("annotations") or {}).items()
        if isinstance(k, str) and k.startswith("jobrelay.dev/")
    }
    labels: dict[str, str] = {}
    for k, v in (metadata.get("labels") or {}).items():
        if len(labels) >= MAX_NAMESPACE_LABELS:
            break
        if isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= _MAX_LABEL_LENGTH:
            labels[k] = v
    kept = {k: metadata.get(k) for k in ("name", "resourceVersion", "uid")}
    return {"metadata": {**kept, "annotations": annotations, "labels": labels}}


def slim_priority_class(obj: JsonObj) -> JsonObj:
    """A PriorityClass as the cache keeps it: its name, value and whether it is the default."""
    metadata = obj.get("metadata") or {}
    return {
        "metadata": {k: metadata.get(k) for k in ("name", "resourceVersion")},
        "value": obj.get("value"),
        "globalDefault": obj.get("globalDefault") is True,
    }


def slim_resource_quota(obj: JsonObj) -> JsonObj:
    """A ResourceQuota as the cache keeps it: where it is and its hard values."""
    metadata = obj.get("metadata") or {}
    hard = (obj.get("spec") or {}).get("hard")
    return {
        "metadata": {k: metadata.get(k) for k in ("name", "namespace", "resourceVersion")},
        "spec": {"hard": dict(hard) if isinstance(hard, Mapping) else {}},
    }


@dataclass(frozen=True, slots=True)
class Priorities:
    """The manager's PriorityClasses: value by name, and the global default's (0 without)."""

    values: Mapping[str, int] = field(default_factory=dict)
    default: int = 0

    @classmethod
    def of(cls, classes: Iterable[JsonObj]) -> Priorities:
        values: dict[str, int] = {}
        defaults: list[int] = []
        for obj in classes:
            name = (obj.get("metadata") or {}).get("name")
            value = obj.get("value")
            if not isinstance(name, str) or not isinstance(value, int) or isinstance(value, bool):
                continue
            values[name] = value
            if obj.get("globalDefault") is True:
                defaults.append(value)
        # Kubernetes allows one global default; with several (a race), the highest counts,
        # as its admission plugin does.
        return cls(values, max(defaults, default=0))


def priority_of(templates: Iterable[Any], priorities: Priorities) -> int:
    """A workload's priority: the highest value its pod templates' priorityClassName names
    on the manager (a name unknown there: 0, as a pod of it would be refused anyway); a
    template without one takes the global default's, as its pod would."""
    found: list[int] = []
    for template in templates:
        spec = (template.get("spec") if isinstance(template, Mapping) else None) or {}
        name = spec.get("priorityClassName") if isinstance(spec, Mapping) else None
        if isinstance(name, str) and name:
            found.append(priorities.values.get(name, 0))
        else:
            found.append(priorities.default)
    return max(found, default=priorities.default)


def fleet_of(capacities: Iterable[WorkerCapacity]) -> Fleet:
    """The fleet's real capacity: allocatable summed over the schedulable nodes of the
    workers given (the connected, uncordoned ones, whose capacity is known)."""
    total: dict[str, int] = {}
    for capacity in capacities:
        allocatable, _used = capacity.usable_totals
        for resource, quantity in allocatable.items():
            total[resource] = total.get(resource, 0) + quantity
    return Fleet(total)


def entry_key(key: WorkloadKey, kind: WorkloadKind) -> str:
    """A workload's key in fleet-wide queueing: ``Kind namespace/name`` (a ResourceQuota's
    ``count/jobs.batch`` counts the ``Job`` ones)."""
    return f"{kind.ref.kind} {key.key}"


def fit_likeness(kind_name: str, workload: Workload) -> str:
    """What placement reads of a workload of kind ``kind_name``, as one interned text (its
    kind and ``Workload.likeness``). Placement fits workloads of one namespace (one
    policy) and one fit likeness alike: each kind has its room, and the likeness shows
    every field placement reads. Interned whatever its length, as ``Workload.likeness``
    is: one text for a template's thousands of workloads, freed with the last."""
    return sys.intern(f"{kind_name} {workload.likeness}")


def limits_of(kind: WorkloadKind, obj: JsonObj) -> dict[str, int]:
    """What all a workload's pods at once limit (a ResourceQuota's ``limits.*`` counts
    them): per pod the containers' limits summed, or an init container's when larger,
    times the pods of its template. Empty when the kind cannot pair counts with templates
    or nothing is limited; ValueError (QuantityError) on an unreadable quantity."""
    sets, templates = kind.pod_sets(obj), kind.pod_templates(obj)
    if len(sets) != len(templates):
        return {}
    total: dict[str, int] = {}
    for pod_set, template in zip(sets, templates, strict=True):
        spec = template.get("spec") or {}
        per_pod: dict[str, int] = {}
        for container in spec.get("containers") or []:
            for resource, value in _limits(container).items():
                per_pod[resource] = per_pod.get(resource, 0) + value
        for container in spec.get("initContainers") or []:
            for resource, value in _limits(container).items():
                per_pod[resource] = max(per_pod.get(resource, 0), value)
        for resource, value in per_pod.items():
            total[resource] = total.get(resource, 0) + value * pod_set.count
    return total


def _limits(container: Any) -> dict[str, int]:
    limits = (
        ((container.get("resources") or {}).get("limits") or {})
        if isinstance(container, Mapping)
        else {}
    )
    return resources_of(limits) if isinstance(limits, Mapping) else {}


@dataclass(frozen=True, slots=True)
class WorkloadRead:
    """A workload as admission reads it: made once per resourceVersion (and priorities)."""

    # Its key, made once with the read: a pass over every cached workload finds the read
    # by the cache's own ``namespace/name`` and takes the key from it.
    key: WorkloadKey
    # (resourceVersion, the priorities' version) it was read at.
    version: tuple[str, int]
    # As placement reads it, and its queue entry (in no queue yet); None when placement
    # cannot read its templates (placement says why).
    workload: Workload | None
    entry: Entry | None
    # What its object says: finished or being deleted, placed, suspended, and the queue
    # its label names.
    gone: bool = False
    cluster: str = ""  # where it is placed ("": not placed)
    suspended: bool = False
    named: str | None = None
    # The workload that preempted it (its mark), and whether it asks to run at most once.
    preempted_by: str = ""
    at_most_once: bool = False
    # The PriorityClasses its pod templates name (each once).
    priority_classes: tuple[str, ...] = ()
    # Placed by whoever created it, not by jobrelay (:func:`preset_placement`).
    preset: bool = False
    # The cached object it read: caches replace an object that changes, never change it
    # in place, so the same object reads the same (a pass asks without reading it again).
    source: JsonObj | None = field(default=None, compare=False, repr=False)

    @property
    def placed(self) -> bool:
        return bool(self.cluster)


def read_for_admission(
    key: WorkloadKey, kind: WorkloadKind, obj: JsonObj, priorities: Priorities, version: int = 0
) -> WorkloadRead:
    """``obj`` as admission reads it; ``version``: the priorities' (a cache's key). Kept per
    held workload: what many workloads read alike (the placement read of one template,
    a request total, a namespace) is one shared object."""
    meta = Meta(obj)
    said = WorkloadRead(
        key, (str(meta.resource_version), version), None, None,
        gone=bool(meta.deletion_timestamp) or kind.is_finished(obj),
        cluster=placement_of(obj), suspended=kind.is_suspended(obj),
        named=meta.label(QUEUE_LABEL),
        preempted_by=(meta.annotation(PREEMPTED_BY_ANNOTATION) or "").strip(),
        at_most_once=(meta.annotation(REDISPATCH_ANNOTATION) or "").strip() == REDISPATCH_NEVER,
        preset=preset_placement(obj), source=obj,
    )  # fmt: skip
    workload = read_workload(kind, obj)
    if isinstance(workload, Invalid):
        return said
    workload = SHARED_TREES.share_encoded(workload)
    try:
        templates = kind.pod_templates(obj)
        priority = priority_of(templates, priorities)
        classes = stated_priority_classes(templates)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        priority, classes = 0, ()
    try:
        limits = limits_of(kind, obj)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        limits = {}  # its requests were read: placement says what else is wrong
    entry = Entry(
        key=entry_key(key, kind),
        queue="",
        namespace=intern_text(key.namespace),
        priority=priority,
        created=intern_text(str(meta.creation_timestamp or "")),
        requests=SHARED_TREES.share_encoded(workload.demand),
        limits=SHARED_TREES.share_encoded(limits),
        likeness=fit_likeness(key.kind, workload),
    )
    return dataclasses.replace(said, workload=workload, entry=entry, priority_classes=classes)


def preset_placement(obj: JsonObj | None) -> bool:
    """Whether the object's placement is a preset, not jobrelay's: its cluster annotation
    is set without the placement history jobrelay writes with every placement, and no
    mirror was ever recorded. (Whether a mirror runs is the caller's to ask: an object
    placed before the history was kept has one.) A preset passes admission like an
    unplaced workload before any mirror is created: queue, quota, priority, policy."""
    meta = Meta(obj)
    return (
        bool(placement_of(obj))
        and meta.annotation(PLACEMENTS_ANNOTATION) is None
        and not mirror_records(obj)
    )


def released(kind: WorkloadKind, old: JsonObj, new: JsonObj | None) -> bool:
    """Whether a watch event frees what a workload took of its queue and quota (it
    finished, or went): a pass may admit others (no worker's capacity need change, the
    Job's own status comes last)."""
    if new is None:
        return True
    return kind.is_finished(new) and not kind.is_finished(old)
