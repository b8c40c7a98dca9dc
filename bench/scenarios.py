"""The scenarios: latency, throughput, baseline, scale and API cost.

Each jobrelay run gets a fresh namespace and a fresh controller process, so
that its CPU, RSS and request counts belong to that run alone; the namespace
is deleted everywhere (and waited for) before the next run starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from bench import controllermetrics, stats
from bench.against_ref import NEW, OLD, SourceTree, alternation, compare
from bench.apimetrics import CLIENT_VERB, MetricsClient, Scrape, difference
from bench.controller import ControllerProcess, ProcSampler, log_steps, read_proc
from bench.fleetctl import MANAGER, Fleet
from bench.recorder import Recorder, Trace, completion_latency, status_latencies
from bench.window_cpu import (
    CpuReading,
    load_fleet_processes,
    read_cpu,
    user_window,
    window_cpu,
)
from bench.workload import (
    PodShape,
    Request,
    SubmitStats,
    burst,
    create_namespace,
    create_request,
    delete_namespace,
    job_manifest,
    paced,
    resume_request,
    wait_until,
)
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.requesting import RequestRecord
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, MIRROR_LABEL, controller_label_value

Json = dict[str, Any]
BenchKey = tuple[str, str]  # (verb as the metric spells it, resource)

MIRROR_SELECTOR = f"{MIRROR_LABEL}={controller_label_value(DEFAULT_CONTROLLER_NAME)}"
SETTLE_SECONDS = 3.0  # after the last Job: late events (Kubernetes Events, deletions) land
# After the last Job finished, how long the mirrors' deletion is waited for.
MIRROR_GRACE_SECONDS = 60.0


def _say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    """Sizes and knobs of every scenario (the CLI flags)."""

    latency_rate: float = 20.0
    latency_duration: float = 60.0
    jobs: int = 2000
    concurrency: int = 50
    repeat: int = 3
    scale_jobs: int = 10_000
    scale_idle: float = 60.0
    scale_resume: int = 1000
    api_jobs: int = 300
    api_rate: float = 10.0
    pod: PodShape = field(default_factory=PodShape)
    timeout: float = 900.0
    cleanup_timeout: float = 600.0
    controller_args: tuple[str, ...] = ()
    profile: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Every apiserver's counters, and what the bench had written, at one moment."""

    scrapes: dict[str, Scrape]
    bench: dict[str, Counter[BenchKey]]


class Context:
    """Clients for every cluster, and what the bench itself wrote through them."""

    def __init__(self, fleet: Fleet, options: Options, run_id: str, log_dir: Path) -> None:
        self.fleet = fleet
        self.options = options
        self.run_id = run_id
        self.log_dir = log_dir
        self.bench_writes: dict[str, Counter[BenchKey]] = {c: Counter() for c in fleet.clusters}
        api = ApiOptions(max_connections=options.concurrency + 32, request_timeout=60.0)
        self.clients = {
            cluster: ApiClient.from_kubeconfig(
                fleet.kubeconfig(cluster), cluster=cluster, options=api, on_request=self._count
            )
            for cluster in fleet.clusters
        }
        self.metrics = {
            cluster: MetricsClient.from_kubeconfig(fleet.kubeconfig(cluster), cluster)
            for cluster in fleet.clusters
        }
        self._namespaces = 0
        # Where the next controller runs from (None: this tree); see bench.against_ref.
        self.controller_source: SourceTree | None = None
        self._source_help: dict[Path, str] = {}
        self.fleet_processes = load_fleet_processes(fleet.state_dir)

    def controller_process(self, log_path: Path) -> ControllerProcess:
        source = self.controller_source
        source_help = None
        if source is not None:
            if source.root not in self._source_help:
                self._source_help[source.root] = source.controller_help()
            source_help = self._source_help[source.root]
        return ControllerProcess(
            self.fleet.kubeconfig(MANAGER),
            log_path,
            self.options.controller_args,
            source=source,
            source_help=source_help,
        )

    def read_cpu(self, controller_pid: int | None) -> CpuReading:
        return read_cpu(controller_pid, self.fleet_processes)

    def _count(self, record: RequestRecord) -> None:
        verb = CLIENT_VERB.get(record.verb)
        if verb is not None:
            self.bench_writes[record.cluster][(verb, record.resource)] += 1

    @property
    def manager(self) -> ApiClient:
        return self.clients[MANAGER]

    @property
    def workers(self) -> dict[str, ApiClient]:
        return {name: self.clients[name] for name in self.fleet.workers}

    def namespace(self, scenario: str) -> str:
        self._namespaces += 1
        return f"bench-{scenario}-{self.run_id}-{self._namespaces}"

    async def snapshot(self) -> Snapshot:
        scrapes = await asyncio.gather(*(m.scrape() for m in self.metrics.values()))
        own = {cluster: Counter(counts) for cluster, counts in self.bench_writes.items()}
        return Snapshot(dict(zip(self.metrics, scrapes, strict=True)), own)

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()
        for metrics in self.metrics.values():
            await metrics.aclose()


