"""How long a local fleet takes to come up, and how much memory it holds.

``python -m bench.fleet_startup [--runs 3] [--workers 2] [--idle 20]`` brings
up a fresh fleet (1 manager + N workers, the default node shape) in a
temporary directory, times ``LocalFleet.up`` until every component is healthy
and every simulated node Ready, sums the resident memory (``VmRSS`` in
``/proc/PID/status``) of the fleet's recorded processes right after start-up
and again after an idle period, tears the fleet down, and repeats. It needs a
warm binary cache (``jobrelay fleet build``): build time is not start-up time.
The result is a Markdown table against the local fleet's budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from jobrelay.localfleet import processes
from jobrelay.localfleet.binaries import resolver
from jobrelay.localfleet.orchestration import LocalFleet

STARTUP_BUDGET_SECONDS = 60.0
RSS_BUDGET_BYTES = 3 * 1024**3


@dataclass(frozen=True)
class Run:
    startup_seconds: float
    rss_after_up: int
    rss_after_idle: int
    down_seconds: float


def fleet_rss(local: LocalFleet) -> int:
    """Bytes resident across the fleet's recorded processes; every one must be running."""
    total = 0
    for record in local.all_records():
        if not processes.is_running(record):
            raise RuntimeError(f"{record.name} (pid {record.pid}) is not running")
        status = Path(f"/proc/{record.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        total += int(kib) * 1024
    return total


def one_run(workers: int, idle_seconds: float) -> Run:
    state_dir = Path(tempfile.mkdtemp(prefix="jobrelay-bench-fleet-"))
    local = LocalFleet(state_dir, progress=lambda message: print(f"  {message}", file=sys.stderr))
    try:
        started = time.monotonic()
        asyncio.run(local.up(workers=workers))
        startup = time.monotonic() - started
        if not asyncio.run(local.is_healthy()):
            raise RuntimeError("the fleet reported up but is not healthy")
        after_up = fleet_rss(local)
        time.sleep(idle_seconds)
        after_idle = fleet_rss(local)
    finally:
        stopping = time.monotonic()
        local.down(purge=True)
        down = time.monotonic() - stopping
        shutil.rmtree(state_dir, ignore_errors=True)
    return Run(startup, after_up, after_idle, down)


def gib(value: float) -> str:
    return f"{value / 1024**3:.2f} GiB"


def seconds(value: float) -> str:
    return f"{value:.1f} s"


def table(runs: list[Run], workers: int, idle_seconds: float, load_at_start: float) -> str:
    rows = [
        (
            "start-up to healthy",
            [run.startup_seconds for run in runs],
            seconds,
            STARTUP_BUDGET_SECONDS,
        ),
        ("RSS after up", [float(run.rss_after_up) for run in runs], gib, RSS_BUDGET_BYTES),
        (
            f"RSS after {idle_seconds:.0f} s idle",
            [float(run.rss_after_idle) for run in runs],
            gib,
            RSS_BUDGET_BYTES,
        ),
        ("down", [run.down_seconds for run in runs], seconds, None),
    ]
    lines = [
        f"Local fleet: 1 manager + {workers} workers, {len(runs)} runs, "
        f"{os.cpu_count()} CPUs, 1-minute load average {load_at_start:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end",
        "",
        "| metric | median | min | max | budget | within |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, values, show, budget in rows:
        within = "" if budget is None else ("yes" if max(values) <= budget else "**no**")
        lines.append(
            f"| {name} | {show(statistics.median(values))} | {show(min(values))} | "
            f"{show(max(values))} | {'' if budget is None else '≤ ' + show(budget)} | {within} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet_startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds idle before re-measuring")
    options = parser.parse_args(argv)
    # Fail at once, before any fleet starts, if the cache is cold.
    resolver.resolve(build=False)
    # Other work on the machine slows start-up: the table reports the load alongside.
    load_at_start = os.getloadavg()[0]
    runs = []
    for index in range(1, options.runs + 1):
        print(f"run {index}/{options.runs}", file=sys.stderr)
        runs.append(one_run(options.workers, options.idle))
        print(
            f"  up {seconds(runs[-1].startup_seconds)}, RSS {gib(runs[-1].rss_after_up)} "
            f"-> {gib(runs[-1].rss_after_idle)} idle",
            file=sys.stderr,
        )
    print(table(runs, options.workers, options.idle, load_at_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
