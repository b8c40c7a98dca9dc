"""The pure parts of ``python -m bench.many_workers``: the per-worker cost fitted over the
measured fleet sizes, its projection to 100 and 1,000 workers, what breaks first, and
the check that no Job ran twice.

No I/O here: the bench measures, this module reads what it measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from jobrelay.localfleet.light import INOTIFY_FOR_THE_REST, INOTIFY_PER_APISERVER

Json = dict[str, Any]

# What the model fits, per fleet size: key in a size's figures -> (label, unit).
FITTED = {
    "controller_rss_mib": ("controller RSS", "MiB"),
    "controller_cpu_pct": ("controller idle CPU", "% of a core"),
    "connections": ("controller TCP connections to workers", ""),
    "watches": ("watches open on workers", ""),
    "requests_per_min": ("requests/min to workers, idle", ""),
}
PROJECTED_WORKERS = (1, 8, 32, 100, 1000)
HELD_WORKLOADS = 1_000_000
# The chart's memory limit (docs/performance.md, "Sizing").
CHART_MEMORY_LIMIT_MIB = 640.0
# One leader is one Python process: past one core its event loop is the queue.
ONE_CORE_PCT = 100.0
REQUESTS_TOTAL = "jobrelay_apiserver_requests_total"
WATCH_VERB = "watch"


@dataclass(frozen=True, slots=True)
class Line:
    """``base + per_worker * workers``, fitted by least squares."""

    base: float
    per_worker: float

    def at(self, workers: float) -> float:
        return self.base + self.per_worker * workers

    def reaches(self, limit: float) -> float:
        """Workers at which the line reaches ``limit`` (inf: never, it does not grow)."""
        if self.per_worker <= 0:
            return math.inf
        return max(0.0, (limit - self.base) / self.per_worker)


def fit_line(points: Sequence[tuple[float, float]]) -> Line:
    """The least-squares line through ``(workers, value)`` points (NaNs left out); one
    point is a flat line through it; none is NaN."""
    kept = [(x, y) for x, y in points if not (math.isnan(x) or math.isnan(y))]
    if not kept:
        return Line(math.nan, math.nan)
    if len({x for x, _ in kept}) == 1:
        return Line(sum(y for _, y in kept) / len(kept), 0.0)
    n = len(kept)
    mean_x = sum(x for x, _ in kept) / n
    mean_y = sum(y for _, y in kept) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in kept)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in kept)
    slope = sxy / sxx
    return Line(mean_y - slope * mean_x, slope)


def fit_costs(sizes: Sequence[Json]) -> dict[str, Line]:
    """One line per fitted figure, over every measured size (``workers`` and its idle
    figures)."""
    return {
        key: fit_line([(float(s["workers"]), float(s["idle"].get(key, math.nan))) for s in sizes])
        for key in FITTED
    }


def project(
    fit: Mapping[str, Line],
    *,
    held_kib_per_workload: float,
    workers: Iterable[int] = PROJECTED_WORKERS,
    held: int = HELD_WORKLOADS,
) -> list[Json]:
    """The model's rows: each fitted figure at each worker count, and the RSS with
    ``held`` workloads held besides (``held_kib_per_workload`` each)."""
    held_mib = held * held_kib_per_workload / 1024
    rows = []
    for count in workers:
        row: Json = {"workers": count}
        for key, line in fit.items():
            row[key] = line.at(count)
        row["controller_rss_held_mib"] = row["controller_rss_mib"] + held_mib
        rows.append(row)
    return rows


def limits_met(
    fit: Mapping[str, Line],
    *,
    open_files: int,
    inotify_instances: int,
    inotify_per_worker: int,
    inotify_rest: int,
    held_kib_per_workload: float,
    held: int = HELD_WORKLOADS,
) -> list[Json]:
    """Each limit one leader meets as workers are added, with the worker count where it is
    met, first first. ``open_files``: the controller's RLIMIT_NOFILE; inotify: this
    machine's light workers (a real fleet has its apiservers elsewhere)."""
    held_mib = held * held_kib_per_workload / 1024
    rss = fit["controller_rss_mib"]
    found = [
        {
            "limit": "one core of idle CPU (probes, bookmarks, rewatches)",
            "workers": fit["controller_cpu_pct"].reaches(ONE_CORE_PCT),
            "setting": "--worker-status-interval, --worker-health-timeout (probe every sixth)",
        },
        {
            "limit": f"the chart's memory limit ({CHART_MEMORY_LIMIT_MIB:.0f} MiB), idle",
            "workers": rss.reaches(CHART_MEMORY_LIMIT_MIB),
            "setting": "resources.limits.memory",
        },
        {
            "limit": (
                f"the chart's memory limit with {held:,} workloads held "
                f"({held_mib:,.0f} MiB of them)"
            ),
            "workers": Line(rss.base + held_mib, rss.per_worker).reaches(CHART_MEMORY_LIMIT_MIB),
            "setting": "resources.limits.memory",
        },
        {
            "limit": f"open files (RLIMIT_NOFILE {open_files:,}): a socket per connection",
            "workers": fit["connections"].reaches(open_files),
            "setting": "ulimit -n / the container runtime's nofile",
        },
        {
            "limit": (
                f"inotify instances of this machine ({inotify_instances}) for light workers' "
                "apiservers"
            ),
            "workers": Line(inotify_rest, inotify_per_worker).reaches(inotify_instances),
            "setting": "sysctl fs.inotify.max_user_instances (the test fleet only)",
        },
    ]
    return sorted(found, key=lambda item: item["workers"])


