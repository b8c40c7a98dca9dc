"""``python -m bench fairshare``: weighted fair share over a local fleet of about 32 CPUs.

Three RelayQueues with weights 1:1:2 and no quota, one namespace each (selected by a
namespace label), each flooded with more 1-CPU Jobs than the fleet holds (each running
a seeded random 10-30 s). Every second the bench counts each queue's running CPU from
the workers' pods (phase Running, their CPU requests) and each queue's Jobs still
waiting (no mirror yet); the shares over the saturated period (every queue still
waiting, the fleet full) are compared with 25 / 25 / 50 %.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import random
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from bench import fair_share_rules as rules
from bench import plot, report, scenarios
from bench.fleetctl import MANAGER, Fleet, FleetError, FleetShape
from bench.recorder import Recorder
from bench.workload import RUN_LABEL, PodShape, burst, create_request, job_manifest
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES, NODES, PODS, RELAY_QUEUES
from jobrelay.kube.watching import Informer, InformerOptions
from jobrelay.placement.units import to_units
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

Json = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
QUEUE_WEIGHTS = {"a": 1.0, "b": 1.0, "c": 2.0}
NAMESPACE_LABEL = "bench.jobrelay.dev/fair-queue"
PRINT_EVERY = 10.0  # seconds between rows of the printed time series


def _say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def slim_pod(obj: Json) -> Json:
    """Informer transform: where a pod runs, its phase, its CPU request (millicores)."""
    metadata = obj.get("metadata") or {}
    containers = (obj.get("spec") or {}).get("containers") or []
    cpu = 0
    for container in containers:
        requests = (container.get("resources") or {}).get("requests") or {}
        with contextlib.suppress(ValueError, TypeError):
            cpu += to_units("cpu", requests.get("cpu", 0))
    return {
        "metadata": {
            k: metadata[k] for k in ("name", "namespace", "resourceVersion") if k in metadata
        },
        "phase": (obj.get("status") or {}).get("phase"),
        "deleting": bool(metadata.get("deletionTimestamp")),
        "cpu_milli": cpu,
    }


def running_cpu(pods: list[Json], queue_of: Mapping[str, str]) -> dict[str, float]:
    """CPUs of the Running pods per queue (a pod being deleted no longer counts)."""
    running = dict.fromkeys(queue_of.values(), 0.0)
    for pod in pods:
        queue = queue_of.get(pod["metadata"].get("namespace", ""))
        if queue is not None and pod["phase"] == "Running" and not pod["deleting"]:
            running[queue] += pod["cpu_milli"] / 1000
    return running


async def fleet_cpu(workers: Mapping[str, ApiClient]) -> float:
    """The workers' allocatable CPUs, summed over their nodes."""
    total = 0
    for client in workers.values():
        for node in (await client.list(NODES)).items:
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            total += to_units("cpu", allocatable.get("cpu", 0))
    return total / 1000


def queue_manifest(name: str, weight: float, selector_value: str) -> Json:
    return {
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "RelayQueue",
        "metadata": {"name": name},
        "spec": {
            "weight": weight,
            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: selector_value}},
        },
    }


async def _create(client: ApiClient, resource: Any, body: Json) -> None:
    try:
        await client.create(resource, body)
    except ApiError as error:
        if not error.is_already_exists:
            raise


async def _delete(client: ApiClient, resource: Any, name: str) -> None:
    try:
        await client.delete(resource, name)
    except ApiError as error:
        if not error.is_not_found:
            raise