# -- API cost ---------------------------------------------------------------------


def _is_jobrelay_write(cluster: str, resource: str, subresource: str) -> bool:
    """Which writes jobrelay makes, told apart from the clusters' own controllers'.

    On the manager, nothing but jobrelay (and the bench, subtracted) writes the
    managed Jobs, their Events, or WorkerClusters. On a worker jobrelay creates,
    patches and deletes mirrors (and creates namespaces); the worker's Job
    controller writes only their ``status``, and pods are everyone else's.
    """
    if cluster == MANAGER:
        return resource in ("jobs", "events", "workerclusters")
    return (resource == "jobs" and not subresource) or resource == "namespaces"


# What each of jobrelay's writes is for, and its floor per Job (see floor_of).
CREATE, DELETE, STATUS = "mirror create", "mirror delete", "status write"
BUCKETS = (CREATE, DELETE, STATUS, "placement and other Job patches", "Events",
           "mirror spec patches", "other (namespaces, WorkerCluster status)")  # fmt: skip


def _bucket(cluster: str, verb: str, resource: str, subresource: str) -> str:
    if cluster == MANAGER:
        if resource == "jobs":
            return STATUS if subresource == "status" else BUCKETS[3]
        return BUCKETS[4] if resource == "events" else BUCKETS[6]
    if resource == "jobs":
        return {"POST": CREATE, "DELETE": DELETE}.get(verb, BUCKETS[5])
    return BUCKETS[6]


def write_cost(
    before: Snapshot,
    after: Snapshot,
    jobs: int,
    floor: dict[str, int] | None = None,
) -> Json:
    """Write requests between two snapshots, split into jobrelay's, the bench's and the fleet's."""
    rows: dict[tuple[str, str, str], Json] = {}
    spent: dict[str, int] = {}
    latency: dict[str, list[float]] = {}
    for cluster, scrape in after.scrapes.items():
        role = "manager" if cluster == MANAGER else "workers"
        earlier = before.scrapes.get(cluster)
        delta = difference(scrape.requests, earlier.requests if earlier else Counter())
        if earlier is not None:
            timed = latency.setdefault(role, [0.0, 0.0])
            timed[0] += scrape.write_seconds - earlier.write_seconds
            timed[1] += scrape.writes_timed - earlier.writes_timed
        own = after.bench[cluster] - before.bench.get(cluster, Counter())
        for key, count in delta.items():
            if not key.is_write:
                continue
            row = rows.setdefault(
                (role, key.verb, key.target),
                {
                    "cluster": role,
                    "verb": key.verb,
                    "resource": key.target,
                    "requests": 0,
                    "failed": 0,
                    "bench": 0,
                    "jobrelay": 0,
                    "fleet": 0,
                    "codes": {},
                },
            )
            row["requests"] += count
            row["codes"][key.code] = row["codes"].get(key.code, 0) + count
            if key.failed:
                row["failed"] += count
            if not key.subresource:
                taken = min(count, own.get((key.verb, key.resource), 0))
                own[(key.verb, key.resource)] -= taken
                row["bench"] += taken
                count -= taken
            if _is_jobrelay_write(cluster, key.resource, key.subresource):
                row["jobrelay"] += count
                bucket = _bucket(cluster, key.verb, key.resource, key.subresource)
                spent[bucket] = spent.get(bucket, 0) + count
            else:
                row["fleet"] += count
    ordered = sorted(rows.values(), key=lambda r: (r["cluster"], -r["requests"]))
    by_cluster: dict[str, Json] = {}
    for role in ("manager", "workers"):
        mine = [r for r in ordered if r["cluster"] == role]
        by_cluster[role] = {
            f"{column}_per_job": sum(r[column] for r in mine) / jobs if jobs else math.nan
            for column in ("requests", "jobrelay", "bench", "fleet")
        }
    jobrelay = sum(r["jobrelay"] for r in ordered)
    fleet = sum(r["fleet"] for r in ordered)
    floors = floor or {}
    total_floor = sum(floors.values())
    return {
        "jobs": jobs,
        "rows": ordered,
        "breakdown": [
            {
                "what": bucket,
                "jobrelay": spent.get(bucket, 0),
                "jobrelay_per_job": spent.get(bucket, 0) / jobs if jobs else math.nan,
                "floor_per_job": floors.get(bucket, 0) / jobs if jobs else math.nan,
            }
            for bucket in BUCKETS
            if spent.get(bucket) or floors.get(bucket)
        ],
        "jobrelay_writes": jobrelay,
        # Rows mix codes; a failed request in a jobrelay row is counted as jobrelay's.
        "jobrelay_failed": sum(min(r["failed"], r["jobrelay"]) for r in ordered),
        "jobrelay_per_job": jobrelay / jobs if jobs else math.nan,
        "fleet_per_job": fleet / jobs if jobs else math.nan,
        # Per cluster role: every write ("requests"), and jobrelay's, the bench's, the fleet's.
        "by_cluster": by_cluster,
        # The apiservers' own mean time per write request (all clients) during the run:
        # tens of milliseconds or more means the fleet itself was short of CPU.
        "server_write_ms": {
            role: 1000 * seconds / count if count else math.nan
            for role, (seconds, count) in sorted(latency.items())
        },
        "floor": total_floor,
        "floor_per_job": total_floor / jobs if jobs else math.nan,
        "ratio_to_floor": jobrelay / total_floor if total_floor else math.nan,
    }


