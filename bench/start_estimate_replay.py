"""``python -m bench estimate``: how often the estimated start of a waiting workload is
right, on a synthetic trace (issue 34). Pure: no fleet, no clock.

A trace of 500 Jobs (seeded) arrives over time (one every 10 s on average: a busy fleet)
at three RelayQueues with ceilings over three workers, each queue's Jobs of one size (1,
2 and 4 CPUs: a team runs alike Jobs), run times drawn log-normal (30 s to 20 min), most declared
(``jobrelay.dev/expected-duration``, the true run time within ±10 %), the rest declaring
nothing (their queue's observed median stands in, once some finished), a few of higher
priority that jump ahead of those already waiting. The replay plays the fleet as the
controller does: an admission pass a second after each change, in priority then age
order, each Job where its queue's ceiling and a worker's room allow, its pods running a
second after. Each Job that waits is asked its estimate at arrival
(:func:`jobrelay.admission.start_estimate.estimate_starts`, over what runs and waits
then); the report says how often it fell within ±25 % of the real wait (or 5 s).

The same trace with sizes mixed within each queue (1-4 CPUs) is reported beside it: there,
smaller Jobs that arrive later pass a large one that does not fit (BestEffortFIFO, as the
controller does), which an estimate made at arrival cannot foresee: it comes out early.
"""

from __future__ import annotations

import heapq
import json
import math
import random
from dataclasses import dataclass, field

import click

from jobrelay.admission.queue_model import QueueSpec
from jobrelay.admission.start_estimate import (
    RunningWork,
    RunTime,
    RunTimeBasis,
    WaitingWork,
    WorkerFigures,
    estimate_starts,
    median,
)

CPU = "cpu"
SIZES = {"team-a": 1000, "team-b": 2000, "team-c": 4000}
MIXED = (1000, 1000, 2000, 2000, 4000)
QUEUES = {
    name: QueueSpec(name, nominal={CPU: quota * 1000}, borrowing_limit={CPU: 0})
    for name, quota in (("team-a", 16), ("team-b", 12), ("team-c", 8))
}
WORKERS = {"worker-1": 16_000, "worker-2": 12_000, "worker-3": 8_000}
PASS_LAG = 1.0  # an admission pass a second after a change
START_LAG = 1.0  # pods run a second after placement
TOLERANCE = 0.25
SLACK = 5.0  # seconds: a wait this short is right when the estimate is this close


@dataclass(slots=True)
class TraceJob:
    key: str
    queue: str
    cpu: int
    arrives: float
    runs: float  # its real run time
    declared: float | None  # what it declares (None: nothing)
    priority: int = 0
    admitted: float | None = None
    worker: str = ""


@dataclass(slots=True)
class Outcome:
    asked: float
    estimate: float | None
    real: float


def trace(jobs: int, seed: int, *, mixed: bool = False) -> list[TraceJob]:
    rng = random.Random(seed)
    at, found = 0.0, []
    for number in range(jobs):
        at += rng.expovariate(1 / 10.0)
        runs = min(1200.0, max(30.0, rng.lognormvariate(math.log(180), 0.7)))
        declared = runs * rng.uniform(0.9, 1.1) if rng.random() < 0.85 else None
        queue = rng.choice(list(QUEUES))
        cpu = rng.choice(MIXED) if mixed else SIZES[queue]
        found.append(TraceJob(
            f"Job team/{number:04}", queue, cpu, at, runs, declared,
            priority=100 if rng.random() < 0.05 else 0,
        ))  # fmt: skip
    return found


