"""``python -m bench peer``: the floor against jobrelay, in one run on one fleet.

Our own version of the independent harness issue 36 is judged by. The same
one-pod Jobs are run twice, back to back:

1. **the floor**: created by the bench round-robin directly on the workers
   (no ``managedBy``, no jobrelay), from the first create to every Job seen
   Complete on its worker;
2. **jobrelay**: created on the manager with ``managedBy``, from the first
   create to every Job seen Complete on the manager.

It reports both times, jobrelay ÷ floor, the controller's whole CPU over
jobrelay's window per Job, the fleet's CPU over each window, and the writes
per Job on the manager and on the workers of both.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from bench import report, scenarios
from bench.fleetctl import MANAGER, Fleet, FleetError, FleetShape
from bench.workload import PodShape

Json = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
SECTION = "## Peer harness: the floor against jobrelay"


def summarize(floor: Json, relay: Json) -> Json:
    """The figures the harness is judged on, from a floor run and a jobrelay run."""
    floor_s = floor.get("total_s", float("nan"))
    relay_s = relay.get("total_s", float("nan"))
    return {
        "floor_s": floor_s,
        "jobrelay_s": relay_s,
        "ratio": relay_s / floor_s if floor_s > 0 and not math.isnan(relay_s) else math.nan,
        "controller_cpu_ms_per_job": relay.get("controller_cpu_ms_per_job", float("nan")),
        "fleet_cpu_ms_per_job": {
            "floor": floor.get("fleet_cpu_ms_per_job", float("nan")),
            "jobrelay": relay.get("fleet_cpu_ms_per_job", float("nan")),
        },
        "writes_per_job": {
            "floor": {
                "manager": floor.get("manager_all_writes_per_job", float("nan")),
                "workers": floor.get("worker_all_writes_per_job", float("nan")),
            },
            "jobrelay": {
                "manager": relay.get("manager_all_writes_per_job", float("nan")),
                "workers": relay.get("worker_all_writes_per_job", float("nan")),
                "manager_by_jobrelay": relay.get("manager_writes_per_job", float("nan")),
                "workers_by_jobrelay": relay.get("worker_writes_per_job", float("nan")),
            },
        },
    }


def _n(value: Any, digits: int = 1) -> str:
    return report._n(value, digits)


def _roles(run: Json) -> str:
    roles = run.get("user_window", {}).get("by_role_ms_per_job", {})
    return f"{_n(roles.get('manager'))} / {_n(roles.get('workers'))}"


def render(result: Json) -> str:
    """The harness's Markdown: one table, floor and jobrelay side by side."""
    p = result["params"]
    floor, relay, s = result.get("floor", {}), result.get("jobrelay", {}), result["summary"]
    writes = s["writes_per_job"]
    rows = [
        ["first create → all Complete (s)", _n(s["floor_s"]), _n(s["jobrelay_s"])],
        ["**jobrelay ÷ floor**", "", f"**{_n(s['ratio'], 2)}**"],
        [
            "controller CPU per Job, whole process over the window (ms)",
            "-",
            _n(s["controller_cpu_ms_per_job"]),
        ],
        [
            "fleet CPU per Job over the window (ms)",
            _n(s["fleet_cpu_ms_per_job"]["floor"]),
            _n(s["fleet_cpu_ms_per_job"]["jobrelay"]),
        ],
        ["… of it manager / workers (ms)", _roles(floor), _roles(relay)],
        [
            "writes per Job on the manager, all clients (jobrelay's)",
            _n(writes["floor"]["manager"], 2),
            f"{_n(writes['jobrelay']['manager'], 2)} "
            f"({_n(writes['jobrelay']['manager_by_jobrelay'], 2)})",
        ],
        [
            "writes per Job on the workers, all clients (jobrelay's)",
            _n(writes["floor"]["workers"], 2),
            f"{_n(writes['jobrelay']['workers'], 2)} "
            f"({_n(writes['jobrelay']['workers_by_jobrelay'], 2)})",
        ],
        [
            "sustained dispatch rate (mirrors/s, 10-90 %)",
            "-",
            _n(relay.get("dispatch_rate_sustained")),
        ],
        [
            "dispatch p50 / status p50 / mirror Complete → manager Complete p50 (ms)",
            "-",
            f"{_n(relay.get('dispatch_ms', {}).get('p50'), 0)} / "
            f"{_n(relay.get('status_ms', {}).get('p50'), 0)} / "
            f"{_n(relay.get('completion_status_ms', {}).get('p50'), 0)}",
        ],
        [
            "Jobs created/s",
            _n(floor.get("submit", {}).get("rate_per_s")),
            _n(relay.get("submit", {}).get("rate_per_s")),
        ],
    ]
    lines = [
        f"Run {result['started_utc']}: {p['jobs']:,} one-pod Jobs of {p['duration']}, "
        f"{p['concurrency']} concurrent creates, {len(result['fleet']['workers'])} workers "
        f"({result['fleet']['shape']}), jobrelay {result['machine']['jobrelay_commit'][:12]}.",
        "",
        "| | floor (direct to the workers) | jobrelay |",
        "|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    for name, error in result.get("errors", {}).items():
        lines += ["", f"**{name} failed:** `{error}`"]
    return "\n".join(lines) + "\n"


def _heading(line: str) -> bool:
    return line.startswith("## ")


def replace_section(page: str, heading: str, body: str, before: str) -> str:
    """``page`` with the ``heading`` section's text replaced by ``body`` (headings inside
    code blocks do not count); a missing section goes in front of the ``before`` one."""
    lines = page.splitlines(keepends=True)
    start = end = None
    in_code = False
    for index, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not _heading(line):
            continue
        if start is not None and end is None:
            end = index
        if line.rstrip("\n") == heading:
            start = index
    section = [f"{heading}\n", "\n", body.rstrip("\n") + "\n", "\n"]
    if start is not None:
        return "".join(lines[:start] + section + lines[end if end is not None else len(lines) :])
    at = next((i for i, line in enumerate(lines) if line.startswith(before)), len(lines))
    return "".join(lines[:at] + section + lines[at:])


SECTION_INTRO = """\
Our own version of the independent harness issue 36 is judged by: one fleet,
one run, the floor first and jobrelay right after.

```sh
python -m bench peer --jobs 1000 --concurrency 50 --duration 1 --state-dir /tmp/f
```

- **Floor**: the Jobs (one pod, `--duration` s) created by the bench
  round-robin directly on the workers, no jobrelay; first create → every Job
  seen Complete on its worker.
- **jobrelay**: the same Jobs with `managedBy` on the manager; first create
  → every Job seen Complete on the manager (the user's view).
- **CPU**: `utime + stime` from `/proc/PID/stat` at the window's start and
  end: the controller's whole process, and every fleet process recorded in
  the fleet's `state.json` (apiservers, etcds, controller-managers,
  schedulers, KWOK, stand-ins), split manager / workers.
- **Writes**: every write request (`apiserver_request_total`) per Job on the
  manager and the workers, all clients (the bench's creates included), and in
  brackets jobrelay's own.

The command rewrites the table below.

"""


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--jobs", default=1000, show_default=True, type=click.IntRange(1))
@click.option("--concurrency", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option(
    "--duration",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.0),
    help="Seconds each Job's pod runs.",
)
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--keep-fleet", is_flag=True, help="Leave a fleet this run brought up running.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 20))
@click.option("--nodes-per-cluster", default=8, show_default=True, type=click.IntRange(1, 1000))
@click.option("--node-cpu", default="64", show_default=True)
@click.option("--node-memory", default="256Gi", show_default=True)
@click.option("--timeout", default=900.0, show_default=True, type=click.FloatRange(1.0))
@click.option("--cleanup-timeout", default=600.0, show_default=True, type=click.FloatRange(1.0))
@click.option("--controller-arg", "controller_args", multiple=True, metavar="ARG")
@click.option(
    "--results-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=REPO / "bench" / "results",
    show_default=True,
)
@click.option(
    "--docs",
    "docs_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=REPO / "docs" / "performance.md",
    show_default=True,
)
@click.option("--no-docs", is_flag=True, help="Do not rewrite the docs page's section.")
def main(
    jobs: int,
    concurrency: int,
    duration: float,
    state_dir: Path | None,
    keep_fleet: bool,
    workers: int,
    nodes_per_cluster: int,
    node_cpu: str,
    node_memory: str,
    timeout: float,
    cleanup_timeout: float,
    controller_args: tuple[str, ...],
    results_dir: Path,
    docs_path: Path,
    no_docs: bool,
) -> None:
    """The floor (Jobs created directly on the workers) against jobrelay (the same Jobs
    through the manager), one after the other on one fleet."""
    options = scenarios.Options(
        jobs=jobs,
        concurrency=concurrency,
        repeat=1,
        pod=PodShape(duration=f"{duration:g}s"),
        timeout=timeout,
        cleanup_timeout=cleanup_timeout,
        controller_args=controller_args,
    )
    started = datetime.datetime.now(datetime.UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    logs = Path(tempfile.mkdtemp(prefix=f"jobrelay-bench-peer-{stamp}-"))
    try:
        fleet = Fleet.ensure(
            state_dir, FleetShape(workers, nodes_per_cluster, node_cpu, node_memory)
        )
    except FleetError as error:
        raise click.ClickException(str(error)) from error
    result: Json = {
        "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": report.command_line(),
        "machine": report.machine_info(REPO),
        "params": {"jobs": jobs, "concurrency": concurrency, "duration": f"{duration:g}s"},
        "fleet": fleet.record(),
        "logs": str(logs),
        "errors": {},
    }
    try:
        asyncio.run(_run(scenarios.Context(fleet, options, stamp[9:15].lower(), logs), result))
    except KeyboardInterrupt:
        result["errors"]["interrupted"] = "KeyboardInterrupt"
    finally:
        if not keep_fleet:
            fleet.down()
        elif fleet.started_here:
            click.echo(f"bench: the fleet stays up in {fleet.state_dir}", err=True)
    result["summary"] = summarize(result.get("floor", {}), result.get("jobrelay", {}))
    markdown = render(result)
    base = results_dir / f"{stamp}-peer"
    report.write_json(base.with_suffix(".json"), result)
    base.with_suffix(".md").write_text(markdown)
    click.echo(markdown)
    click.echo(f"bench: results in {base}.json and {base}.md", err=True)
    if not no_docs and not result["errors"]:
        page = docs_path.read_text() if docs_path.exists() else ""
        docs_path.write_text(
            replace_section(page, SECTION, SECTION_INTRO + markdown, report.LATEST_HEADING)
        )
        click.echo(f"bench: {docs_path} updated", err=True)
    if result["errors"]:
        sys.exit(1)


async def _run(ctx: scenarios.Context, result: Json) -> None:
    try:
        result["kubernetes"] = await ctx.metrics[MANAGER].version()
        for name in ("floor", "jobrelay"):
            print(f"bench: --- peer: {name} ---", file=sys.stderr, flush=True)
            try:
                if name == "floor":
                    run = await scenarios.baseline_once(ctx, 1)
                else:
                    run = await scenarios.throughput_once(ctx, 1, None)
            except Exception as error:  # the other half still tells something
                result["errors"][name] = f"{type(error).__name__}: {error}"
                continue
            run.pop("series", None)
            run.pop("controller_series", None)
            result[name] = run
    finally:
        await ctx.aclose()
