"""When each waiting workload is likely to start: a pure simulation, computed on read.

The running (admitted) workloads end at their start plus their expected run time, each
freeing its requests on its worker and in its queue; after every end the waiting ones
are admitted in the order given (the caller's admission order), each where it fits: its
queue's ceiling (nominal + borrowing limit) and a worker's room. A StrictFIFO queue
stops at a head that does not fit; the others go on with the next. A workload admitted
in the simulation ends in turn after its own expected run time.

Room is counted per worker as resource sums (allocatable less requested and reserved,
as ``WorkerCluster.status.capacity`` says it), not node by node: a read-side estimate
that needs no node list. Time is in epoch seconds (admission reads no clock).

What a run time is, in order: declared (the annotation ``jobrelay.dev/expected-duration``,
a Go duration, else ``activeDeadlineSeconds``), else observed (the median run time of the
finished workloads of the same queue and namespace), else unknown. A workload whose room
only a run of unknown length frees gets no time: "unknown" is an honest answer. The work
is bounded (``max_events`` ends simulated, ``max_checks`` fits tried); beyond, unknown.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from jobrelay.admission.queue_model import QueueingStrategy, QueueSpec
from jobrelay.placement.units import Resources
from jobrelay.vocabulary.go_durations import parse_go_duration as go_duration_seconds

__all__ = [
    "EXPECTED_DURATION_ANNOTATION",
    "MAX_DECLARED_RUN_TIME",
    "MAX_SIMULATED_EVENTS",
    "RunTime",
    "RunTimeBasis",
    "RunningWork",
    "StartEstimate",
    "WaitingWork",
    "WorkerFigures",
    "declared_run_time",
    "estimate_starts",
    "median",
    "parse_go_duration",
]

# Set by the tenant on a workload: how long it is expected to run (a Go duration: 90s, 5m).
EXPECTED_DURATION_ANNOTATION: Final = "jobrelay.dev/expected-duration"
MAX_SIMULATED_EVENTS: Final = 10_000
MAX_FIT_CHECKS: Final = 2_000_000
# A declared run time longer than this is none an estimate can use (a tenant's annotation
# or activeDeadlineSeconds may say anything up to 64 characters or an int64).
MAX_DECLARED_RUN_TIME: Final = 366 * 86400.0


def parse_go_duration(text: object) -> float | None:
    """A Go duration text (``90s``, ``1h30m``, ``1.5h``) in seconds; None for anything else
    (a run time is never negative: :func:`~jobrelay.vocabulary.go_durations.parse_go_duration`
    refuses those)."""
    if not isinstance(text, str) or text != text.strip():
        return None
    try:
        return go_duration_seconds(text)
    except ValueError:
        return None


class RunTimeBasis(StrEnum):
    DECLARED = "declared"
    OBSERVED = "observed"


@dataclass(frozen=True, slots=True)
class RunTime:
    """How long a workload is expected to run, and why that long (None: unknown)."""

    seconds: float | None = None
    basis: RunTimeBasis | None = None
    # For an observed one: where it was observed (``namespace/queue``).
    source: str = ""


def declared_run_time(annotation: object, active_deadline: object) -> RunTime | None:
    """The run time a workload declares: its ``jobrelay.dev/expected-duration``, else its
    ``activeDeadlineSeconds`` (a bound, so a late estimate rather than an early one)."""
    seconds = parse_go_duration(annotation)
    if (
        seconds is None
        and isinstance(active_deadline, int)
        and not isinstance(active_deadline, bool)
    ):
        seconds = float(active_deadline) if active_deadline > 0 else None
    if seconds is None or seconds > MAX_DECLARED_RUN_TIME:
        return None
    return RunTime(seconds, RunTimeBasis.DECLARED)


def median(values: Iterable[float]) -> float | None:
    """The median of ``values``; None for none."""
    found = list(values)
    return float(statistics.median(found)) if found else None


@dataclass(frozen=True, slots=True)
class RunningWork:
    """An admitted workload: where it runs, since when (epoch seconds), for how long."""

    key: str
    queue: str  # "" for none
    requests: Resources
    worker: str  # "" when not known
    started: float
    run_time: RunTime = field(default_factory=RunTime)


@dataclass(frozen=True, slots=True)
class WaitingWork:
    """A workload waiting for its first placement, in admission order."""

    key: str
    queue: str  # "" for none
    requests: Resources
    run_time: RunTime = field(default_factory=RunTime)
    # The workers it may go to at all (None: any).
    workers: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class WorkerFigures:
    """A worker that takes new work, as its status counts it (units of placement.units)."""

    name: str
    allocatable: Resources
    used: Resources  # requested plus reserved


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """When a waiting workload is likely to start (None: unknown), where, and why."""

    start: float | None
    worker: str
    basis: str

    @property
    def known(self) -> bool:
        return self.start is not None


@dataclass(slots=True)
class _Ended:
    """The runs that ended so far in the simulation: what an estimate rests on."""

    declared: int = 0
    observed: set[str] = field(default_factory=set)

    def count(self, run_time: RunTime) -> None:
        if run_time.basis is RunTimeBasis.OBSERVED:
            self.observed.add(run_time.source)
        else:
            self.declared += 1

    def basis(self) -> str:
        parts = []
        if self.observed:
            places = sorted(self.observed)
            named = ", ".join(places[:3]) + (" ..." if len(places) > 3 else "")
            parts.append(f"observed durations in {named}")
        if self.declared:
            ahead = "1 running ahead" if self.declared == 1 else f"{self.declared} running ahead"
            parts.append(f"declared run times of {ahead}")
        return "; ".join(parts) or NOW_BASIS


NOW_BASIS: Final = "room is free now"
UNKNOWN_RUN_TIME: Final = "no run time declared or observed for what runs ahead"
UNKNOWN_BOUND: Final = "beyond the simulation's bound"
# Within its queue's quota now, so it waits for a worker's room, which is not known.
UNKNOWN_ROOM: Final = "the workers' room is not known (their WorkerClusters cannot be read)"


def _never_basis(why: str) -> str:
    return f"it never fits: {why}"


@dataclass(slots=True)
class _Sim:
    specs: Mapping[str, QueueSpec]
    free: dict[str, dict[str, int]] | None  # None: workers' room not known
    usage: dict[str, dict[str, int]]
    ends: list[tuple[float, int, str, str, Resources, RunTime]] = field(default_factory=list)
    max_checks: int = MAX_FIT_CHECKS
    checks: int = 0
    sequence: int = 0

    def add_end(self, at: float, queue: str, worker: str, requests: Resources, rt: RunTime) -> None:
        self.sequence += 1
        heapq.heappush(self.ends, (at, self.sequence, queue, worker, requests, rt))

    def release(self, queue: str, worker: str, requests: Resources) -> None:
        used = self.usage.setdefault(queue, {})
        for resource, quantity in requests.items():
            used[resource] = used.get(resource, 0) - quantity
        if self.free is not None and worker in self.free:
            room = self.free[worker]
            for resource, quantity in requests.items():
                room[resource] = room.get(resource, 0) + quantity

    def within_queue(self, work: WaitingWork) -> bool:
        spec = self.specs.get(work.queue)
        if spec is None:
            return True
        used = self.usage.get(work.queue, {})
        for resource, quantity in work.requests.items():
            ceiling = spec.ceiling(resource)
            if ceiling is not None and quantity > 0 and used.get(resource, 0) + quantity > ceiling:
                return False
        return True

    def worker_for(self, work: WaitingWork) -> str | None:
        """The worker with room for ``work`` (the one left with the most room, as spread
        placement prefers; ties by name); "" when workers' room is not known."""
        if self.free is None:
            return ""
        best: tuple[float, str] | None = None
        for name, room in self.free.items():
            if work.workers is not None and name not in work.workers:
                continue
            if all(room.get(r, 0) >= q for r, q in work.requests.items() if q > 0):
                left = sum(room.get(r, 0) - q for r, q in work.requests.items() if q > 0)
                if best is None or (-left, name) < best:
                    best = (-left, name)
        return None if best is None else best[1]

    def take(self, work: WaitingWork, worker: str) -> None:
        used = self.usage.setdefault(work.queue, {})
        for resource, quantity in work.requests.items():
            used[resource] = used.get(resource, 0) + quantity
        if self.free is not None and worker in self.free:
            room = self.free[worker]
            for resource, quantity in work.requests.items():
                room[resource] = room.get(resource, 0) - quantity