def floor_of(traces: Sequence[Trace]) -> dict[str, int]:
    """One mirror create, one delete, one status write per distinct mirror status."""
    mirrored = [t for t in traces if not math.isnan(t.mirror_added)]
    return {
        CREATE: len(mirrored),
        DELETE: len(mirrored),
        STATUS: sum(len(t.mirror_copied) for t in mirrored),
    }


# -- one run of Jobs through jobrelay ----------------------------------------------


@dataclass
class Run:
    namespace: str
    recorder: Recorder
    submit: SubmitStats
    sampler: ProcSampler
    controller: Json
    writes: Json
    complete: bool
    origin: float
    end: float
    wall_offset: float  # time.time() - time.monotonic() during the run
    # The user's window (first create sent -> last Job seen finished on the manager) and
    # the controller's and the fleet's CPU over it (bench.window_cpu.window_cpu).
    user_window: Json

    @property
    def traces(self) -> list[Trace]:
        return [t for t in self.recorder.traces.values() if not math.isnan(t.submitted)]


def _mark_submitted(
    recorder: Recorder, names: Sequence[str]
) -> Callable[[int, float, float], None]:
    def done(index: int, sent: float, answered: float) -> None:
        trace = recorder.trace(f"{recorder.namespace}/{names[index]}")
        trace.submitted, trace.accepted = sent, answered

    return done


@contextlib.asynccontextmanager
async def _controller(
    ctx: Context, namespace: str, *, profile: Path | None = None
) -> AsyncIterator[tuple[ControllerProcess, ProcSampler, Json]]:
    """A fresh controller process for one run, sampled from ready to stop."""
    process = ctx.controller_process(ctx.log_dir / f"{namespace}.controller.log")
    info: Json = {"log": str(process.log_path)}
    process.start()
    spy: subprocess.Popen[bytes] | None = None
    try:
        info["ready_seconds"] = await process.wait_ready()
        with contextlib.suppress(OSError, ValueError, IndexError):
            at_ready = read_proc(process.pid)  # start-up cost: a fresh process, so all of it
            info["cpu_seconds_to_ready"] = at_ready.cpu_seconds
            info["rss_at_ready_mib"] = at_ready.rss_bytes / 2**20
        if profile is not None:
            spy = _start_py_spy(process.pid, profile)
        async with ProcSampler(process.pid) as sampler:
            yield process, sampler, info
    finally:
        if spy is not None:
            _stop_py_spy(spy, profile)
        # The controller's own latency histograms, while it still runs (no log parsing).
        if process.metrics_url is not None and process.running:
            try:
                info["metrics"] = await controllermetrics.scrape(process.metrics_url)
            except (httpx2.HTTPError, ValueError) as error:
                _say(f"could not read the controller's /metrics: {error}")
        info["exit_code"] = await process.stop()
        info["log_levels"] = process.log_levels()
        if info["exit_code"] not in (0, None):
            _say(f"the controller exited with {info['exit_code']}; log: {process.log_path}")


def _start_py_spy(pid: int, output: Path) -> subprocess.Popen[bytes] | None:
    binary = shutil.which("py-spy")
    if binary is None:
        _say("--profile: py-spy is not installed (pip install py-spy); not profiling")
        return None
    output.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            binary,
            "record",
            "--pid",
            str(pid),
            "--output",
            str(output),
            "--rate",
            "50",
            "--nonblocking",
            "--format",
            {".json": "speedscope", ".txt": "raw"}.get(output.suffix, "flamegraph"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop_py_spy(spy: subprocess.Popen[bytes], output: Path | None) -> None:
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=60)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()
    if output is not None and output.exists():
        _say(f"profile written to {output}")


async def _cleanup(ctx: Context, namespace: str, clusters: Sequence[str]) -> None:
    gone = await asyncio.gather(
        *(
            delete_namespace(ctx.clients[c], namespace, timeout=ctx.options.cleanup_timeout)
            for c in clusters
        )
    )
    if not all(gone):
        _say(f"namespace {namespace} still terminating after {ctx.options.cleanup_timeout:.0f}s")


def _all_done(recorder: Recorder, expected: int) -> Callable[[], bool]:
    def check() -> bool:
        if recorder.finished_count < expected:
            return False
        return all(
            math.isnan(t.mirror_added) or not math.isnan(t.mirror_deleted)
            for t in recorder.traces.values()
        )

    return check


Submitter = Callable[
    [Sequence[Request], Callable[[int, float, float], None]], Awaitable[SubmitStats]
]