async def run(ctx: scenarios.Context, jobs_per_queue: int, seed: int, timeout: float) -> Json:
    """The scenario; returns its figures (samples included)."""
    rng = random.Random(seed)
    queues = {f"bench-fair-{ctx.run_id}-{q}": w for q, w in QUEUE_WEIGHTS.items()}
    namespace_of = {queue: queue for queue in queues}  # one namespace per queue, same name
    queue_of = {namespace: queue for queue, namespace in namespace_of.items()}
    capacity = await fleet_cpu(ctx.workers)
    _say(f"fairshare: the workers hold {capacity:g} allocatable CPUs")
    if not 24 <= capacity <= 40:
        _say(
            "fairshare: the issue's demonstration is on about 32 CPUs; reuse a fleet of that "
            "shape, or let the bench bring one up (--workers 2 --nodes-per-cluster 2 --node-cpu 8)"
        )
    options = InformerOptions(watch_timeout_seconds=1800, inactivity_timeout=150.0)
    pods = [
        Informer(client, PODS, label_selector=f"{RUN_LABEL}={ctx.run_id}", transform=slim_pod,
                 options=options)
        for client in ctx.workers.values()
    ]  # fmt: skip
    recorders = {
        queue: Recorder(namespace, {MANAGER: ctx.manager}, ctx.workers, scenarios.MIRROR_SELECTOR)
        for queue, namespace in namespace_of.items()
    }
    durations: dict[str, list[int]] = {queue: [] for queue in queues}
    requests = []
    for index in range(jobs_per_queue):  # round-robin: no queue is submitted first
        for queue, namespace in namespace_of.items():
            seconds = rng.randint(10, 30)
            durations[queue].append(seconds)
            pod = PodShape(duration=f"{seconds}s", cpu="1", memory="16Mi")
            body = job_manifest(f"job-{index:04d}", namespace, ctx.run_id, pod,
                                managed_by=DEFAULT_CONTROLLER_NAME)  # fmt: skip
            requests.append(create_request(ctx.manager, body))
    samples: list[rules.Sample] = []
    result: Json = {
        "params": {
            "jobs_per_queue": jobs_per_queue,
            "seed": seed,
            "weights": queues,
            "pod": "each 1 CPU for 10-30 s (uniform, whole seconds)",
        },
        "capacity_cpu": capacity,
    }
    try:
        async with scenarios._controller(ctx, f"bench-fair-{ctx.run_id}") as (process, _, info):
            for queue, weight in queues.items():
                await _create(ctx.manager, RELAY_QUEUES, queue_manifest(queue, weight, queue))
                await _create(ctx.manager, NAMESPACES, {
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": namespace_of[queue], "labels": {NAMESPACE_LABEL: queue}},
                })  # fmt: skip
            for informer in pods:
                informer.start()
            for informer in pods:
                await informer.wait_synced()
            for recorder in recorders.values():
                await recorder.start()
            _say(f"fairshare: submitting {len(requests)} Jobs into {', '.join(queues)}")
            submit = await burst(requests, ctx.options.concurrency, lambda *_: None)
            result["submit"] = submit.to_json()
            origin = submit.started
            deadline = time.monotonic() + timeout
            total = {queue: jobs_per_queue for queue in queues}
            while process.running and time.monotonic() < deadline:
                now = time.monotonic()
                running = running_cpu([p for i in pods for p in i.values()], queue_of)
                pending = {
                    queue: total[queue]
                    - sum(1 for t in recorder.traces.values() if not math.isnan(t.mirror_added))
                    for queue, recorder in recorders.items()
                }
                samples.append(rules.Sample(round(now - origin, 2), running, pending))
                if len(samples) % int(PRINT_EVERY) == 0:
                    _say(f"fairshare: t={now - origin:5.0f}s running {_cpus(running)} "
                         f"pending {pending}")  # fmt: skip
                if all(r.finished_count >= total[q] for q, r in recorders.items()):
                    break
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
            if not process.running:
                _say(f"fairshare: the controller died; its log ends:\n{process.log_tail()}")
            finished = {q: r.finished_count for q, r in recorders.items()}
            result["finished"] = finished
            result["complete"] = all(finished[q] >= total[q] for q in queues)
            result["seconds_to_all_finished"] = time.monotonic() - origin
        result["controller"] = info
    finally:
        for informer in pods:
            await informer.stop()
        for recorder in recorders.values():
            await recorder.stop()
        for queue in queues:
            with contextlib.suppress(ApiError):
                await _delete(ctx.manager, RELAY_QUEUES, queue)
        await asyncio.gather(
            *(scenarios._cleanup(ctx, namespace, ctx.fleet.clusters)
              for namespace in namespace_of.values())
        )  # fmt: skip
    summary = rules.summarize(samples, queues, capacity)
    result["summary"] = asdict(summary)
    result["samples"] = [asdict(s) for s in samples]
    result["durations_mean_s"] = {q: sum(d) / len(d) for q, d in durations.items() if d}
    return result


