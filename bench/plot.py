"""One PNG: latency CDFs, and Jobs per second over time. matplotlib is optional."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

Json = dict[str, Any]


NO_MATPLOTLIB = "matplotlib is not installed (pip install matplotlib): no plot written"


def _pyplot() -> Any:
    """matplotlib's pyplot drawing to files, or None without matplotlib. Imported by name:
    the bench runs (and type-checks) without matplotlib installed."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        return importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return None


def plot(result: Json, path: Path) -> str:
    """Write the figure; returns a message saying what was done (or why not)."""
    plt = _pyplot()
    if plt is None:
        return NO_MATPLOTLIB
    scenarios = result["scenarios"]
    latency = scenarios.get("latency")
    throughput = scenarios.get("throughput", {})
    relay_runs = throughput.get("throughput", {}).get("runs", [])
    base_runs = throughput.get("baseline", {}).get("runs", [])
    if latency is None and not relay_runs and not base_runs:
        return "no latency or throughput results: no plot written"
    figure, (cdf, rate) = plt.subplots(1, 2, figsize=(13, 4.8))
    if latency is not None:
        for key, label in (("dispatch_ms", "dispatch"), ("status_ms", "status copy")):
            samples = sorted(latency["samples"][key])
            if samples:
                fractions = [(i + 1) / len(samples) for i in range(len(samples))]
                cdf.plot(samples, fractions, label=f"{label} (n={len(samples)})")
        cdf.set_xscale("log")
        cdf.set_xlabel("latency (ms, log scale)")
        cdf.set_ylabel("fraction of samples")
        p = latency["params"]
        cdf.set_title(f"Latency CDF: {p['jobs']} Jobs at {p['rate_per_s']:g}/s")
        cdf.grid(True, which="both", alpha=0.3)
        cdf.legend()
    else:
        cdf.set_axis_off()
    if relay_runs or base_runs:
        if relay_runs:
            series = relay_runs[0]["series"]
            for key, label in (
                ("accepted", "jobrelay: Jobs created on the manager/s"),
                ("dispatched", "jobrelay: mirrors created/s"),
                ("finished", "jobrelay: Jobs finished/s"),
            ):
                rate.plot(range(len(series[key])), series[key], label=label)
        if base_runs:
            series = base_runs[0]["series"]
            rate.plot(
                range(len(series["finished"])),
                series["finished"],
                linestyle="--",
                label="baseline: Jobs finished/s",
            )
        rate.set_xlabel("seconds since the first create (round 1)")
        rate.set_ylabel("Jobs per second")
        rate.set_title(f"Throughput: {throughput['params']['jobs']} Jobs")
        rate.grid(True, alpha=0.3)
        rate.legend()
    else:
        rate.set_axis_off()
    figure.suptitle(
        f"jobrelay benchmark, {result['started_utc']} ({result['machine']['nproc']} CPUs)"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written to {path}"


def plot_shares(result: Json, path: Path) -> str:
    """The fair-share bench: each queue's share of the running CPU over time (stacked),
    its target (dashed), and the saturated window shaded."""
    plt = _pyplot()
    if plt is None:
        return NO_MATPLOTLIB
    data = result["scenario"]
    queues = list(data["params"]["weights"])
    samples = data["samples"]
    summary = data["summary"]
    times = [s["at"] for s in samples]
    totals = [sum(s["running"].get(q, 0.0) for q in queues) for s in samples]
    shares = [
        [
            100 * s["running"].get(q, 0.0) / t if t > 0 else 0.0
            for s, t in zip(samples, totals, strict=True)
        ]
        for q in queues
    ]
    labels = [f"{q.rsplit('-', 1)[-1]} (weight {data['params']['weights'][q]:g})" for q in queues]
    figure, (stack, cpus) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True,
                                         gridspec_kw={"height_ratios": [2, 1]})  # fmt: skip
    stack.stackplot(times, shares, labels=labels, alpha=0.8)
    boundary = 0.0
    for queue in queues:  # where each band should end if the shares were exact
        boundary += 100 * summary["targets"][queue]
        if boundary < 99.9:
            stack.axhline(boundary, color="black", linestyle="--", linewidth=1)
    if summary["start"] is not None:
        cpus.axvspan(summary["start"], summary["end"], color="grey", alpha=0.12)
        for edge in (summary["start"], summary["end"]):
            stack.axvline(edge, color="grey", linestyle=":", linewidth=1.5)
        measured = ", ".join(
            f"{q.rsplit('-', 1)[-1]} {100 * summary['shares'][q]:.1f} %" for q in queues
        )
        verdict = "PASS" if summary["passed"] else "FAIL"
        stack.set_title(
            f"Share of running CPU (stacked; dashed: targets; dotted: saturated period)\n"
            f"saturated: {measured}; max deviation {summary['max_deviation_pp']:.1f} pp, {verdict}"
        )
    stack.set_ylabel("% of running CPU")
    stack.set_ylim(0, 100)
    stack.legend(loc="lower left")
    for queue, label in zip(queues, labels, strict=True):
        cpus.plot(times, [s["running"].get(queue, 0.0) for s in samples], label=label)
    cpus.plot(times, totals, color="black", label="total")
    cpus.axhline(data["capacity_cpu"], color="black", linestyle=":", linewidth=1)
    cpus.set_ylabel("running CPUs")
    cpus.set_xlabel("seconds since the first create")
    cpus.grid(True, alpha=0.3)
    cpus.legend(loc="upper right", fontsize="small")
    figure.suptitle(f"jobrelay fair share, {result['started_utc']} "
                    f"({data['capacity_cpu']:g} CPUs, {result['machine']['nproc']}-core host)")  # fmt: skip
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written to {path}"