async def relay_run(
    ctx: Context, scenario: str, count: int, submitter: Submitter, *, profile: Path | None = None
) -> Run:
    """``count`` managed Jobs submitted by ``submitter``, until all finished and mirrors are gone."""
    namespace = ctx.namespace(scenario)
    await create_namespace(ctx.manager, namespace)
    recorder = Recorder(namespace, {MANAGER: ctx.manager}, ctx.workers, MIRROR_SELECTOR)
    await recorder.start()
    names = [f"job-{index:05d}" for index in range(count)]
    requests = [
        create_request(
            ctx.manager,
            job_manifest(
                name, namespace, ctx.run_id, ctx.options.pod, managed_by=DEFAULT_CONTROLLER_NAME
            ),
        )
        for name in names
    ]
    wall_offset = time.time() - time.monotonic()
    try:
        async with _controller(ctx, namespace, profile=profile) as (process, sampler, info):
            before = await ctx.snapshot()
            _say(f"{scenario}: submitting {count} Jobs in {namespace}")
            deadline = time.monotonic() + ctx.options.timeout
            at_start = ctx.read_cpu(process.pid)
            submit = await submitter(requests, _mark_submitted(recorder, names))
            # The user's window ends with the last Job finished on the manager: read the
            # CPU then (polled often), before the mirrors' deletion that follows.
            await wait_until(
                lambda: recorder.finished_count >= submit.ok or not process.running,
                timeout=max(0.0, deadline - time.monotonic()),
                interval=0.02,
            )
            at_end = ctx.read_cpu(process.pid if process.running else None)
            complete = recorder.finished_count >= submit.ok
            # Then the mirrors' deletion (at once: the bench runs the controller with
            # --finished-mirror-ttl 0); a controller that keeps them is not waited for long.
            done = _all_done(recorder, submit.ok)
            await wait_until(
                lambda: done() or not process.running,
                timeout=min(MIRROR_GRACE_SECONDS, max(0.0, deadline - time.monotonic()))
                if complete
                else 0.0,
                interval=0.05,
            )
            info["mirrors_left"] = sum(
                1
                for t in recorder.traces.values()
                if not math.isnan(t.mirror_added) and math.isnan(t.mirror_deleted)
            )
            if not process.running:
                _say(f"{scenario}: the controller died; its log ends:\n{process.log_tail()}")
            end = time.monotonic()
            if not complete:
                _say(
                    f"{scenario}: only {recorder.finished_count} of {submit.ok} Jobs finished "
                    f"within {ctx.options.timeout:.0f}s"
                )
            elif info["mirrors_left"]:
                _say(f"{scenario}: {info['mirrors_left']} finished mirrors still on the workers")
            await asyncio.sleep(SETTLE_SECONDS)
            after = await ctx.snapshot()
            info.update(sampler.window(submit.started, end))
        traces = [t for t in recorder.traces.values() if not math.isnan(t.submitted)]
        writes = write_cost(before, after, len(traces), floor_of(traces))
        return Run(
            namespace,
            recorder,
            submit,
            sampler,
            info,
            writes,
            complete,
            submit.started,
            end,
            wall_offset,
            _user_window(traces, at_start, at_end),
        )
    finally:
        await recorder.stop()
        await _cleanup(ctx, namespace, ctx.fleet.clusters)


# -- analysis helpers ----------------------------------------------------------------


def _user_window(traces: Sequence[Trace], at_start: CpuReading, at_end: CpuReading) -> Json:
    first, last = user_window([t.submitted for t in traces], [t.finished for t in traces])
    return {"total_s": last - first} | window_cpu(at_start, at_end, len(traces))


def _ms(values: Sequence[float]) -> list[float]:
    return [round(1000.0 * v, 3) for v in values]


def _latency_figures(traces: Sequence[Trace]) -> Json:
    dispatch = [t.dispatch_latency for t in traces if not math.isnan(t.dispatch_latency)]
    status: list[float] = []
    superseded = missing = 0
    for trace in traces:
        found, skipped, lost = status_latencies(trace)
        status.extend(found)
        superseded += skipped
        missing += lost
    return {
        "dispatch_ms": {
            k: v * (1 if k == "count" else 1000) for k, v in stats.summarize(dispatch).items()
        },
        "status_ms": {
            k: v * (1 if k == "count" else 1000) for k, v in stats.summarize(status).items()
        },
        "status_superseded": superseded,
        "status_never_shown": missing,
        "samples": {"dispatch_ms": _ms(dispatch), "status_ms": _ms(status)},
    }


def _dispatch_steps(run: Run) -> Json:
    """Where dispatch time goes, from the controller's log lines (ms, p50/p95/p99).

    ``queue + placement``: manager ADDED seen by the bench → jobrelay logged the
    placement (its PATCH answered); ``mirror create``: → jobrelay logged the
    mirror created (the worker's POST answered); ``watch``: → the bench saw the
    mirror's ADDED. Log times have millisecond precision.
    """
    steps = log_steps(Path(run.controller["log"]))
    placed, created = steps["placed"], steps["mirror_created"]
    parts: dict[str, list[float]] = {"queue + placement": [], "mirror create": [], "watch": []}
    for trace in run.traces:
        at_placed = placed.get(trace.key)
        at_created = created.get(trace.key)
        if at_placed is None or at_created is None or math.isnan(trace.mirror_added):
            continue
        parts["queue + placement"].append(at_placed - run.wall_offset - trace.added)
        parts["mirror create"].append(at_created - at_placed)
        parts["watch"].append(trace.mirror_added - (at_created - run.wall_offset))
    return {
        name: {k: v * (1 if k == "count" else 1000) for k, v in stats.summarize(values).items()}
        for name, values in parts.items()
    }


