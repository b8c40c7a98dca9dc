"""The machine, how busy it was besides us, and the results as Markdown and JSON."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

Json = dict[str, Any]
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- the machine -------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return math.nan


def _git(repo: Path, *args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine_info(repo: Path) -> Json:
    commit = _git(repo, "rev-parse", "--short=12", "HEAD")
    dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no", "--", "src"))
    return {
        "cpu_model": _cpu_model(),
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "memory_gib": round(_memory_gib(), 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "hostname": platform.node(),
        "jobrelay_commit": commit + ("+dirty-src" if dirty else ""),
    }


# -- how busy the machine was ---------------------------------------------------------------


def _busy_seconds() -> float:
    """CPU seconds spent by everything on the machine so far (all cores, not idle/iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


def _fleet_pids(state_dir: Path) -> list[int]:
    """Processes whose command line names the fleet's state directory (its components)."""
    marker = str(state_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _process_cpu(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


class LoadMonitor:
    """How much CPU the rest of the machine used while the bench ran.

    Everything busy minus this process, its children (the controllers) and
    the fleet's components: what other users of a shared machine took.
    """

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._pids = _fleet_pids(state_dir)
        self._start = self._read()
        self._wall = time.monotonic()
        self.load_start = os.getloadavg()

    def _read(self) -> tuple[float, float, float]:
        times = os.times()
        own = times.user + times.system + times.children_user + times.children_system
        fleet = sum(_process_cpu(pid) for pid in self._pids)
        return _busy_seconds(), own, fleet

    def result(self) -> Json:
        busy, own, fleet = self._read()
        wall = time.monotonic() - self._wall
        busy0, own0, fleet0 = self._start
        others = (busy - busy0) - (own - own0) - (fleet - fleet0)
        return {
            "wall_s": wall,
            "machine_busy_cores": (busy - busy0) / wall if wall else math.nan,
            "bench_and_controller_cores": (own - own0) / wall if wall else math.nan,
            "fleet_cores": (fleet - fleet0) / wall if wall else math.nan,
            "other_cores": others / wall if wall else math.nan,
            "loadavg_start": list(self.load_start),
            "loadavg_end": list(os.getloadavg()),
        }


# -- Markdown -------------------------------------------------------------------------------


def _n(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _machine_lines(result: Json) -> list[str]:
    m, f, load = result["machine"], result["fleet"], result.get("load", {})
    lines = [
        f"- Machine: {m['cpu_model']}, {m['nproc']} CPUs, {_n(m['memory_gib'])} GiB RAM, "
        f"Linux {m['kernel']}, Python {m['python']}",
        f"- Fleet: manager + {len(f['workers'])} workers, Kubernetes {f['kubernetes']}, "
        + f"{f['shape']} per cluster (KWOK)"
        + ("" if f["started_here"] else ", reused"),
        f"- jobrelay {m['jobrelay_commit']}, controller args: "
        f"`{' '.join(result['params']['controller_args']) or '(defaults)'}`",
        f"- Command: `{result['command']}`",
    ]
    if load:
        lines.append(
            f"- Load besides this bench (controller, fleet and bench excluded): "
            f"{_n(load['other_cores'], 2)} cores on average; load average "
            f"{_n(load['loadavg_start'][0], 2)} at start, {_n(load['loadavg_end'][0], 2)} at end"
            + (
                " — **the machine was shared: figures are pessimistic**"
                if load["other_cores"] > 0.25
                else ""
            )
        )
    return lines


def _latency_section(data: Json) -> list[str]:
    p = data["params"]
    lines = [
        f"### Latency — {p['jobs']:,} Jobs at {_n(p['rate_per_s'])}/s for {_n(p['duration_s'], 0)} s "
        f"(1 pod, {p['pod']['duration']})",
        "",
    ]
    rows = []
    for label, key in (
        ("dispatch: manager Job ADDED → mirror ADDED", "dispatch_ms"),
        ("status: mirror status change → same on the manager Job", "status_ms"),
    ):
        s = data[key]
        rows.append(
            [label, _n(int(s["count"])), _n(s["p50"]), _n(s["p95"]), _n(s["p99"]), _n(s["max"])]
        )
    own = (data.get("controller") or {}).get("metrics") or {}
    for label, key in (
        ("jobrelay's /metrics: object seen → mirror created", "dispatch_ms"),
        ("jobrelay's /metrics: mirror change seen → status written", "status_copy_ms"),
    ):
        if (s := own.get(key)) and s["count"]:
            # From the histogram's buckets: no max, quantiles as coarse as the buckets.
            rows.append([label, _n(int(s["count"])), _n(s["p50"]), _n(s["p95"]), _n(s["p99"]), "-"])
    lines += _table(["latency (ms)", "samples", "p50", "p95", "p99", "max"], rows)
    steps = data.get("dispatch_steps_ms") or {}
    if steps and all(s["count"] for s in steps.values()):
        lines += ["", "Where dispatch time goes (from the controller's log lines, ms):", ""]
        lines += _table(
            ["step", "p50", "p95", "p99"],
            [[name, _n(s["p50"]), _n(s["p95"]), _n(s["p99"])] for name, s in steps.items()],
        )
    c = data["controller"]
    lines += [
        "",
        f"Outcomes: {data['outcomes']}; status changes the manager skipped (superseded before "
        f"copied): {data['status_superseded']}, never shown: {data['status_never_shown']}; "
        f"submission fell behind schedule by at most {_n(data['submit']['max_lag_s'] * 1000, 0)} ms. "
        f"Controller: {_n(c['cpu_mean_pct'])} % CPU mean "
        f"({_n(data['controller_cpu_ms_per_job'])} ms CPU per Job), "
        f"{_n(c['rss_peak_mib'])} MiB RSS peak; "
        f"{_n(data['writes']['jobrelay_per_job'], 2)} writes/Job. "
        + _server_latency(data["writes"]),
    ]
    return lines


def _throughput_section(data: Json) -> list[str]:
    p = data["params"]
    lines = [
        f"### Throughput and baseline — {p['jobs']:,} Jobs, {p['concurrency']} concurrent creates, "
        f"{p['repeat']} round(s), median",
        "",
    ]
    t = data.get("throughput", {}).get("runs", [])
    b = data.get("baseline", {}).get("runs", [])
    rounds = max(len(t), len(b))
    header = ["", *[f"round {i + 1}" for i in range(rounds)], "median"]
    rows: list[list[str]] = []

    def row(label: str, runs: list[Json], get: Any, median: Any, digits: int = 1) -> None:
        cells = [_n(get(r), digits) for r in runs] + ["-"] * (rounds - len(runs))
        rows.append([label, *cells, _n(median, digits)])

    if t:
        m = data["throughput"]["median"]
        row(
            "jobrelay: Jobs created/s (manager accepts)",
            t,
            lambda r: r["submit"]["rate_per_s"],
            m["submit_rate"],
        )
        row(
            "jobrelay: sustained dispatch rate (mirrors/s, 10-90 %)",
            t,
            lambda r: r["dispatch_rate_sustained"],
            m["dispatch_rate_sustained"],
        )
        row(
            "jobrelay: all dispatched (s)",
            t,
            lambda r: r["all_dispatched_s"],
            m["all_dispatched_s"],
        )
        row("jobrelay: all finished (s)", t, lambda r: r["all_finished_s"], m["all_finished_s"])
        row(
            "jobrelay: first create → all Complete on the manager (s)",
            t,
            lambda r: r.get("total_s"),
            m.get("total_s"),
        )
        row(
            "jobrelay: dispatch latency p50 / p99 (ms)",
            t,
            lambda r: f"{_n(r['dispatch_ms']['p50'], 0)} / {_n(r['dispatch_ms']['p99'], 0)}",
            f"{_n(m['dispatch_p50_ms'], 0)} / {_n(m['dispatch_p99_ms'], 0)}",
        )
        row(
            "jobrelay: controller CPU mean (% of a core)",
            t,
            lambda r: r["controller"]["cpu_mean_pct"],
            m["controller_cpu_mean_pct"],
            0,
        )
        row(
            "jobrelay: status latency p50, all changes / to Complete (ms)",
            t,
            lambda r: (
                f"{_n(r['status_ms']['p50'], 0)} / "
                f"{_n(r.get('completion_status_ms', {}).get('p50'), 0)}"
            ),
            f"{_n(m.get('status_p50_ms'), 0)} / {_n(m.get('completion_status_p50_ms'), 0)}",
        )
        row(
            "jobrelay: controller CPU per Job, whole process over that window (ms)",
            t,
            lambda r: r["controller_cpu_ms_per_job"],
            m["controller_cpu_ms_per_job"],
        )
        row(
            "jobrelay: (before issue 36: 0.5 s samples to the last mirror deleted, ms)",
            t,
            lambda r: r.get("controller_cpu_ms_per_job_sampled"),
            m.get("controller_cpu_ms_per_job_sampled"),
        )
        row(
            "jobrelay: fleet CPU per Job over that window, all / manager / workers (ms)",
            t,
            _fleet_cpu_cell,
            _n(m.get("fleet_cpu_ms_per_job")),
        )
        row(
            "jobrelay: controller RSS peak (MiB)",
            t,
            lambda r: r["controller"]["rss_peak_mib"],
            m["controller_rss_peak_mib"],
        )
        row(
            "jobrelay: writes per Job",
            t,
            lambda r: r["writes"]["jobrelay_per_job"],
            m["jobrelay_writes_per_job"],
            2,
        )
        row(
            "jobrelay: its writes per Job on the manager / on the workers",
            t,
            lambda r: (
                f"{_n(r.get('manager_writes_per_job'), 2)} / "
                f"{_n(r.get('worker_writes_per_job'), 2)}"
            ),
            f"{_n(m.get('manager_writes_per_job'), 2)} / {_n(m.get('worker_writes_per_job'), 2)}",
        )
        row(
            "apiservers' mean time per write, manager / workers (ms)",
            t,
            lambda r: " / ".join(
                _n(r["writes"]["server_write_ms"].get(k), 0) for k in ("manager", "workers")
            ),
            "",
        )
    if b:
        m = data["baseline"]["median"]
        row(
            "baseline: Jobs created/s (workers accept)",
            b,
            lambda r: r["submit"]["rate_per_s"],
            m["submit_rate"],
        )
        row("baseline: all finished (s)", b, lambda r: r["all_finished_s"], m["all_finished_s"])
        row(
            "baseline: fleet CPU per Job, all / manager / workers (ms)",
            b,
            _fleet_cpu_cell,
            _n(m.get("fleet_cpu_ms_per_job")),
        )
        row(
            "baseline: workers' mean time per write (ms)",
            b,
            lambda r: r["writes"]["server_write_ms"].get("workers"),
            "",
            0,
        )
    if "ratio" in data:
        r = data["ratio"]
        rows.append(
            [
                "**jobrelay ÷ baseline (all finished)**",
                *[_n(x, 2) for x in r["per_round"]],
                f"**{_n(r['median_of_rounds'], 2)}**",
            ]
        )
    lines += _table(header, rows)
    if "against" in data.get("throughput", {}):
        lines += ["", *against_lines(data["throughput"]["against"])]
    return lines


def _fleet_cpu_cell(run: Json) -> str:
    window = run.get("user_window", {})
    roles = window.get("by_role_ms_per_job", {})
    return " / ".join(
        _n(value) for value in (window.get("fleet_cpu_ms_per_job"), roles.get("manager"),
                                roles.get("workers"))
    )  # fmt: skip


def against_lines(against: Json) -> list[str]:
    """The medians of the old and new controllers' rounds, and new ÷ old, per figure."""
    commits = against.get("commits", {})
    lines = [
        f"Against `{against.get('ref')}` (old {str(commits.get('old', ''))[:12]}, "
        f"new {str(commits.get('new', ''))[:12]}), rounds {', '.join(against.get('order', []))}:",
        "",
    ]
    rows = [
        [figure, _n(values["old"], 2), _n(values["new"], 2), _n(values["ratio"], 2)]
        for figure, values in against.get("compare", {}).items()
    ]
    return lines + _table(["median", "old", "new", "new ÷ old"], rows)


def _scale_section(data: Json) -> list[str]:
    p = data["params"]
    ph = data["phases"]
    lines = [
        f"### Scale — {p['jobs']:,} managed Jobs held (created suspended); "
        f"burst = {p['resume']:,} of them resumed at once",
        "",
    ]
    rows = []
    labels = {
        "empty": "ready, no Jobs",
        "ingest": f"ingest: {p['jobs']:,} suspended Jobs created",
        "idle": f"idle ({_n(p['idle_s'], 0)} s), all held",
        "burst": f"burst: {p['resume']:,} resumed until finished",
        "after_burst": "after the burst",
        "restart": "restart with all held (5 s after ready)",
    }
    for key, label in labels.items():
        if key not in ph:
            continue
        w = ph[key]
        rows.append(
            [
                label,
                _n(w["seconds"]),
                _n(w["cpu_mean_pct"], 0),
                _n(w["cpu_max_pct"], 0),
                _n(w["rss_peak_mib"]),
                _n(w["rss_end_mib"]),
            ]
        )
    lines += _table(
        ["phase", "seconds", "CPU mean %", "CPU max %", "RSS peak MiB", "RSS end MiB"], rows
    )
    notes = [f"RSS per held Job: {_n(data['rss_per_held_job_kib'])} KiB"]
    if "ingest" in ph:
        i = ph["ingest"]
        notes.append(
            f"ingest: created at {_n(i['create_rate_per_s'])}/s, all shown Suspended by jobrelay after "
            f"{_n(i['all_held_s'])} s ({_n(i['status_write_rate_sustained'])} status writes/s), "
            f"{_n(i['writes']['jobrelay_per_job'], 2)} jobrelay writes per held Job"
        )
    if "burst" in ph:
        b = ph["burst"]
        notes.append(
            f"burst: {_n(b['dispatch_rate_sustained'])} mirrors/s, all finished after "
            f"{_n(b['all_finished_s'])} s, dispatch latency p50 {_n(b['dispatch_ms']['p50'], 0)} ms / "
            f"p99 {_n(b['dispatch_ms']['p99'], 0)} ms"
        )
    if "restart" in ph:
        r = ph["restart"]
        notes.append(
            f"restart: ready {_n(r['ready_s'], 2)} s after start, having used "
            f"{_n(r.get('cpu_seconds_to_ready'), 2)} CPU-seconds, RSS "
            f"{_n(r.get('rss_at_ready_mib'))} MiB at ready"
        )
    return [*lines, "", "; ".join(notes) + "."]


def _server_latency(writes: Json) -> str:
    found = writes.get("server_write_ms") or {}
    if not found:
        return ""
    parts = ", ".join(f"{role} {_n(ms, 0)} ms" for role, ms in found.items())
    return f"The apiservers' own mean time per write request meanwhile: {parts}."


def _codes(row: Json) -> str:
    failed = {
        code: n for code, n in sorted(row.get("codes", {}).items()) if not code.startswith("2")
    }
    return ", ".join(f"{n} ({code})" for code, n in failed.items()) or "0"


def _api_section(data: Json) -> list[str]:
    p = data["params"]
    w = data["writes"]
    lines = [
        f"### API cost — {p['jobs']:,} Jobs at {_n(p['rate_per_s'])}/s (from each apiserver's "
        "`apiserver_request_total`)",
        "",
        f"**jobrelay: {_n(w['jobrelay_per_job'], 2)} writes per Job** against a floor of "
        f"{_n(w['floor_per_job'], 2)} (1 mirror create + 1 delete + "
        f"{_n(data['distinct_mirror_statuses_per_job'], 2)} distinct mirror statuses per Job, "
        f"{_n(data['distinct_mirror_summaries_per_job'], 2)} counting only active/succeeded/"
        "failed/conditions): "
        f"{_n(w['ratio_to_floor'], 2)}x the floor; {w['jobrelay_failed']} of jobrelay's writes failed. "
        + _server_latency(w),
        "",
    ]
    lines += _table(
        ["jobrelay's writes", "per Job", "floor per Job"],
        [
            [b["what"], _n(b["jobrelay_per_job"], 2), _n(b["floor_per_job"], 2)]
            for b in w.get("breakdown", [])
        ]
        + [["**total**", f"**{_n(w['jobrelay_per_job'], 2)}**", _n(w["floor_per_job"], 2)]],
    )
    lines += ["", "All write requests during the run, by cluster:", ""]
    rows = [
        [
            r["cluster"],
            r["verb"],
            r["resource"],
            _n(r["requests"]),
            _codes(r),
            _n(r["bench"]),
            _n(r["jobrelay"]),
            _n(r["jobrelay"] / w["jobs"], 2),
            _n(r["fleet"]),
        ]
        for r in w["rows"]
        if r["jobrelay"] or r["bench"] or r["fleet"] / max(1, w["jobs"]) >= 0.05
    ]
    lines += _table(
        [
            "cluster",
            "verb",
            "resource",
            "requests",
            "non-2xx",
            "bench",
            "jobrelay",
            "jobrelay/Job",
            "fleet (kcm, scheduler, kwok)",
        ],
        rows,
    )
    lines += [
        "",
        f"The workers' own controllers wrote {_n(w['fleet_per_job'], 1)} requests per Job "
        "meanwhile (rows under 0.05/Job left out).",
    ]
    return lines


def _controllers(value: Any) -> list[Json]:
    """Every controller record (a dict with ``log_levels``) anywhere in the results."""
    if isinstance(value, dict):
        if "log_levels" in value:
            return [value]
        return [c for item in value.values() for c in _controllers(item)]
    if isinstance(value, list):
        return [c for item in value for c in _controllers(item)]
    return []


def _controller_health(scenarios: Json) -> str:
    found = _controllers(scenarios)
    if not found:
        return ""
    warnings = sum(c["log_levels"].get("warning", 0) for c in found)
    errors = sum(c["log_levels"].get("error", 0) for c in found)
    codes = sorted({str(c.get("exit_code")) for c in found})
    return (
        f"Controller processes: {len(found)}, exit codes {', '.join(codes)}; "
        f"{warnings} warnings and {errors} errors in their logs."
    )


def render_markdown(result: Json) -> str:
    lines = [f"## jobrelay benchmark — {result['started_utc']}", "", *_machine_lines(result)]
    scenarios = result["scenarios"]
    for key, render in (
        ("latency", _latency_section),
        ("throughput", _throughput_section),
        ("scale", _scale_section),
        ("api", _api_section),
    ):
        if key in scenarios:
            lines += ["", *render(scenarios[key])]
    health = _controller_health(result["scenarios"])
    if health:
        lines += ["", health]
    for name, error in result.get("errors", {}).items():
        lines += ["", f"**{name} failed:** `{error}`"]
    return "\n".join(lines) + "\n"


DOCS_INTRO = """\
# Performance

How fast jobrelay dispatches Jobs and copies their status back, what it costs
the apiservers, and how its footprint grows with the number of Jobs it holds.
The figures below come from `python -m bench` (also `make bench`), which
rewrites the *Latest results* section of this page on every run.

## Running it

```sh
python -m bench                                  # everything, at full size, on a temporary fleet
python -m bench latency --state-dir /tmp/f       # one scenario, on a fleet kept in /tmp/f
python -m bench throughput baseline --jobs 500 --repeat 1      # smaller
python -m bench throughput --profile --repeat 1   # py-spy flame graph of the controller (pip install py-spy)
python -m bench throughput --jobs 500 --repeat 2 --against main~1 --state-dir /tmp/f  # old/new/new/old
python -m bench peer --jobs 1000 --concurrency 50 --duration 1   # the floor against jobrelay, one run
python -m bench fairshare --state-dir /tmp/f      # fair share: 3 RelayQueues 1:1:2 on 32 CPUs (own flags, --help)
python -m bench.panel_viewers --state-dir /tmp/f  # the dashboard: 10 viewers over 5,000 workloads against none
python -m bench.many_workers --workers 1,8,32 --state-dir /tmp/m  # light workers: per-worker cost, 2,000 Jobs, one lost, the model
python -m bench latency --controller-arg=--concurrency=64      # flags for `jobrelay run`
python -m bench --help                           # every size and knob
```

Without `--state-dir` the bench brings up a temporary fleet (manager + 2
workers, `--nodes-per-cluster 8 --node-cpu 64 --node-memory 256Gi`, so that
node capacity is never the limit) and deletes it at the end. With
`--state-dir` it reuses a healthy fleet there, or brings one up and stops it
at the end unless `--keep-fleet`. Results go to `bench/results/`
(`<stamp>.json` with every figure and the raw latency samples, `<stamp>.md`,
and `<stamp>.png`: latency CDF and throughput over time, when matplotlib is
installed). Run it on a quiet machine: the apiservers, etcd, KWOK and the
controller share its cores, and the report says how much CPU other processes
took meanwhile.

## What is measured

Every run gets a fresh namespace and a fresh controller process
(`python -m jobrelay run --log-format json --finished-mirror-ttl 0`: finished
mirrors are deleted at once, not kept the default hour, so each Job's delete
is counted and waited for), and every Job runs one pod for
1 s (`fleet.jobrelay.dev/duration`). Times are taken by the bench process when
it *receives* watch events from the apiservers (one informer per cluster),
never from second-granular `creationTimestamp`s.

- **Dispatch latency**: the manager Job's ADDED → its mirror's ADDED on a worker.
- **Status latency**: each change of a mirror's status (active, succeeded,
  failed, the types of its True conditions) → the first version of the
  manager Job showing it. If jobrelay skips a state the mirror had already
  left, the wait until the manager shows a later state counts (and the state
  is reported as *superseded*).
- **Throughput**: all Jobs created at once (`--concurrency` in flight); the
  sustained dispatch rate is mirrors created per second between the 10th and
  90th percentile; *all finished* (`total_s`, what a user sees) is from the
  first create sent to the last Job seen Complete on the manager.
- **CPU over the user's window**: at that window's start and end the bench
  reads `/proc/PID/stat` (`utime + stime`, every thread) of the controller and
  of every fleet process the fleet's `state.json` records (apiservers, etcds,
  controller-managers, schedulers, KWOK, stand-ins): the controller's whole
  CPU per Job (`controller_cpu_ms_per_job`) and the fleet's, split manager /
  workers. Until issue 36 `controller_cpu_ms_per_job` summed 0.5 s samples
  from the first create to the last mirror *deleted*, leaving out the tail of
  each end; it is still reported as `controller_cpu_ms_per_job_sampled`.
  jobrelay's writes per Job are split into the manager's
  (`manager_writes_per_job`) and the workers' (`worker_writes_per_job`); the
  status wait a user feels is the mirror seen Complete → the Job seen
  Complete on the manager.
- **Against a previous commit**: `--against REF` checks REF out in a
  temporary `git worktree` and runs `--repeat` throughput rounds of its
  controller (`PYTHONPATH=<REF>/src`, without the flags its `run --help`
  lacks) and as many of this tree's, alternated old, new, new, old ... on one
  fleet; the report gives each side's medians and new ÷ old per figure. The
  bench itself (submission, watches, figures) is this tree's for both.
- **Baseline**: the same Jobs without `managedBy`, created by the bench
  round-robin directly on the workers; *jobrelay ÷ baseline* compares the
  time until all finished (each round runs both, back to back).
- **Scale**: `--scale-jobs` managed Jobs created suspended (nothing runs,
  jobrelay holds them and marks them Suspended); the controller's RSS and CPU
  (`/proc/<pid>/status`, `/proc/<pid>/stat`, every 0.5 s) while ingesting,
  idle, during a burst of resumes, and at a restart with all of them held.
- **API cost**: write requests from each apiserver's own `/metrics`
  (`apiserver_request_total`), before and after the run. jobrelay's writes are
  told apart by resource: on the manager, managed Jobs (and their status),
  Events and WorkerClusters; on the workers, Jobs (not their status, which
  the workers' Job controller writes) and namespaces. The bench's own writes
  are subtracted. The floor is one mirror create, one mirror delete and one
  status write per distinct mirror status.

Reading the figures: every run also records the apiservers' own mean time
per write request (`apiserver_request_duration_seconds`, all clients) and how
much CPU the rest of the machine used. On a quiet machine an apiserver write
takes a few milliseconds; when it takes hundreds, the fleet itself was short
of CPU and every figure (jobrelay's and the baseline's) is inflated. The
controller's CPU time per Job does not depend on waiting and is the most
portable figure. *Where dispatch time goes* splits the dispatch latency using
the controller's own log lines (`placed ...`, `created mirror ...`).

"""


LATEST_HEADING = "## Latest results"


def hand_written(page: str) -> str:
    """The sections of ``page`` written by hand: every ``## `` section but the intro's
    own (rewritten from :data:`DOCS_INTRO`) and the latest results (this run's)."""
    generated = {line for line in DOCS_INTRO.splitlines() if line.startswith("## ")}
    generated.add(LATEST_HEADING)
    kept: list[str] = []
    keeping = False
    in_code = False
    for line in page.splitlines(keepends=True):
        if line.startswith("```"):
            in_code = not in_code
        if line.startswith("## ") and not in_code:
            keeping = not any(line.startswith(heading) for heading in generated)
        if keeping:
            kept.append(line)
    return "".join(kept)


def write_docs(path: Path, markdown: str) -> None:
    """Rewrite the page with the latest results, keeping its hand-written sections
    (analysis, the fleet-less decisions, sizing, fair share)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = path.read_text() if path.exists() else ""
    latest = markdown.replace("## jobrelay benchmark", LATEST_HEADING, 1)
    path.write_text(DOCS_INTRO + hand_written(previous) + latest)


def write_json(path: Path, result: Json) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(result), indent=1, default=_default) + "\n")


def _finite(value: Any) -> Any:
    """NaN and infinities become null: strict JSON readers reject them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def command_line() -> str:
    return " ".join([Path(sys.executable).name, "-m", "bench", *sys.argv[1:]])