def _never_fits(
    work: WaitingWork, specs: Mapping[str, QueueSpec], workers: Sequence[WorkerFigures] | None
) -> str | None:
    """Why ``work`` could never be admitted, even with everything else gone; None if it could."""
    spec = specs.get(work.queue)
    if spec is not None:
        for resource, quantity in sorted(work.requests.items()):
            ceiling = spec.ceiling(resource)
            if ceiling is not None and quantity > ceiling:
                return f"it asks more {resource} than queue {spec.name} may ever use"
    if workers is None:
        return None
    allowed = [w for w in workers if work.workers is None or w.name in work.workers]
    if not allowed:
        return "no worker it may go to takes new work"
    for worker in allowed:
        if all(worker.allocatable.get(r, 0) >= q for r, q in work.requests.items() if q > 0):
            return None
    return "no worker has that much allocatable"


def estimate_starts(
    specs: Mapping[str, QueueSpec],
    running: Sequence[RunningWork],
    waiting: Sequence[WaitingWork],
    workers: Sequence[WorkerFigures] | None,
    now: float,
    *,
    max_events: int = MAX_SIMULATED_EVENTS,
    max_checks: int = MAX_FIT_CHECKS,
) -> dict[str, StartEstimate]:
    """Each of ``waiting``'s estimate by its key (see the module doc). ``workers`` None:
    their room is not known, only the queues' ceilings count."""
    free = None if workers is None else {w.name: _room(w) for w in workers}
    sim = _Sim(specs, free, {}, max_checks=max_checks)
    found: dict[str, StartEstimate] = {}
    for admitted in running:
        sim.take(WaitingWork(admitted.key, admitted.queue, admitted.requests), "")  # queue only
        if admitted.run_time.seconds is not None:
            end = max(now, admitted.started + admitted.run_time.seconds)
            sim.add_end(end, admitted.queue, admitted.worker, admitted.requests, admitted.run_time)
    pending: list[WaitingWork] = []
    for work in waiting:
        never = _never_fits(work, specs, workers)
        if never is not None:
            found[work.key] = StartEstimate(None, "", _never_basis(never))
        else:
            pending.append(work)
    ended = _Ended()
    at, events = now, 0
    while pending:
        pending = _admit(sim, pending, at, ended, found, first=not events)
        if not pending or not sim.ends or sim.checks > max_checks:
            break
        if events >= max_events:
            break
        # Every run that ends at the same moment frees its room before anyone is admitted.
        at = sim.ends[0][0]
        while sim.ends and sim.ends[0][0] <= at and events < max_events:
            _, _, queue, worker, requests, run_time = heapq.heappop(sim.ends)
            sim.release(queue, worker, requests)
            ended.count(run_time)
            events += 1
    bounded = sim.checks > max_checks or events >= max_events
    for work in pending:
        found[work.key] = StartEstimate(None, "", UNKNOWN_BOUND if bounded else UNKNOWN_RUN_TIME)
    return found