def _outcomes(traces: Sequence[Trace]) -> dict[str, int]:
    counts = Counter(t.outcome or "unfinished" for t in traces)
    return dict(sorted(counts.items()))


def _series(traces: Sequence[Trace], origin: float) -> Json:
    def times(attribute: str) -> list[float]:
        values = (getattr(t, attribute) for t in traces)
        return [v for v in values if not math.isnan(v)]

    return {
        "bin_seconds": 1.0,
        "accepted": stats.per_second(times("accepted"), origin),
        "dispatched": stats.per_second(times("mirror_added"), origin),
        "finished": stats.per_second(times("finished"), origin),
    }


def _placement(traces: Sequence[Trace]) -> dict[str, int]:
    return dict(sorted(Counter(t.cluster or "-" for t in traces).items()))


# -- latency ------------------------------------------------------------------------------


async def latency(ctx: Context) -> Json:
    opts = ctx.options
    count = max(1, round(opts.latency_rate * opts.latency_duration))

    async def submitter(
        requests: Sequence[Request], done: Callable[[int, float, float], None]
    ) -> SubmitStats:
        return await paced(requests, opts.latency_rate, done)

    run = await relay_run(ctx, "latency", count, submitter)
    traces = run.traces
    return {
        "params": {
            "rate_per_s": opts.latency_rate,
            "duration_s": opts.latency_duration,
            "jobs": count,
            "pod": opts.pod.__dict__,
        },
        "complete": run.complete,
        "submit": run.submit.to_json(),
        "outcomes": _outcomes(traces),
        "placement": _placement(traces),
        **_latency_figures(traces),
        "dispatch_steps_ms": _dispatch_steps(run),
        "controller": run.controller,
        "user_window": run.user_window,
        "controller_cpu_ms_per_job": run.user_window["controller_cpu_ms_per_job"],
        "controller_cpu_ms_per_job_sampled": _sampled_cpu_per_job(run),
        "writes": run.writes,
    }


def _sampled_cpu_per_job(run: Run) -> float:
    """What ``controller_cpu_ms_per_job`` was until issue 36: the 0.5 s samples that fell
    inside the window from the first create to the last mirror deleted."""
    return 1000 * float(run.controller["cpu_seconds"]) / max(1, len(run.traces))


def _completion_ms(traces: Sequence[Trace]) -> Json:
    waits = [w for w in map(completion_latency, traces) if not math.isnan(w)]
    return {k: v * (1 if k == "count" else 1000) for k, v in stats.summarize(waits).items()}


def _writes_per_job(writes: Json, role: str, column: str = "jobrelay") -> float:
    return float(writes.get("by_cluster", {}).get(role, {}).get(f"{column}_per_job", math.nan))


# -- throughput and baseline ---------------------------------------------------------------


async def throughput_once(ctx: Context, index: int, profile: Path | None) -> Json:
    opts = ctx.options

    async def submitter(
        requests: Sequence[Request], done: Callable[[int, float, float], None]
    ) -> SubmitStats:
        return await burst(requests, opts.concurrency, done)

    run = await relay_run(ctx, "throughput", opts.jobs, submitter, profile=profile)
    traces = run.traces
    mirrors = [t.mirror_added for t in traces if not math.isnan(t.mirror_added)]
    finished = [t.finished for t in traces if not math.isnan(t.finished)]
    origin = run.origin
    total = max(finished) - origin if finished and run.complete else math.nan
    figures = _latency_figures(traces)
    figures.pop("samples")
    return {
        "repeat": index,
        "complete": run.complete,
        "submit": run.submit.to_json(),
        "outcomes": _outcomes(traces),
        "placement": _placement(traces),
        "dispatch_rate_sustained": stats.sustained_rate(mirrors),
        "dispatch_rate_overall": len(mirrors) / (max(mirrors) - origin) if mirrors else math.nan,
        "finish_rate_sustained": stats.sustained_rate(finished),
        "all_dispatched_s": max(mirrors) - origin if mirrors else math.nan,
        "all_finished_s": total,
        **figures,
        "dispatch_steps_ms": _dispatch_steps(run),
        "completion_status_ms": _completion_ms(traces),
        "series": _series(traces, origin),
        "controller": run.controller,
        # The user's view: first create to the last Job Complete on the manager, and the
        # controller's and fleet's whole CPU over exactly that window.
        "total_s": run.user_window["total_s"] if run.complete else math.nan,
        "user_window": run.user_window,
        "controller_cpu_ms_per_job": run.user_window["controller_cpu_ms_per_job"],
        "controller_cpu_ms_per_job_sampled": _sampled_cpu_per_job(run),
        "fleet_cpu_ms_per_job": run.user_window["fleet_cpu_ms_per_job"],
        "manager_writes_per_job": _writes_per_job(run.writes, "manager"),
        "worker_writes_per_job": _writes_per_job(run.writes, "workers"),
        "manager_all_writes_per_job": _writes_per_job(run.writes, "manager", "requests"),
        "worker_all_writes_per_job": _writes_per_job(run.writes, "workers", "requests"),
        "controller_series": run.sampler.series(origin),
        "writes": run.writes,
    }