# -- the controller's /metrics ----------------------------------------------------------


def requests_by_worker(text: str) -> dict[str, dict[str, float]]:
    """``jobrelay_apiserver_requests_total`` summed by worker and verb (the management
    cluster's, worker "", left out)."""
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != REQUESTS_TOTAL or not sample.labels.get("worker"):
                continue
            verbs = found.setdefault(sample.labels["worker"], {})
            verb = sample.labels.get("verb", "")
            verbs[verb] = verbs.get(verb, 0.0) + sample.value
    return found


def request_rates(
    before: Mapping[str, Mapping[str, float]],
    after: Mapping[str, Mapping[str, float]],
    seconds: float,
) -> dict[str, Json]:
    """Per worker: requests per minute between two scrapes (watches apart), and the
    watches opened so far."""
    rates: dict[str, Json] = {}
    for worker, verbs in after.items():
        old = before.get(worker, {})
        other = sum(v - old.get(verb, 0.0) for verb, v in verbs.items() if verb != WATCH_VERB)
        rewatches = verbs.get(WATCH_VERB, 0.0) - old.get(WATCH_VERB, 0.0)
        rates[worker] = {
            "requests_per_min": 60.0 * other / seconds if seconds > 0 else math.nan,
            "rewatches_per_min": 60.0 * rewatches / seconds if seconds > 0 else math.nan,
            "watches_opened": verbs.get(WATCH_VERB, 0.0),
        }
    return rates


# -- TCP connections from /proc ---------------------------------------------------------

ESTABLISHED = "01"


def tcp_sockets(table: str) -> dict[int, tuple[int, str]]:
    """``/proc/PID/net/tcp`` (or tcp6): socket inode -> (remote port, state)."""
    found = {}
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        found[int(fields[9])] = (remote_port, fields[3])
    return found


def connections_by_port(
    inodes: Iterable[int], sockets: Mapping[int, tuple[int, str]]
) -> dict[int, int]:
    """Established connections of a process (its socket ``inodes``) by remote port."""
    counts: dict[int, int] = {}
    for inode in inodes:
        port, state = sockets.get(inode, (0, ""))
        if state == ESTABLISHED:
            counts[port] = counts.get(port, 0) + 1
    return counts


# -- nothing ran twice ------------------------------------------------------------------


def mirror_records(text: str) -> list[tuple[int, str, str]]:
    """The mirrors annotation (``<run>:<worker>:<uid>``, comma-separated) as tuples."""
    records = []
    for item in text.split(","):
        parts = item.split(":", 2)
        if len(parts) == 3 and parts[0].isdigit():
            records.append((int(parts[0]), parts[1], parts[2]))
    return records