def _cpus(values: Mapping[str, float]) -> str:
    return "/".join(f"{v:g}" for v in values.values())


def render_markdown(result: Json) -> str:
    """The report: parameters, the time series every 10 s, the final shares, the verdict."""
    data = result["scenario"]
    queues = list(data["params"]["weights"])
    short = {queue: queue.rsplit("-", 1)[-1] for queue in queues}
    samples = [rules.Sample(s["at"], s["running"], s["pending"]) for s in data["samples"]]
    summary = data["summary"]
    weights = data["params"]["weights"]
    lines = [
        f"## jobrelay fair-share benchmark — {result['started_utc']}",
        "",
        f"`{result['command']}`",
        "",
        f"Fleet: {', '.join(result['fleet']['workers'])} ({result['fleet']['shape']}), "
        f"{data['capacity_cpu']:g} allocatable CPUs on the workers; Kubernetes "
        f"{result['fleet'].get('kubernetes', '?')}. Machine: {result['machine']['nproc']} CPUs, "
        f"jobrelay {result['machine'].get('jobrelay_commit', '?')}.",
        "",
        f"Queues {', '.join(f'{short[q]} (weight {weights[q]:g})' for q in queues)}, no quota; "
        f"{data['params']['jobs_per_queue']} Jobs per queue, {data['params']['pod']}, "
        f"seed {data['params']['seed']}, all submitted at once (round-robin over the queues).",
        "",
        "### Over time (running CPU per queue, and Jobs waiting)",
        "",
        "| t (s) | " + " | ".join(f"{short[q]} CPU" for q in queues) + " | total | "
        + " | ".join(f"{short[q]} share" for q in queues) + " | "
        + " | ".join(f"{short[q]} waiting" for q in queues) + " |",
        "|" + " --- |" * (2 + 3 * len(queues)),
    ]  # fmt: skip
    for sample in rules.every(samples, PRINT_EVERY):
        shares = rules.share_series([sample], queues)
        lines.append(
            f"| {sample.at:.0f} | "
            + " | ".join(f"{sample.running.get(q, 0):g}" for q in queues)
            + f" | {sample.total:g} | "
            + " | ".join(f"{100 * shares[q][0]:.0f} %" for q in queues)
            + " | "
            + " | ".join(str(sample.pending.get(q, 0)) for q in queues)
            + " |"
        )
    lines += ["", "### Shares over the saturated period", ""]
    if summary["start"] is None:
        lines.append("No saturated period: the fleet never filled while every queue waited.")
    else:
        lines += [
            f"From t = {summary['start']:.0f} s to {summary['end']:.0f} s ({summary['samples']} "
            f"samples; the fleet {100 * summary['utilization']:.0f} % busy on average).",
            "",
            "| queue | weight | target | measured | deviation |",
            "| --- | --- | --- | --- | --- |",
        ]
        for queue in queues:
            lines.append(
                f"| {short[queue]} | {weights[queue]:g} | {100 * summary['targets'][queue]:.1f} % "
                f"| {100 * summary['shares'][queue]:.1f} % "
                f"| {summary['deviation_pp'][queue]:+.1f} pp |"
            )
    verdict = "PASS" if summary["passed"] else "FAIL"
    lines += [
        "",
        f"**{verdict}**: max deviation {summary['max_deviation_pp']:.1f} pp "
        f"(tolerance ±{rules.TOLERANCE_PP:g} pp). All Jobs finished: "
        f"{'yes' if data.get('complete') else 'NO'} "
        f"({data.get('seconds_to_all_finished', float('nan')):.0f} s).",
        "",
    ]
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Reuse the healthy fleet there, or bring one up there "
              "[default: a temporary fleet, deleted at the end].")  # fmt: skip
@click.option("--keep-fleet", is_flag=True, help="Leave a fleet this run brought up running.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 20),
              help="Workers of a fleet brought up here.")  # fmt: skip