@dataclass(slots=True)
class Replay:
    jobs: list[TraceJob]
    waiting: list[TraceJob] = field(default_factory=list)
    running: list[TraceJob] = field(default_factory=list)
    finished: dict[str, list[float]] = field(default_factory=dict)
    free: dict[str, int] = field(default_factory=lambda: dict(WORKERS))
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUEUES, 0))
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def run_time(self, job: TraceJob) -> RunTime:
        if job.declared is not None:
            return RunTime(job.declared, RunTimeBasis.DECLARED)
        seen = median(self.finished.get(job.queue, []))
        return RunTime(seen, RunTimeBasis.OBSERVED, f"team/{job.queue}") if seen else RunTime()

    def order(self) -> None:
        self.waiting.sort(key=lambda j: (-j.priority, j.arrives, j.key))

    def ask(self, job: TraceJob, now: float) -> None:
        """The estimate of ``job``, waiting, as the CLI would give it now."""
        running = [
            RunningWork(r.key, r.queue, {CPU: r.cpu}, r.worker, (r.admitted or 0) + START_LAG,
                        self.run_time(r))
            for r in self.running
        ]  # fmt: skip
        waiting = [
            WaitingWork(w.key, w.queue, {CPU: w.cpu}, self.run_time(w)) for w in self.waiting
        ]
        workers = [
            WorkerFigures(name, {CPU: total}, {CPU: total - self.free[name]})
            for name, total in WORKERS.items()
        ]
        found = estimate_starts(QUEUES, running, waiting, workers, now)[job.key]
        self.outcomes[job.key] = Outcome(now, found.start, math.nan)

    def admit(self, now: float, ends: list[tuple[float, str]]) -> None:
        left = []
        for job in self.waiting:
            worker = self.room_for(job)
            if worker is None:
                left.append(job)
                continue
            job.admitted, job.worker = now, worker
            self.free[worker] -= job.cpu
            self.usage[job.queue] += job.cpu
            self.running.append(job)
            heapq.heappush(ends, (now + START_LAG + job.runs, job.key))
            if job.key in self.outcomes:
                self.outcomes[job.key].real = now
        self.waiting = left

    def room_for(self, job: TraceJob) -> str | None:
        ceiling = QUEUES[job.queue].ceiling(CPU)
        if ceiling is not None and self.usage[job.queue] + job.cpu > ceiling:
            return None
        fitting = [(-(room - job.cpu), name) for name, room in self.free.items() if room >= job.cpu]
        return min(fitting)[1] if fitting else None


def replay(jobs: list[TraceJob]) -> list[Outcome]:
    """Play the trace; each Job that waited, its estimate and its real start."""
    state = Replay(jobs)
    by_key = {job.key: job for job in jobs}
    ends: list[tuple[float, str]] = []
    arrivals = sorted(jobs, key=lambda j: j.arrives)
    at, passes = 0, []  # pending admission passes (times)
    while at < len(arrivals) or ends or passes:
        upcoming = [t for t in (
            arrivals[at].arrives if at < len(arrivals) else None,
            ends[0][0] if ends else None,
            passes[0] if passes else None,
        ) if t is not None]  # fmt: skip
        now = min(upcoming)
        if passes and passes[0] == now:
            heapq.heappop(passes)
            state.admit(now, ends)
            continue
        if ends and ends[0][0] == now:
            _, key = heapq.heappop(ends)
            job = by_key[key]
            state.running.remove(job)
            state.free[job.worker] += job.cpu
            state.usage[job.queue] -= job.cpu
            state.finished.setdefault(job.queue, []).append(job.runs)
        else:
            job = arrivals[at]
            at += 1
            state.waiting.append(job)
            state.order()
            # Asked only if it would not be admitted by the next pass anyway.
            if state.room_for(job) is None or state.waiting.index(job) > 0:
                state.ask(job, now)
        heapq.heappush(passes, now + PASS_LAG)
    return list(state.outcomes.values())


def within(outcome: Outcome) -> bool:
    if outcome.estimate is None or math.isnan(outcome.real):
        return False
    wait = outcome.real - outcome.asked
    return abs(outcome.estimate - outcome.real) <= max(TOLERANCE * wait, SLACK)


@click.command()
@click.option("--jobs", default=500, show_default=True, help="Jobs in the trace.")
@click.option("--seed", default=34, show_default=True, help="The trace's seed.")
def main(jobs: int, seed: int) -> None:
    """Replay a synthetic trace and report how often the estimated start was within ±25 %."""
    report: dict[str, object] = {"jobs": jobs, "seed": seed, "aim": 0.8}
    for name, mixed in (("one_size_per_queue", False), ("mixed_sizes", True)):
        outcomes = replay(trace(jobs, seed, mixed=mixed))
        known = [o for o in outcomes if o.estimate is not None]
        right = sum(within(o) for o in outcomes)
        report[name] = {
            "waited": len(outcomes),
            "estimated": len(known),
            "unknown": len(outcomes) - len(known),
            "within_25_percent": right,
            "share_within": round(right / len(outcomes), 3) if outcomes else None,
        }
    click.echo(json.dumps(report, indent=2))
