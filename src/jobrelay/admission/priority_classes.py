"""Which PriorityClasses a delegated workload may name, pure: priority is the admin's.

A class named ``system-...`` (``system-node-critical``, ``system-cluster-critical``)
is for the cluster's own components: a delegated workload naming one is refused, as
its priority would jump every queue and preempt other tenants' work here and on the
workers. A RelayQueue that lists ``spec.allowedPriorityClasses`` takes only those
classes. A pod template that names no class is not refused: it takes the manager's
global default, which is the admin's choice. A refused workload is held with
``PriorityClassNotAllowed`` (a Warning), gets no mirror, and takes no part in any
admission pass (it neither counts in its queue's order nor preempts anyone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from jobrelay.admission.queue_model import QueueHold, QueueSpec
from jobrelay.vocabulary.quantity import shown

__all__ = [
    "PRIORITY_CLASS_NOT_ALLOWED",
    "SYSTEM_PRIORITY_PREFIX",
    "priority_class_refusal",
    "stated_priority_classes",
]

PRIORITY_CLASS_NOT_ALLOWED: Final = "PriorityClassNotAllowed"
# Kubernetes reserves this prefix for its own classes (the apiserver refuses others).
SYSTEM_PRIORITY_PREFIX: Final = "system-"


def stated_priority_classes(templates: Iterable[Any]) -> tuple[str, ...]:
    """The PriorityClass names a workload's pod templates state, each once, in order."""
    names: dict[str, None] = {}
    for template in templates:
        spec = (template.get("spec") if isinstance(template, Mapping) else None) or {}
        name = spec.get("priorityClassName") if isinstance(spec, Mapping) else None
        if isinstance(name, str) and name:
            names.setdefault(name, None)
    return tuple(names)


def priority_class_refusal(classes: Iterable[str], queue: QueueSpec | None) -> QueueHold | None:
    """Why a workload whose templates name ``classes`` may not run (None: it may);
    ``queue``: the RelayQueue it waits in (None: none)."""
    allowed = queue.allowed_priority_classes if queue is not None else None
    for name in classes:
        if name.startswith(SYSTEM_PRIORITY_PREFIX):
            return QueueHold(
                PRIORITY_CLASS_NOT_ALLOWED,
                f"PriorityClass {shown(name)} is the cluster's own (system-): a delegated "
                f"workload may not use it; name another class, or none",
            )
        if allowed is not None and name not in allowed:
            listed = ", ".join(sorted(allowed)[:10]) or "none"
            more = f" and {len(allowed) - 10} more" if len(allowed) > 10 else ""
            assert queue is not None
            return QueueHold(
                PRIORITY_CLASS_NOT_ALLOWED,
                f"RelayQueue {queue.name} does not allow PriorityClass {shown(name)} (it "
                f"allows {listed}{more}): name one of those, or ask an admin",
            )
    return None