def run_twice_problems(
    placements: Sequence[str],
    recorded: Sequence[tuple[int, str, str]],
    found: Sequence[tuple[str, str, int]],
    *,
    moved_from: str | None = None,
) -> list[str]:
    """Why one management Job may have run twice, from its placements annotation, its
    recorded mirrors (written only once a mirror ran 30 s: a short Job has none) and the
    mirrors ``found`` on the workers ``(worker, uid, run)`` after it finished (finished
    mirrors kept). Only a Job placed off a lost worker (``moved_from``) may have two runs;
    its first mirror must be gone by then."""
    problems = []
    runs: dict[int, set[str]] = {}
    for run, _worker, uid in recorded:
        runs.setdefault(run, set()).add(uid)
    for run, uids in sorted(runs.items()):
        if len(uids) > 1:
            problems.append(f"run {run} has {len(uids)} mirrors: {sorted(uids)}")
    allowed = 1 if moved_from is None else 2
    if len(placements) > allowed:
        problems.append(f"placed {len(placements)} times: {list(placements)}")
    if moved_from is not None and (len(placements) != 2 or placements[0] != moved_from):
        problems.append(f"not moved off {moved_from}: placed {list(placements)}")
    if len(found) > 1:
        problems.append(f"{len(found)} mirrors on the workers: {list(found)}")
    if found:
        worker, uid, run = found[0]
        if run != len(placements):
            problems.append(f"the mirror {uid} on {worker} is of run {run}, not {len(placements)}")
        if placements and worker != placements[-1]:
            problems.append(f"the mirror is on {worker}, the Job placed on {placements[-1]}")
        if run in runs and uid not in runs[run]:
            problems.append(f"the mirror {uid} on {worker} is not the recorded one of run {run}")
    return problems


def failed_checks(size: Json) -> list[str]:
    """What a size's runs must show and did not: every Job Complete, every worker used,
    nothing run twice, the lost worker's Jobs moved."""
    failed = []
    burst = size.get("burst")
    if burst is not None:
        if burst["complete"] < burst["jobs"]:
            failed.append(f"{burst['jobs'] - burst['complete']} of the Jobs not Complete")
        if burst["workers_used"] < size["workers"]:
            failed.append(f"only {burst['workers_used']} of {size['workers']} workers used")
        if burst["ran_twice"]:
            failed.append(f"{len(burst['ran_twice'])} Jobs may have run twice")
    lost = size.get("lose_one")
    if lost is not None:
        if lost["complete"] < lost["jobs"]:
            failed.append(f"{lost['jobs'] - lost['complete']} long Jobs not Complete")
        if lost["moved"] < lost["doomed_jobs"]:
            failed.append(
                f"{lost['doomed_jobs'] - lost['moved']} Jobs not moved off the lost worker"
            )
        if lost["ran_twice"]:
            failed.append(f"{len(lost['ran_twice'])} long Jobs may have run twice")
    return failed


# -- the report ---------------------------------------------------------------------------