async def baseline_once(ctx: Context, index: int) -> Json:
    """The same Jobs, without managedBy, created round-robin on the workers by the bench."""
    opts = ctx.options
    namespace = ctx.namespace("baseline")
    workers = ctx.fleet.workers
    await asyncio.gather(*(create_namespace(ctx.clients[w], namespace) for w in workers))
    recorder = Recorder(namespace, ctx.workers, {}, None)
    await recorder.start()
    names = [f"job-{i:05d}" for i in range(opts.jobs)]
    requests = [
        create_request(
            ctx.clients[workers[i % len(workers)]],
            job_manifest(name, namespace, ctx.run_id, opts.pod, managed_by=None),
        )
        for i, name in enumerate(names)
    ]
    try:
        before = await ctx.snapshot()
        _say(f"baseline: submitting {opts.jobs} Jobs round-robin to {', '.join(workers)}")
        at_start = ctx.read_cpu(None)
        submit = await burst(requests, opts.concurrency, _mark_submitted(recorder, names))
        complete = await wait_until(
            lambda: recorder.finished_count >= submit.ok, timeout=opts.timeout, interval=0.02
        )
        at_end = ctx.read_cpu(None)
        await asyncio.sleep(SETTLE_SECONDS)
        after = await ctx.snapshot()
    finally:
        await recorder.stop()
        await _cleanup(ctx, namespace, workers)
    traces = [t for t in recorder.traces.values() if not math.isnan(t.submitted)]
    finished = [t.finished for t in traces if not math.isnan(t.finished)]
    origin = submit.started
    writes = write_cost(before, after, len(traces))
    window = _user_window(traces, at_start, at_end)
    return {
        "repeat": index,
        "complete": complete,
        "submit": submit.to_json(),
        "outcomes": _outcomes(traces),
        "placement": _placement(traces),
        "finish_rate_sustained": stats.sustained_rate(finished),
        "all_finished_s": max(finished) - origin if finished and complete else math.nan,
        "total_s": window["total_s"] if complete else math.nan,
        "user_window": window,
        "fleet_cpu_ms_per_job": window["fleet_cpu_ms_per_job"],
        "series": _series(traces, origin),
        "fleet_writes_per_job": writes["fleet_per_job"],
        # Every write (the bench's creates, the clusters' own controllers'): the floor's.
        "manager_all_writes_per_job": _writes_per_job(writes, "manager", "requests"),
        "worker_all_writes_per_job": _writes_per_job(writes, "workers", "requests"),
        "writes": writes,
    }


async def _alternated(ctx: Context, against: Mapping[str, SourceTree]) -> tuple[list[Json], Json]:
    """``repeat`` rounds of each side, old/new/new/old ..., each controller from its tree."""
    rounds: list[tuple[str, Json]] = []
    try:
        for number, side in enumerate(alternation(ctx.options.repeat), 1):
            tree = against[side]
            ctx.controller_source = tree
            _say(f"throughput round {number}: the {side} controller ({tree.commit[:12]})")
            run = await throughput_once(ctx, number, None)
            rounds.append((side, run | {"side": side, "commit": tree.commit}))
    finally:
        ctx.controller_source = None
    return [run for side, run in rounds if side == NEW], {
        "ref": against[OLD].ref,
        "commits": {side: tree.commit for side, tree in against.items()},
        "order": [side for side, _ in rounds],
        "old_runs": [run for side, run in rounds if side == OLD],
        "compare": compare(rounds),
    }


