"""Which RelayQueue each workload `jobrelay get` lists waits in, and its place there
(pure: no I/O, no clock).

The same rules as the controller's admission plan: the queue by
:func:`jobrelay.admission.queue_choice.queue_name` (the panel's too), priorities by the
manager's PriorityClasses (:mod:`jobrelay.admission.workload_reads`), the order by
:func:`jobrelay.admission.fair_order.positions`. Only pending workloads take a place:
not placed, not finished, not suspended, not being deleted. What the user may not read
is left out, never guessed wrong: without RelayQueues or Namespaces only the label
``jobrelay.dev/queue`` names a queue; without PriorityClasses every priority is 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from jobrelay.admission.fair_order import positions
from jobrelay.admission.queue_choice import queue_name
from jobrelay.admission.queue_model import Entry, QueueSpec
from jobrelay.admission.workload_reads import Priorities, entry_key, priority_of
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import QUEUE_LABEL
from jobrelay.vocabulary.placement import placement_of

__all__ = ["QueueKnowledge", "QueuePlace", "is_pending", "places", "queue_of"]


@dataclass(frozen=True, slots=True)
class QueueKnowledge:
    """What the CLI could read of the manager for placing workloads in queues."""

    # The RelayQueues by name; None: not readable (the label alone names a queue).
    queues: Mapping[str, QueueSpec] | None = None
    # Every namespace's labels; None: not readable (the label alone names a queue).
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    priorities: Priorities = field(default_factory=Priorities)


class QueuePlace(NamedTuple):
    """A workload's queue and, while it waits there, its place (1 = next)."""

    queue: str
    position: int | None = None


def queue_of(obj: Mapping[str, Any], known: QueueKnowledge) -> str:
    """The queue a workload belongs to as far as ``known`` tells; "" for none. A label
    naming a queue that does not exist or does not admit the namespace: no queue (the
    controller holds it with QueueNotFound or QueueNotAllowed)."""
    meta = Meta(obj)
    named = meta.label(QUEUE_LABEL) or None
    if known.queues is None or known.namespace_labels is None:
        if named is None or (known.queues is not None and named not in known.queues):
            return ""
        return named
    labels = known.namespace_labels.get(meta.namespace, {})
    return queue_name(named, meta.namespace, labels, known.queues)


def is_pending(kind: WorkloadKind, obj: Mapping[str, Any]) -> bool:
    """Waiting to be placed: not placed, not finished, not suspended, not being deleted."""
    body = dict(obj)
    if Meta(obj).deletion_timestamp or placement_of(obj):
        return False
    return not kind.is_finished(body) and not kind.is_suspended(body)


def _priority(kind: WorkloadKind, obj: Mapping[str, Any], priorities: Priorities) -> int:
    try:
        return priority_of(kind.pod_templates(dict(obj)), priorities)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return 0  # as the controller reads a template it cannot


def places(
    workloads: Iterable[tuple[WorkloadKind, Mapping[str, Any]]], known: QueueKnowledge
) -> dict[str, QueuePlace]:
    """The place of every workload in ``workloads`` that belongs to a queue, by its
    entry key (``Kind namespace/name``); a pending one's position counts the pending
    ones of its queue among ``workloads``."""
    found: dict[str, QueuePlace] = {}
    entries: list[Entry] = []
    for kind, obj in workloads:
        queue = queue_of(obj, known)
        if not queue:
            continue
        meta = Meta(obj)
        key = entry_key(WorkloadKey(kind.name, f"{meta.namespace}/{meta.name}"), kind)
        found[key] = QueuePlace(queue)
        if is_pending(kind, obj):
            priority = _priority(kind, obj, known.priorities)
            created = str(meta.creation_timestamp or "")
            entries.append(Entry(key, queue, meta.namespace, priority, created, requests={}))
    for key, position in positions(entries).items():
        found[key] = QueuePlace(found[key].queue, position)
    return found
