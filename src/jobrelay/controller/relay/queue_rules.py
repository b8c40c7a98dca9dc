"""Fleet-wide queues as the controller feeds them, pure: what the manager's caches keep of
Namespaces, PriorityClasses and ResourceQuotas, a workload's priority, the fleet's
allocatable, a workload's verdict from its queue choice, its namespace's quotas and
the latest admission pass, and which waiting workloads ask for preemption.

The arithmetic itself (order, quotas, shares) is :mod:`jobrelay.fairshare`'s; this only
reads the objects and says the verdicts in the words a Warning Event carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobrelay.fairshare.admission_rules import (
    QUEUE_QUOTA_EXCEEDED,
    WAITING_FOR_ROOM,
    AdmissionPass,
)
from jobrelay.fairshare.model import Entry, Fleet, QueueSpec, Reclaim, WithinQueue
from jobrelay.fairshare.preemption_rules import Shortfall
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.types import JsonObj
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.units import resources_of

__all__ = [
    "MAX_NAMESPACE_LABELS",
    "PREEMPTING_PER_PASS",
    "PREEMPTING_PER_QUEUE",
    "Priorities",
    "entry_key",
    "entry_named",
    "fleet_of",
    "limits_of",
    "preempting_candidates",
    "priority_of",
    "slim_namespace",
    "slim_priority_class",
    "slim_resource_quota",
]

# A namespace's labels kept in the cache (queues select namespaces by them): bounded, so a
# namespace labelled by the thousand cannot grow the controller.
MAX_NAMESPACE_LABELS = 64
_MAX_LABEL_LENGTH = 317  # a prefixed key (253 + / + 63) or a value (63)


def slim_namespace(obj: JsonObj) -> JsonObj:
    """A Namespace as the cache keeps it: its name, jobrelay's annotations (its placement
    policy) and its labels (queues' namespace selectors), bounded."""
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
    kept = {k: metadata.get(k) for k in ("name", "resourceVersion")}
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


# At most this many waiting workloads of a queue, and of all queues, ask for preemption
# in one pass (the next ones in their queues' order; the rest ask in the passes after):
# one plan stays a few tens of milliseconds on 10,000 workloads (bench.admission_pass).
PREEMPTING_PER_QUEUE = 8
PREEMPTING_PER_PASS = 32

# What a waiting workload lacks, by the reason it waits.
_SHORTFALLS = {WAITING_FOR_ROOM: Shortfall.ROOM, QUEUE_QUOTA_EXCEEDED: Shortfall.QUOTA}


def preempting_candidates(
    specs: Mapping[str, QueueSpec], entries: list[Entry], result: AdmissionPass
) -> list[tuple[Entry, Shortfall]]:
    """The waiting workloads of queues that may preempt, that lack room or quota (not
    those behind a StrictFIFO head, nor over their namespace's quota): each queue's first
    few in its order, the heads of all queues first."""
    allowed = {
        name for name, spec in specs.items()
        if spec.reclaim is not Reclaim.NEVER or spec.within_queue is not WithinQueue.NEVER
    }  # fmt: skip
    if not allowed:
        return []
    found = []
    for entry in entries:
        holding = result.holding.get(entry.key)
        position = result.positions.get(entry.key, 0)
        if entry.queue in allowed and holding is not None and position <= PREEMPTING_PER_QUEUE:
            shortfall = _SHORTFALLS.get(holding.reason)
            if shortfall is not None:
                found.append((position, entry.queue, entry, shortfall))
    found.sort(key=lambda item: (item[0], item[1]))
    return [(entry, shortfall) for _position, _queue, entry, shortfall in found][
        :PREEMPTING_PER_PASS
    ]


def entry_named(entries: list[Entry], key: str) -> Entry:
    return next(entry for entry in entries if entry.key == key)