async def throughput_and_baseline(
    ctx: Context,
    *,
    throughput: bool,
    baseline: bool,
    profile: Path | None,
    against: Mapping[str, SourceTree] | None = None,
) -> Json:
    """``repeat`` rounds, each a jobrelay run then a baseline run, so both see the same machine.

    With ``against`` (old and new source trees): throughput rounds only, alternated.
    """
    relay_runs: list[Json] = []
    base_runs: list[Json] = []
    alternated: Json | None = None
    if against is not None:
        relay_runs, alternated = await _alternated(ctx, against)
    for index in range(ctx.options.repeat if against is None else 0):
        if throughput:
            relay_runs.append(
                await throughput_once(ctx, index + 1, profile if index == 0 else None)
            )
        if baseline:
            base_runs.append(await baseline_once(ctx, index + 1))
    result: Json = {
        "params": {
            "jobs": ctx.options.jobs,
            "concurrency": ctx.options.concurrency,
            "repeat": ctx.options.repeat,
            "pod": ctx.options.pod.__dict__,
        }
    }
    if relay_runs:
        result["throughput"] = {
            "runs": relay_runs,
            "median": {
                key: stats.median(r[key] for r in relay_runs)
                for key in (
                    "dispatch_rate_sustained",
                    "dispatch_rate_overall",
                    "finish_rate_sustained",
                    "all_dispatched_s",
                    "all_finished_s",
                )
            }
            | {
                "submit_rate": stats.median(r["submit"]["rate_per_s"] for r in relay_runs),
                "dispatch_p50_ms": stats.median(r["dispatch_ms"]["p50"] for r in relay_runs),
                "dispatch_p99_ms": stats.median(r["dispatch_ms"]["p99"] for r in relay_runs),
                "jobrelay_writes_per_job": stats.median(
                    r["writes"]["jobrelay_per_job"] for r in relay_runs
                ),
                "controller_cpu_mean_pct": stats.median(
                    r["controller"]["cpu_mean_pct"] for r in relay_runs
                ),
                "controller_cpu_ms_per_job": stats.median(
                    r["controller_cpu_ms_per_job"] for r in relay_runs
                ),
                "controller_cpu_ms_per_job_sampled": stats.median(
                    r["controller_cpu_ms_per_job_sampled"] for r in relay_runs
                ),
                "total_s": stats.median(r["total_s"] for r in relay_runs),
                "fleet_cpu_ms_per_job": stats.median(r["fleet_cpu_ms_per_job"] for r in relay_runs),
                "manager_writes_per_job": stats.median(
                    r["manager_writes_per_job"] for r in relay_runs
                ),
                "worker_writes_per_job": stats.median(
                    r["worker_writes_per_job"] for r in relay_runs
                ),
                "status_p50_ms": stats.median(r["status_ms"]["p50"] for r in relay_runs),
                "completion_status_p50_ms": stats.median(
                    r["completion_status_ms"]["p50"] for r in relay_runs
                ),
                "controller_rss_peak_mib": stats.median(
                    r["controller"]["rss_peak_mib"] for r in relay_runs
                ),
            },
        }
    if base_runs:
        result["baseline"] = {
            "runs": base_runs,
            "median": {
                "all_finished_s": stats.median(r["all_finished_s"] for r in base_runs),
                "finish_rate_sustained": stats.median(
                    r["finish_rate_sustained"] for r in base_runs
                ),
                "submit_rate": stats.median(r["submit"]["rate_per_s"] for r in base_runs),
                "fleet_writes_per_job": stats.median(r["fleet_writes_per_job"] for r in base_runs),
                "total_s": stats.median(r["total_s"] for r in base_runs),
                "fleet_cpu_ms_per_job": stats.median(r["fleet_cpu_ms_per_job"] for r in base_runs),
            },
        }
    if alternated is not None and "throughput" in result:
        result["throughput"]["against"] = alternated
    if relay_runs and base_runs:
        pairs = [
            r["all_finished_s"] / b["all_finished_s"]
            for r, b in zip(relay_runs, base_runs, strict=True)
        ]
        result["ratio"] = {
            "per_round": pairs,
            "median_of_rounds": stats.median(pairs),
            "of_medians": result["throughput"]["median"]["all_finished_s"]
            / result["baseline"]["median"]["all_finished_s"],
        }
    return result


# -- scale -----------------------------------------------------------------------------------