def _room(worker: WorkerFigures) -> dict[str, int]:
    return {r: q - worker.used.get(r, 0) for r, q in worker.allocatable.items()}


def _admit(
    sim: _Sim,
    pending: list[WaitingWork],
    at: float,
    ended: _Ended,
    found: dict[str, StartEstimate],
    *,
    first: bool,
) -> list[WaitingWork]:
    """Admit, in order, those of ``pending`` that fit at ``at``; the rest, still in order.
    ``first``: nothing ended yet (one that fits now with the workers' room unknown waits
    for that room: unknown)."""
    left: list[WaitingWork] = []
    stopped: set[str] = set()  # StrictFIFO queues whose head did not fit
    hopeless: set[tuple[str, tuple[tuple[str, int], ...], frozenset[str] | None]] = set()
    for work in pending:
        if work.queue in stopped or sim.checks > sim.max_checks:
            left.append(work)
            continue
        alike = (work.queue, tuple(sorted(work.requests.items())), work.workers)
        worker = None
        if alike not in hopeless:
            sim.checks += 1
            worker = sim.worker_for(work) if sim.within_queue(work) else None
        if worker is None:
            hopeless.add(alike)  # room only shrinks within a round: one like it fails too
            left.append(work)
            spec = sim.specs.get(work.queue)
            if spec is not None and spec.strategy is QueueingStrategy.STRICT_FIFO:
                stopped.add(work.queue)
            continue
        if first and sim.free is None:
            found[work.key] = StartEstimate(None, "", UNKNOWN_ROOM)
            continue
        sim.take(work, worker)
        basis = NOW_BASIS if not ended.declared and not ended.observed else ended.basis()
        found[work.key] = StartEstimate(at, worker, basis)
        if work.run_time.seconds is not None:
            sim.add_end(
                at + work.run_time.seconds, work.queue, worker, work.requests, work.run_time
            )
    return left
