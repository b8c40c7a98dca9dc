"""Builders shared by the admission tests: queues, entries and figures in plain quantities."""

from __future__ import annotations

from jobrelay.admission.queue_model import (
    Entry,
    Fleet,
    LabelSelector,
    QueueingStrategy,
    QueueSpec,
    Reclaim,
    WithinQueue,
)
from jobrelay.admission.shares import QueueFigures
from jobrelay.placement.units import resources_of


def queue(
    name: str,
    *,
    weight: float = 1.0,
    nominal: dict[str, str] | None = None,
    borrowing: dict[str, str] | None = None,
    strict: bool = False,
    reclaim: Reclaim = Reclaim.NEVER,
    within: WithinQueue = WithinQueue.NEVER,
    labels: dict[str, str] | None = None,
) -> QueueSpec:
    return QueueSpec(
        name,
        weight=weight,
        namespace_selector=LabelSelector(labels or {}),
        strategy=QueueingStrategy.STRICT_FIFO if strict else QueueingStrategy.BEST_EFFORT_FIFO,
        nominal=resources_of(nominal or {}),
        borrowing_limit=resources_of(borrowing or {}),
        reclaim=reclaim,
        within_queue=within,
    )


def entry(
    name: str,
    queue: str,
    *,
    cpu: str = "1",
    memory: str | None = None,
    gpu: int = 0,
    priority: int = 0,
    created: int = 0,
    admitted: bool = False,
    namespace: str | None = None,
    limits: dict[str, str] | None = None,
    kind: str = "Job",
    likeness: str = "",
) -> Entry:
    requests = {"cpu": cpu}
    if memory is not None:
        requests["memory"] = memory
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    space = namespace or queue
    return Entry(
        key=f"{kind} {space}/{name}",
        queue=queue,
        namespace=space,
        priority=priority,
        created=f"2026-01-01T00:{created // 60:02d}:{created % 60:02d}Z",
        requests=resources_of(requests),
        limits=resources_of(limits or {}),
        admitted=admitted,
        likeness=likeness,
    )


def fleet(cpu: str = "32", memory: str = "128Gi", gpu: int = 0) -> Fleet:
    values = {"cpu": cpu, "memory": memory}
    if gpu:
        values["nvidia.com/gpu"] = str(gpu)
    return Fleet(resources_of(values))


def queues(*specs: QueueSpec) -> dict[str, QueueSpec]:
    return {spec.name: spec for spec in specs}


def figures(**changed: object) -> QueueFigures:
    """A queue's figures as a pass leaves them (shares not rounded yet)."""
    values: dict[str, object] = {
        "name": "team-a", "weight": 1.0, "usage": {"cpu": 40_000, "memory": 3 * 2**30},
        "demand": {"cpu": 52_500}, "pending": 3, "admitted": 10, "fair_share": 0.2500004,
        "actual_share": 0.3125,
    }  # fmt: skip
    values.update(changed)
    return QueueFigures(**values)  # type: ignore[arg-type]