async def scale(ctx: Context) -> Json:
    """Many managed Jobs held (created suspended): the controller's RSS and CPU over phases."""
    opts = ctx.options
    namespace = ctx.namespace("scale")
    await create_namespace(ctx.manager, namespace)
    recorder = Recorder(namespace, {MANAGER: ctx.manager}, ctx.workers, MIRROR_SELECTOR)
    await recorder.start()
    names = [f"job-{index:05d}" for index in range(opts.scale_jobs)]
    result: Json = {
        "params": {
            "jobs": opts.scale_jobs,
            "idle_s": opts.scale_idle,
            "resume": opts.scale_resume,
            "concurrency": opts.concurrency,
        }
    }
    phases: dict[str, Json] = {}
    try:
        async with _controller(ctx, namespace) as (_, sampler, info):
            start = time.monotonic()
            await asyncio.sleep(2.0)
            phases["empty"] = sampler.window(start, time.monotonic())

            # Ingest: N suspended Jobs, each answered by jobrelay with a status write.
            before = await ctx.snapshot()
            _say(f"scale: creating {opts.scale_jobs} suspended Jobs in {namespace}")
            requests = [
                create_request(
                    ctx.manager,
                    job_manifest(
                        name,
                        namespace,
                        ctx.run_id,
                        opts.pod,
                        managed_by=DEFAULT_CONTROLLER_NAME,
                        suspend=True,
                    ),
                )
                for name in names
            ]
            submit = await burst(requests, opts.concurrency, _mark_submitted(recorder, names))
            held = await wait_until(
                lambda: recorder.suspended_count >= submit.ok, timeout=opts.timeout
            )
            ingest_end = time.monotonic()
            after = await ctx.snapshot()
            seen = [t.suspended_seen for t in recorder.traces.values()]
            seen = [s for s in seen if not math.isnan(s)]
            phases["ingest"] = sampler.window(submit.started, ingest_end) | {
                "create_rate_per_s": submit.to_json()["rate_per_s"],
                "all_held_s": ingest_end - submit.started,
                "status_write_rate_sustained": stats.sustained_rate(seen),
                "held": recorder.suspended_count,
                "complete": held,
                "writes": write_cost(before, after, submit.ok),
            }

            # Idle: nothing changes; the periodic full resync still runs.
            _say(f"scale: idle for {opts.scale_idle:.0f}s with {recorder.suspended_count} held")
            idle_start = time.monotonic()
            await asyncio.sleep(opts.scale_idle)
            phases["idle"] = sampler.window(idle_start, time.monotonic())

            # Burst: resume some of them at once.
            resumed = names[: opts.scale_resume]
            _say(f"scale: resuming {len(resumed)} Jobs")
            sent: dict[str, float] = {}

            def on_resumed(index: int, at: float, answered: float) -> None:
                sent[f"{namespace}/{resumed[index]}"] = at

            before = await ctx.snapshot()
            resume = await burst(
                [resume_request(ctx.manager, n, namespace) for n in resumed],
                opts.concurrency,
                on_resumed,
            )
            keys = [f"{namespace}/{n}" for n in resumed]

            def resumed_done() -> bool:
                traces = [recorder.trace(k) for k in keys]
                return all(
                    not math.isnan(t.finished) and not math.isnan(t.mirror_deleted) for t in traces
                )

            done = await wait_until(resumed_done, timeout=opts.timeout)
            burst_end = time.monotonic()
            await asyncio.sleep(SETTLE_SECONDS)
            after = await ctx.snapshot()
            traces = [recorder.trace(k) for k in keys]
            mirrors = [t.mirror_added for t in traces if not math.isnan(t.mirror_added)]
            dispatch = [
                t.mirror_added - sent[t.key]
                for t in traces
                if t.key in sent and not math.isnan(t.mirror_added)
            ]
            phases["burst"] = sampler.window(resume.started, burst_end) | {
                "complete": done,
                "all_finished_s": burst_end - resume.started,
                "dispatch_rate_sustained": stats.sustained_rate(mirrors),
                "dispatch_ms": {
                    k: v * (1 if k == "count" else 1000)
                    for k, v in stats.summarize(dispatch).items()
                },
                "writes": write_cost(before, after, len(resumed), floor_of(traces)),
            }
            settle_start = time.monotonic()
            await asyncio.sleep(min(10.0, opts.scale_idle))
            phases["after_burst"] = sampler.window(settle_start, time.monotonic())
            result["controller_series"] = sampler.series(start)
        result["controller"] = info

        # Restart with everything held: how long until it is ready again, and what it costs.
        _say("scale: restarting the controller")
        async with _controller(ctx, namespace) as (process, sampler, info):
            restart_start = process.started_at
            await asyncio.sleep(5.0)
            phases["restart"] = sampler.window(restart_start, time.monotonic()) | {
                "ready_s": info["ready_seconds"],
                "cpu_seconds_to_ready": info.get("cpu_seconds_to_ready", math.nan),
                "rss_at_ready_mib": info.get("rss_at_ready_mib", math.nan),
            }
        phases["restart"]["exit_code"] = info["exit_code"]
    finally:
        await recorder.stop()
        await _cleanup(ctx, namespace, ctx.fleet.clusters)
    empty = phases.get("empty", {}).get("rss_end_mib", math.nan)
    idle = phases.get("idle", {}).get("rss_mean_mib", math.nan)
    result["phases"] = phases
    result["rss_per_held_job_kib"] = (idle - empty) * 1024 / opts.scale_jobs
    return result


# -- API cost -----------------------------------------------------------------------------------


async def api_cost(ctx: Context) -> Json:
    """Jobs at a moderate steady rate, and every write request they cost, by cluster and verb."""
    opts = ctx.options

    async def submitter(
        requests: Sequence[Request], done: Callable[[int, float, float], None]
    ) -> SubmitStats:
        return await paced(requests, opts.api_rate, done)

    run = await relay_run(ctx, "api", opts.api_jobs, submitter)
    traces = run.traces
    floor = floor_of(traces)
    mirrored = max(1, floor[CREATE])
    return {
        "params": {"jobs": opts.api_jobs, "rate_per_s": opts.api_rate, "pod": opts.pod.__dict__},
        "complete": run.complete,
        "outcomes": _outcomes(traces),
        "distinct_mirror_statuses_per_job": floor[STATUS] / mirrored,
        "distinct_mirror_summaries_per_job": sum(max(0, len(t.mirror_states) - 1) for t in traces)
        / mirrored,
        "writes": run.writes,
        "controller": run.controller,
    }
