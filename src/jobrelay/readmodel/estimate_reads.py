"""Every waiting workload's estimated start, from what a reader could list: the workloads
(waiting, running and finished), the RelayQueues and Namespaces (``QueueKnowledge``) and
the WorkerClusters' capacity figures. Pure: the simulation is
:func:`jobrelay.admission.start_estimate.estimate_starts`; this only reads the objects
and says the answer in words (`jobrelay get -o wide`, `describe`, `simulate`, the API).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobrelay.admission.queue_model import QueueSpec
from jobrelay.admission.queue_places import QueueKnowledge, queue_of
from jobrelay.admission.start_estimate import (
    EXPECTED_DURATION_ANNOTATION,
    RunningWork,
    RunTime,
    RunTimeBasis,
    StartEstimate,
    WaitingWork,
    WorkerFigures,
    declared_run_time,
    estimate_starts,
    median,
)
from jobrelay.admission.workload_reads import entry_key, priority_of
from jobrelay.fleet.maintenance_rules import WorkerClusterView
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.placement.capacity import Node, WorkerCapacity
from jobrelay.placement.model import Cluster
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import Choice, Invalid, read_workload
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.placement import placement_of
from jobrelay.vocabulary.timestamps import parse_time, rfc3339

__all__ = [
    "EstimateRead",
    "EstimatedWorkers",
    "estimate_line",
    "estimate_words",
    "estimated_starts",
    "estimated_time",
    "estimates_of",
    "observed_run_times",
    "read_for_estimate",
    "summed_clusters",
    "worker_figures",
]


@dataclass(frozen=True, slots=True)
class EstimatedWorkers:
    """The workers that take new work, their room and labels (a workload's choice of
    workers is judged by them)."""

    figures: tuple[WorkerFigures, ...]
    labels: Mapping[str, Mapping[str, str]]


def worker_figures(registrations: Iterable[Mapping[str, Any]]) -> EstimatedWorkers:
    """The WorkerClusters connected, neither cordoned nor draining, whose status says their
    capacity: allocatable, and used as requested plus reserved."""
    figures: list[WorkerFigures] = []
    labels: dict[str, Mapping[str, str]] = {}
    for registration in registrations:
        view = WorkerClusterView.of(registration)
        if view.connected != "True" or view.cordoned or view.drain is not None:
            continue
        status = registration.get("status")
        capacity = status.get("capacity") if isinstance(status, Mapping) else None
        if not isinstance(capacity, Mapping) or not capacity.get("allocatable"):
            continue
        try:
            allocatable = resources_of(capacity.get("allocatable") or {})
            used = dict(resources_of(capacity.get("requested") or {}))
            for resource, quantity in resources_of(capacity.get("reserved") or {}).items():
                used[resource] = used.get(resource, 0) + quantity
        except (ValueError, TypeError, AttributeError):
            continue  # a status it cannot count: that worker's room is not known
        figures.append(WorkerFigures(view.name, allocatable, used))
        labels[view.name] = dict(Meta(registration).labels)
    return EstimatedWorkers(tuple(figures), labels)


QueueOf = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class EstimateRead:
    """One workload as the estimate reads it (a cache may keep it per resourceVersion)."""

    key: str  # its entry key, ``Kind namespace/name``
    namespace: str
    queue: str
    waiting: bool  # pending: not placed, not finished, not suspended, not going
    worker: str  # placed there and not finished ("": not running)
    demand: Mapping[str, int]
    choice: Choice
    started: datetime | None
    ran: float | None  # finished: how long it ran (None: not finished, or not known)
    declared: RunTime | None
    priority: int
    created: str


def read_for_estimate(
    kind: WorkloadKind, obj: Mapping[str, Any], queue: str, known: QueueKnowledge
) -> EstimateRead | None:
    """``obj`` as the estimate reads it; None for what neither waits, runs nor finished
    (going, suspended, unreadable templates)."""
    body = dict(obj)
    meta = Meta(obj)
    if meta.deletion_timestamp:
        return None
    spec = obj.get("spec")
    deadline = spec.get("activeDeadlineSeconds") if isinstance(spec, Mapping) else None
    declared = declared_run_time(meta.annotation(EXPECTED_DURATION_ANNOTATION), deadline)
    # Its start from the status's startTime (Job, JobSet); its finish as its kind says it.
    started = parse_time((obj.get("status") or {}).get("startTime"))
    key = _key(kind, obj)
    finish = kind.finish(body)
    if finish is not None:
        finished = parse_time(finish.at) if finish.at else None
        if started is None:
            started = parse_time(meta.creation_timestamp)
        ran = None
        if started is not None and finished is not None:
            ran = max(0.0, (finished - started).total_seconds())
        return EstimateRead(key, meta.namespace, queue, False, "", {}, Choice(), started, ran,
                            declared, 0, "")  # fmt: skip
    workload = read_workload(kind, body)
    if isinstance(workload, Invalid):
        return None
    # Pending (queue_places.is_pending), its finish already asked: not placed, not suspended.
    waiting = not placement_of(obj) and not kind.is_suspended(body)
    worker = placement_of(obj) if not waiting else ""
    if not waiting and not worker:
        return None  # suspended before its first placement
    return EstimateRead(
        key, meta.namespace, queue, waiting, worker, workload.demand, workload.choice, started,
        None, declared, _priority(kind, body, known) if waiting else 0,
        str(meta.creation_timestamp or ""),
    )  # fmt: skip


def observed_run_times(reads: Iterable[EstimateRead]) -> dict[str, RunTime]:
    """The median run time of the finished workloads of each ``namespace/queue``."""
    seen: dict[str, list[float]] = {}
    for read in reads:
        if read.ran is not None and read.queue:
            seen.setdefault(f"{read.namespace}/{read.queue}", []).append(read.ran)
    found = {}
    for where, values in seen.items():
        middle = median(values)
        if middle is not None:
            found[where] = RunTime(middle, RunTimeBasis.OBSERVED, where)
    return found


def _run_time(read: EstimateRead, observed: Mapping[str, RunTime]) -> RunTime:
    """Its declared run time, else the one observed in its namespace and queue, else unknown."""
    if read.declared is not None:
        return read.declared
    return observed.get(f"{read.namespace}/{read.queue}", RunTime())


def _workers_for(choice: Choice, workers: EstimatedWorkers) -> frozenset[str] | None:
    if choice.clusters is None and choice.selector is None:
        return None
    return frozenset(
        w.name for w in workers.figures if choice.allows(w.name, workers.labels.get(w.name, {}))
    )


def _key(kind: WorkloadKind, obj: Mapping[str, Any]) -> str:
    meta = Meta(obj)
    return entry_key(WorkloadKey(kind.name, f"{meta.namespace}/{meta.name}"), kind)


def estimates_of(
    reads: Sequence[EstimateRead],
    specs: Mapping[str, QueueSpec],
    workers: EstimatedWorkers | None,
    now: datetime,
    *,
    extra: Sequence[EstimateRead] = (),
) -> dict[str, StartEstimate]:
    """The estimate of every waiting one of ``reads`` and ``extra`` (not submitted: they
    wait after the others), by entry key. ``workers`` None: their room is not known."""
    observed = observed_run_times(reads)
    running: list[RunningWork] = []
    waiting: list[tuple[tuple[int, int, str, str], WaitingWork]] = []
    for order, listed in enumerate((reads, extra)):
        for read in listed:
            if read.worker:
                since = (read.started or now).timestamp()
                running.append(RunningWork(read.key, read.queue, read.demand, read.worker, since,
                                           _run_time(read, observed)))  # fmt: skip
            elif read.waiting:
                allowed = None if workers is None else _workers_for(read.choice, workers)
                work = WaitingWork(read.key, read.queue, read.demand, _run_time(read, observed),
                                   allowed)  # fmt: skip
                created = read.created or rfc3339(now)
                waiting.append(((order, -read.priority, created, read.key), work))
    waiting.sort(key=lambda item: item[0])
    # No worker's figures at all (none written yet): their room is not known.
    figures = workers.figures if workers is not None and workers.figures else None
    return estimate_starts(specs, running, [w for _, w in waiting], figures, now.timestamp())


def estimated_starts(
    workloads: Sequence[tuple[WorkloadKind, Mapping[str, Any]]],
    known: QueueKnowledge,
    workers: EstimatedWorkers | None,
    now: datetime,
    *,
    extra: Sequence[tuple[WorkloadKind, Mapping[str, Any]]] = (),
) -> dict[str, StartEstimate]:
    """The estimate of every waiting workload of ``workloads`` and ``extra`` (workloads not
    submitted, `jobrelay simulate`'s, waiting after the others), by entry key
    (``Kind namespace/name``), each workload's queue as ``known`` tells."""

    def reads(listed: Sequence[tuple[WorkloadKind, Mapping[str, Any]]]) -> list[EstimateRead]:
        found = (read_for_estimate(kind, obj, queue_of(obj, known), known) for kind, obj in listed)
        return [read for read in found if read is not None]

    return estimates_of(reads(workloads), known.queues or {}, workers, now, extra=reads(extra))


def _priority(kind: WorkloadKind, obj: dict[str, Any], known: QueueKnowledge) -> int:
    try:
        return priority_of(kind.pod_templates(obj), known.priorities)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return 0


def _about(seconds: float) -> str:
    whole = max(0, round(seconds))
    if whole < 90:
        return f"{whole}s"
    minutes = round(whole / 60)
    if minutes < 120:
        return f"{minutes}m"
    hours = whole / 3600
    return f"{round(hours)}h" if hours < 48 else f"{round(hours / 24)}d"


def estimate_words(estimate: StartEstimate | None, now: datetime) -> str:
    """``in about 4m``, ``now``, ``unknown``; ``-`` for a workload not waiting."""
    if estimate is None:
        return "-"
    if estimate.start is None:
        return "unknown"
    ahead = estimate.start - now.timestamp()
    return "now" if ahead < 1 else f"in about {_about(ahead)}"


def estimate_line(estimate: StartEstimate, now: datetime) -> str:
    """``in about 4m, on worker-2; basis: ...`` (describe's and simulate's)."""
    where = f", on {estimate.worker}" if estimate.start is not None and estimate.worker else ""
    return f"{estimate_words(estimate, now)}{where}; basis: {estimate.basis}"


def estimated_time(estimate: StartEstimate | None) -> str | None:
    """The estimate as RFC 3339 (the API's ``estimatedStart``), None when unknown."""
    if estimate is None or estimate.start is None:
        return None
    try:
        return rfc3339(datetime.fromtimestamp(estimate.start, UTC))
    except (OverflowError, ValueError, OSError):
        return None  # past what a calendar holds (thousands of year-long runs ahead)


def summed_clusters(registrations: Iterable[Mapping[str, Any]]) -> list[Cluster]:
    """The WorkerClusters as placement judges them, from their status alone (`jobrelay
    simulate`, which reads no worker): each worker's capacity figures as one node of the
    summed allocatable, the summed requested and reserved taken (node-level fit, labels and
    taints are the controller's: a summed node is kinder than the real ones)."""
    clusters = []
    for registration in registrations:
        view = WorkerClusterView.of(registration)
        status = registration.get("status")
        capacity = status.get("capacity") if isinstance(status, Mapping) else None
        summed = None
        if isinstance(capacity, Mapping) and capacity.get("allocatable"):
            try:
                figures = worker_figures([registration]).figures
                allocatable = resources_of(capacity.get("allocatable") or {})
            except (ValueError, TypeError, AttributeError):
                figures, allocatable = (), {}
            used = figures[0].used if figures else {}
            if allocatable:
                summed = WorkerCapacity((Node(f"{view.name}-summed", allocatable, used),))
        clusters.append(
            Cluster(
                view.name,
                dict(Meta(registration).labels),
                connected=view.connected == "True",
                lost=view.lost_time is not None,
                cordoned=view.cordoned,
                draining=view.drain is not None,
                capacity=summed,
            )
        )
    return clusters
