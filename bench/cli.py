"""``python -m bench [SCENARIO ...]``: the command line, and the order scenarios run in."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import click

from bench import plot, report, scenarios
from bench.against_ref import NEW, OLD, SourceTree, checkout, this_tree
from bench.fleetctl import MANAGER, Fleet, FleetError, FleetShape
from bench.workload import PodShape

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = ("latency", "throughput", "baseline", "scale", "api")


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument(
    "selected", metavar="[SCENARIO]...", nargs=-1, type=click.Choice([*SCENARIOS, "all"])
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Reuse the healthy fleet there, or bring one up there "
    "[default: a temporary fleet, deleted at the end].",
)
@click.option("--keep-fleet", is_flag=True, help="Leave a fleet this run brought up running.")
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Workers of a fleet brought up here.",
)
@click.option("--nodes-per-cluster", default=8, show_default=True, type=click.IntRange(1, 1000))
@click.option("--node-cpu", default="64", show_default=True)
@click.option("--node-memory", default="256Gi", show_default=True)
@click.option(
    "--latency-rate",
    default=20.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="latency: Jobs per second.",
)
@click.option(
    "--latency-duration",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="latency: seconds of submission.",
)
@click.option(
    "--jobs",
    default=2000,
    show_default=True,
    type=click.IntRange(1),
    help="throughput and baseline: Jobs per round.",
)
@click.option(
    "--concurrency",
    default=50,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Create (and resume) requests in flight at once in bursts.",
)
@click.option(
    "--repeat",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="throughput and baseline: rounds (medians are reported).",
)
@click.option(
    "--scale-jobs",
    default=10_000,
    show_default=True,
    type=click.IntRange(1),
    help="scale: managed Jobs held (created suspended).",
)
@click.option(
    "--scale-idle",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1.0),
    help="scale: seconds of the idle phase (the controller's full resync runs every 60 s).",
)
@click.option(
    "--scale-resume",
    default=1000,
    show_default=True,
    type=click.IntRange(0),
    help="scale: Jobs resumed at once in the burst phase.",
)
@click.option(
    "--api-jobs",
    default=300,
    show_default=True,
    type=click.IntRange(1),
    help="api: Jobs submitted.",
)
@click.option(
    "--api-rate",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="api: Jobs per second.",
)
@click.option(
    "--pod-duration",
    default="1s",
    show_default=True,
    help="How long each Job's pod runs (Go duration).",
)
@click.option("--pod-cpu", default="10m", show_default=True, help="Each pod's CPU request.")
@click.option(
    "--timeout",
    default=900.0,
    show_default=True,
    type=click.FloatRange(1.0),
    help="Longest wait for one run's Jobs to finish (s).",
)
@click.option(
    "--cleanup-timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(1.0),
    help="Longest wait for a run's namespace to be deleted (s).",
)
@click.option(
    "--controller-arg",
    "controller_args",
    multiple=True,
    metavar="ARG",
    help="Extra argument for `jobrelay run`, e.g. --controller-arg=--concurrency=32 (repeatable).",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Record the controller with py-spy during the first throughput round "
    "(flame graph SVG next to the results).",
)
@click.option(
    "--profile-format",
    type=click.Choice(["flamegraph", "speedscope", "raw"]),
    default="flamegraph",
    show_default=True,
    help="py-spy output: SVG flame graph, speedscope JSON, or raw collapsed stacks.",
)
@click.option(
    "--results-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=REPO / "bench" / "results",
    show_default=True,
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where controller logs go [default: a new temporary directory].",
)
@click.option(
    "--docs",
    "docs_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=REPO / "docs" / "performance.md",
    show_default=True,
    help="Page whose Latest results section is rewritten.",
)
@click.option("--no-docs", is_flag=True, help="Do not rewrite the docs page.")
@click.option("--no-plot", is_flag=True, help="Do not draw the PNG.")
@click.option(
    "--against",
    metavar="REF",
    default=None,
    help="throughput: alternate --repeat rounds of REF's controller (a git ref, checked out "
    "in a temporary worktree) with as many of this tree's, old/new/new/old..., on one fleet; "
    "reports each side's medians and new/old.",
)
def main(
    selected: tuple[str, ...],
    state_dir: Path | None,
    keep_fleet: bool,
    workers: int,
    nodes_per_cluster: int,
    node_cpu: str,
    node_memory: str,
    latency_rate: float,
    latency_duration: float,
    jobs: int,
    concurrency: int,
    repeat: int,
    scale_jobs: int,
    scale_idle: float,
    scale_resume: int,
    api_jobs: int,
    api_rate: float,
    pod_duration: str,
    pod_cpu: str,
    timeout: float,
    cleanup_timeout: float,
    controller_args: tuple[str, ...],
    profile: bool,
    profile_format: str,
    results_dir: Path,
    log_dir: Path | None,
    docs_path: Path,
    no_docs: bool,
    no_plot: bool,
    against: str | None,
) -> None:
    """Benchmark jobrelay on a local fleet: SCENARIO is latency, throughput, baseline, scale,
    api or all (the default). Every size is a flag, so a quick run is e.g.

    \b
      python -m bench --state-dir /tmp/f --latency-duration 10 --jobs 200 \\
          --repeat 1 --scale-jobs 1000 --scale-idle 10 --scale-resume 100 --api-jobs 50

    Results: bench/results/<stamp>.{json,md,png}; docs/performance.md is rewritten.
    Fair share of RelayQueues on 32 CPUs: `python -m bench fairshare` (its own flags).
    """
    wanted = [s for s in SCENARIOS if s in selected or "all" in selected or not selected]
    if against is not None and "baseline" in wanted:
        raise click.UsageError("--against alternates throughput rounds only: leave out baseline")
    if against is not None and "throughput" not in wanted:
        raise click.UsageError("--against needs the throughput scenario")
    options = scenarios.Options(
        latency_rate=latency_rate,
        latency_duration=latency_duration,
        jobs=jobs,
        concurrency=concurrency,
        repeat=repeat,
        scale_jobs=scale_jobs,
        scale_idle=scale_idle,
        scale_resume=min(scale_resume, scale_jobs),
        api_jobs=api_jobs,
        api_rate=api_rate,
        pod=PodShape(duration=pod_duration, cpu=pod_cpu),
        timeout=timeout,
        cleanup_timeout=cleanup_timeout,
        controller_args=controller_args,
        profile=profile,
    )
    started = datetime.datetime.now(datetime.UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    logs = log_dir or Path(tempfile.mkdtemp(prefix=f"jobrelay-bench-{stamp}-"))
    shape = FleetShape(workers, nodes_per_cluster, node_cpu, node_memory)
    try:
        fleet = Fleet.ensure(state_dir, shape)
    except FleetError as error:
        raise click.ClickException(str(error)) from error
    result: dict[str, Any] = {
        "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": report.command_line(),
        "machine": report.machine_info(REPO),
        "params": {
            "scenarios": wanted,
            **options.__dict__,
            "pod": options.pod.__dict__,
            "controller_args": list(controller_args),
            "against": against,
        },
        "logs": str(logs),
        "fleet": fleet.record(),
        "scenarios": {},
        "errors": {},
    }
    try:
        monitor = report.LoadMonitor(fleet.state_dir)
        suffix = {"flamegraph": ".svg", "speedscope": ".json", "raw": ".txt"}[profile_format]
        profile_path = results_dir / f"{stamp}-throughput-profile{suffix}" if profile else None
        with contextlib.ExitStack() as trees:
            sides = None
            if against is not None:
                click.echo(f"bench: checking out {against} for the old controller", err=True)
                sides = {OLD: trees.enter_context(checkout(REPO, against)), NEW: this_tree(REPO)}
            asyncio.run(_run(fleet, options, wanted, stamp, logs, profile_path, result, sides))
        result["load"] = monitor.result()
    except KeyboardInterrupt:
        result["errors"]["interrupted"] = "KeyboardInterrupt"
        click.echo("bench: interrupted; writing what was measured", err=True)
    finally:
        if not keep_fleet:
            fleet.down()
        elif fleet.started_here:
            click.echo(f"bench: the fleet stays up in {fleet.state_dir}", err=True)
    result["fleet"]["kubernetes"] = result.pop("kubernetes", "unknown")
    _write(
        result, results_dir, stamp, docs_path=None if no_docs else docs_path, plot_it=not no_plot
    )
    if result["errors"]:
        sys.exit(1)


async def _run(
    fleet: Fleet,
    options: scenarios.Options,
    wanted: list[str],
    stamp: str,
    logs: Path,
    profile: Path | None,
    result: dict[str, Any],
    against: dict[str, SourceTree] | None = None,
) -> None:
    run_id = stamp[9:15].lower()  # HHMMSS: namespaces bench-<scenario>-<HHMMSS>-<n>
    ctx = scenarios.Context(fleet, options, run_id, logs)
    try:
        result["kubernetes"] = await ctx.metrics[MANAGER].version()
        steps: list[tuple[str, Any]] = []
        if "latency" in wanted:
            steps.append(("latency", lambda: scenarios.latency(ctx)))
        if "throughput" in wanted or "baseline" in wanted:
            steps.append(
                (
                    "throughput",
                    lambda: scenarios.throughput_and_baseline(
                        ctx,
                        throughput="throughput" in wanted,
                        baseline="baseline" in wanted,
                        profile=profile,
                        against=against,
                    ),
                )
            )
        if "scale" in wanted:
            steps.append(("scale", lambda: scenarios.scale(ctx)))
        if "api" in wanted:
            steps.append(("api", lambda: scenarios.api_cost(ctx)))
        for name, step in steps:
            click.echo(f"bench: --- {name} ---", err=True)
            try:
                result["scenarios"][name] = await step()
            except Exception as error:  # one broken scenario must not lose the others
                traceback.print_exc()
                result["errors"][name] = f"{type(error).__name__}: {error}"
    finally:
        await ctx.aclose()


def _write(
    result: dict[str, Any], results_dir: Path, stamp: str, *, docs_path: Path | None, plot_it: bool
) -> None:
    markdown = report.render_markdown(result)
    base = results_dir / stamp
    report.write_json(base.with_suffix(".json"), result)
    base.with_suffix(".md").write_text(markdown)
    click.echo(markdown)
    click.echo(f"bench: results in {base}.json and {base}.md", err=True)
    if plot_it:
        click.echo(f"bench: {plot.plot(result, base.with_suffix('.png'))}", err=True)
    if docs_path is not None:
        report.write_docs(docs_path, markdown)
        click.echo(f"bench: {docs_path} updated", err=True)
    click.echo(f"bench: controller logs in {result['logs']}", err=True)