def _n(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "never"
    return f"{value:,.{digits}f}"


def render_sizes(sizes: Sequence[Json]) -> list[str]:
    lines = [
        "| light workers | fleet up (s) | all Connected after start (s) | controller RSS (MiB) "
        "| controller idle CPU (% core: window; median of 5 s) | TCP connections | watches | "
        "requests/min to workers | rewatches/min | worker apiserver RSS (MiB, mean) | "
        "worker apiserver CPU (% core, mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        idle = s["idle"]
        lines.append(
            f"| {s['workers']} | {_n(s['fleet'].get('up_seconds'), 0)} | "
            f"{_n(s.get('connected_s'))} | {_n(idle['controller_rss_mib'])} | "
            f"{_n(idle['controller_cpu_pct'], 2)}; "
            f"{_n(idle.get('controller_cpu_median_pct'), 2)} | {idle['connections']} | "
            f"{_n(idle['watches'], 0)} | {_n(idle['requests_per_min'])} | "
            f"{_n(idle.get('rewatches_per_min'))} | "
            f"{_n(idle['worker_apiserver_rss_mib_mean'], 0)} | "
            f"{_n(idle['worker_apiserver_cpu_pct_mean'], 2)} |"
        )
    return lines


def render_burst(burst: Json) -> list[str]:
    counts = list(burst["per_worker"].values())
    twice = burst["ran_twice"]
    return [
        f"**{burst['jobs']:,} one-pod Jobs of 1 s** ({burst['concurrency']} concurrent "
        f"creates) on {len(counts)} workers: first create -> all Complete on the manager "
        f"**{_n(burst['total_s'])} s**; {burst['complete']:,} Complete; all "
        f"{burst['workers_used']} workers used ({min(counts, default=0)}-"
        f"{max(counts, default=0)} Jobs each); moved: {burst['moved']}; ran twice: "
        f"**{len(twice)}**{f' ({twice})' if twice else ''}; controller RSS peak "
        f"{_n(burst['controller_rss_peak_mib'])} MiB, CPU "
        f"{_n(burst['controller_cpu_ms_per_job'], 2)} ms per Job.",
    ]


def render_lost(lost: Json) -> list[str]:
    twice = lost["ran_twice"]
    return [
        f"**One worker lost**: {lost['jobs']} Jobs of {lost['duration_s']:g} s spread "
        f"({lost['spread']}); {lost['doomed']}'s kube-apiserver stopped (SIGSTOP) holding "
        f"{lost['doomed_jobs']}: Lost (`status.lostTime`) after "
        f"{_n(lost['lost_after_s'])} s; {lost['moved']} moved to {lost['moved_to']}; every "
        f"long Job finished {_n(lost['moved_complete_after_s'])} s after the stop, "
        f"{lost['complete']} Complete; continued, its stale mirrors were deleted within "
        f"{_n(lost['stale_deleted_after_s'])} s; ran twice: **{len(twice)}**"
        f"{f' ({twice})' if twice else ''}.",
    ]


def render_model(
    fit: Mapping[str, Line], rows: Sequence[Json], limits: Sequence[Json]
) -> list[str]:
    lines = ["| figure | base | per worker |", "|---|---|---|"]
    for key, line in fit.items():
        label, unit = FITTED[key]
        lines.append(
            f"| {label}{f' ({unit})' if unit else ''} | {_n(line.base, 2)} | "
            f"{_n(line.per_worker, 3)} |"
        )
    lines += [
        "",
        "| workers | controller RSS (MiB) | + 1,000,000 held (MiB) | idle CPU (% core) | "
        "TCP connections | watches | requests/min |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['workers']:,} | {_n(row['controller_rss_mib'], 0)} | "
            f"{_n(row['controller_rss_held_mib'], 0)} | {_n(row['controller_cpu_pct'], 1)} | "
            f"{_n(row['connections'], 0)} | {_n(row['watches'], 0)} | "
            f"{_n(row['requests_per_min'], 0)} |"
        )
    lines += ["", "| limit met | at workers | the setting that moves it |", "|---|---|---|"]
    for item in limits:
        lines.append(f"| {item['limit']} | {_n(item['workers'], 0)} | {item['setting']} |")
    return lines


def render(result: Json) -> str:
    lines = [
        f"Run {result['started_utc']} ({result['command']}), jobrelay "
        f"{result['machine'].get('jobrelay_commit', '?')[:12]}.",
        "",
        *render_sizes(result["sizes"]),
    ]
    for size in result["sizes"]:
        if "burst" in size:
            lines += ["", *render_burst(size["burst"])]
        if "lose_one" in size:
            lines += ["", *render_lost(size["lose_one"])]
    if "model" in result:
        model = result["model"]
        fit = {k: Line(**v) for k, v in model["fit"].items()}
        lines += [
            "",
            f"Fitted over {model['points']} (least squares):",
            "",
            *render_model(fit, model["rows"], model["limits"]),
        ]
    for name, error in result.get("errors", {}).items():
        lines += ["", f"**{name} failed:** `{error}`"]
    return "\n".join(lines) + "\n"


def model(sizes: Sequence[Json], *, held_kib: float, open_files: int, inotify: int) -> Json:
    """The fit, its rows and the limits, as the result records them."""
    fit = fit_costs(sizes)
    return {
        "points": sorted({int(s["workers"]) for s in sizes}),
        "held_kib_per_workload": held_kib,
        "fit": {k: {"base": v.base, "per_worker": v.per_worker} for k, v in fit.items()},
        "rows": project(fit, held_kib_per_workload=held_kib),
        "limits": limits_met(
            fit,
            open_files=open_files,
            inotify_instances=inotify,
            inotify_per_worker=INOTIFY_PER_APISERVER,
            inotify_rest=INOTIFY_FOR_THE_REST,
            held_kib_per_workload=held_kib,
        ),
    }