@click.option("--nodes-per-cluster", default=2, show_default=True, type=click.IntRange(1, 1000))
@click.option("--node-cpu", default="8", show_default=True,
              help="With the defaults: 2 workers x 2 nodes x 8 CPUs = 32 CPUs.")  # fmt: skip
@click.option("--jobs-per-queue", default=150, show_default=True, type=click.IntRange(1))
@click.option("--seed", default=24, show_default=True, type=int, help="Of the Jobs' durations.")
@click.option("--concurrency", default=50, show_default=True, type=click.IntRange(1, 1000),
              help="Create requests in flight at once.")  # fmt: skip
@click.option("--timeout", default=1800.0, show_default=True, type=click.FloatRange(1.0),
              help="Longest wait for every Job to finish (s).")  # fmt: skip
@click.option("--controller-arg", "controller_args", multiple=True, metavar="ARG",
              help="Extra argument for `jobrelay run` (repeatable).")  # fmt: skip
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path),
              default=REPO / "bench" / "results", show_default=True)  # fmt: skip
@click.option("--no-plot", is_flag=True, help="Do not draw the PNG.")
def main(
    state_dir: Path | None,
    keep_fleet: bool,
    workers: int,
    nodes_per_cluster: int,
    node_cpu: str,
    jobs_per_queue: int,
    seed: int,
    concurrency: int,
    timeout: float,
    controller_args: tuple[str, ...],
    results_dir: Path,
    no_plot: bool,
) -> None:
    """Fair share: three RelayQueues weighted 1:1:2 flood a fleet of about 32 CPUs with
    1-CPU Jobs; each queue's share of the running CPU over the saturated period must be
    within 5 percentage points of 25 / 25 / 50 %. Results: bench/results/<stamp>-fairshare.*"""
    started = datetime.datetime.now(datetime.UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    logs = Path(tempfile.mkdtemp(prefix=f"jobrelay-bench-{stamp}-"))
    try:
        fleet = Fleet.ensure(state_dir, FleetShape(workers, nodes_per_cluster, node_cpu, "32Gi"))
    except FleetError as not_up:
        raise click.ClickException(str(not_up)) from not_up
    options = scenarios.Options(concurrency=concurrency, timeout=timeout,
                                controller_args=controller_args)  # fmt: skip
    result: Json = {
        "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": report.command_line(),
        "machine": report.machine_info(REPO),
        "logs": str(logs),
        "fleet": fleet.record(),
    }
    error: str | None = None
    try:
        monitor = report.LoadMonitor(fleet.state_dir)
        result["scenario"] = asyncio.run(_run(fleet, options, stamp, logs, result,
                                              jobs_per_queue, seed))  # fmt: skip
        result["load"] = monitor.result()
    except KeyboardInterrupt:
        error = "interrupted"
    except Exception as failure:  # the fleet is stopped and the cause said in one line
        error = f"{type(failure).__name__}: {failure}"
    finally:
        if not keep_fleet:
            fleet.down()
        elif fleet.started_here:
            _say(f"the fleet stays up in {fleet.state_dir}")
    if error is not None or "scenario" not in result:
        raise click.ClickException(f"fairshare: {error}; controller logs in {logs}")
    markdown = render_markdown(result)
    base = results_dir / f"{stamp}-fairshare"
    report.write_json(base.with_suffix(".json"), result)
    base.with_suffix(".md").write_text(markdown)
    click.echo(markdown)
    _say(f"results in {base}.json and {base}.md; controller logs in {logs}")
    if not no_plot:
        _say(plot.plot_shares(result, base.with_suffix(".png")))
    if not result["scenario"]["summary"]["passed"]:
        sys.exit(1)


async def _run(fleet: Fleet, options: scenarios.Options, stamp: str, logs: Path, result: Json,
               jobs_per_queue: int, seed: int) -> Json:  # fmt: skip
    ctx = scenarios.Context(fleet, options, stamp[9:15].lower(), logs)
    try:
        result["fleet"]["kubernetes"] = await ctx.metrics[MANAGER].version()
        return await run(ctx, jobs_per_queue, seed, options.timeout)
    finally:
        await ctx.aclose()
