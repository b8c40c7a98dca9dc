"""``python -m bench.panel_viewers``: what the dashboard's viewers cost the controller.

On a local fleet, the controller serves and registers its aggregated API; the bench
creates ``--workloads`` Jobs (default 5,000, each done in a second; those a fleet kept
from an earlier run already holds are reused) and waits until they are all Complete. Then, in ``--rounds`` pairs of windows, a steady churn of new
Jobs (``--churn`` a second) runs once with no viewer and once with ``--viewers``
viewers (default 10), each watching the three views the dashboard watches (fleet,
queues, workloads) through the manager's apiserver, as the fleet's admin, exactly as
a browser behind `kubectl proxy` does. The controller's CPU and RSS are sampled from
``/proc`` in each window (after ``--warmup`` seconds, so that what is compared is
watching, not joining; the viewers' joins are reported apart). Target: with viewers,
CPU and memory within 10 % of no viewer (medians over the rounds).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import httpx2
import yaml

from bench.controller import ControllerProcess, ProcSampler
from bench.fleetctl import MANAGER, Fleet, FleetError, FleetShape
from bench.workload import PodShape, burst, create_namespace, create_request, job_manifest
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS
from jobrelay.relayapi.route_rules import API_PATH
from jobrelay.vocabulary.meta import Meta

REPO = Path(__file__).resolve().parents[1]
TARGET_PCT = 10.0
VIEWS = ("fleet", "queues", "workloads")
NAMESPACES = 10
RUN = "panel-bench"


def _say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def _admin_http(kubeconfig: Path) -> httpx2.AsyncClient:
    """The manager's apiserver as the kubeconfig's user (the fleet's admin certificate)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    headers = {}
    if "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    else:
        context.load_cert_chain(user["client-certificate"], user["client-key"])
    return httpx2.AsyncClient(base_url=cluster["server"], verify=context, headers=headers,
                              timeout=httpx2.Timeout(30, read=None))  # fmt: skip


async def _served(http: httpx2.AsyncClient, timeout: float = 90) -> None:
    """Until the manager forwards the panel's views to the controller (APIService Available)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx2.HTTPError):
            if (await http.get(f"{API_PATH}/fleet")).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError("the panel's views were not served through the manager in time")
        await asyncio.sleep(1)


@dataclass
class Viewer:
    """One dashboard: a watch of each view, read to the end (counted)."""

    events: int = 0
    bytes: int = 0
    joined: float = 0.0  # seconds until every view's initial rows arrived
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def watch(self, http: httpx2.AsyncClient, view: str, ready: asyncio.Event) -> None:
        async with http.stream("GET", f"{API_PATH}/{view}", params={"watch": "true"}) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                self.bytes += len(line) + 1
                if '"BOOKMARK"' not in line[:24]:
                    self.events += 1
                ready.set()

    async def start(self, http: httpx2.AsyncClient) -> None:
        started = time.monotonic()
        readies = []
        for view in VIEWS:
            ready = asyncio.Event()
            readies.append(ready)
            self.tasks.append(asyncio.create_task(self.watch(http, view, ready)))
        # The queues view is empty on this fleet (no RelayQueue): only the others announce.
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies[::2])), 120)
        self.joined = time.monotonic() - started

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, httpx2.HTTPError):
                await task


async def _complete(manager: ApiClient, wanted: int, timeout: float) -> int:
    """Until ``wanted`` bench Jobs are complete; how many the manager holds then."""
    deadline = time.monotonic() + timeout
    while True:
        listed = await manager.list(JOBS, label_selector=f"bench.jobrelay.dev/run={RUN}")
        done = sum(
            1
            for job in listed.items
            if any(c.get("type") == "Complete" and c.get("status") == "True"
                   for c in (job.get("status") or {}).get("conditions") or [])
        )  # fmt: skip
        if done >= wanted:
            _say(f"{done} of the {len(listed.items)} bench Jobs are complete")
            return len(listed.items)
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {done} of {wanted} Jobs complete after {timeout:.0f} s")
        _say(f"{done}/{wanted} Jobs complete")
        await asyncio.sleep(5)


async def _churn(
    manager: ApiClient, per_second: float, seconds: float, first: int, prefix: str
) -> int:
    """Create ``per_second`` Jobs a second for ``seconds``; how many were made."""
    made = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        name = f"churn-{prefix}-{first + made:06d}"
        body = job_manifest(name, f"{RUN}-churn", RUN, PodShape(), managed_by="jobrelay.dev/relay")
        await manager.create(JOBS, body)
        made += 1
        await asyncio.sleep(max(0.0, start + made / per_second - time.monotonic()))
    return made


async def _run(fleet: Fleet, options: dict[str, Any], logs: Path, stamp: str) -> dict[str, Any]:
    kubeconfig = fleet.kubeconfig(MANAGER)
    controller = ControllerProcess(
        kubeconfig, logs / "controller.log", ["--api-address", "127.0.0.1:0", "--api-register"]
    )
    controller.start()
    result: dict[str, Any] = {"windows": [], "joins": []}
    try:
        await controller.wait_ready()
        async with ApiClient.from_kubeconfig(kubeconfig, cluster=MANAGER) as manager, \
                _admin_http(kubeconfig) as http:  # fmt: skip
            await _served(http)
            for index in range(NAMESPACES):
                await create_namespace(manager, f"{RUN}-{index}")
            await create_namespace(manager, f"{RUN}-churn")
            wanted = options["workloads"]
            # A fleet kept from an earlier run may hold them already (--state-dir).
            there = await manager.list(JOBS, label_selector=f"bench.jobrelay.dev/run={RUN}")
            have = {Meta(job).name for job in there.items}
            missing = [i for i in range(wanted) if f"job-{i:06d}" not in have]
            _say(f"creating {len(missing)} Jobs ({len(have)} there already) ...")
            requests = [
                create_request(manager, job_manifest(
                    f"job-{i:06d}", f"{RUN}-{i % NAMESPACES}", RUN, PodShape(),
                    managed_by="jobrelay.dev/relay"))
                for i in missing
            ]  # fmt: skip
            await burst(requests, 32, lambda *_: None)
            result["held"] = await _complete(manager, wanted, options["timeout"])
            churned = 0
            window, warmup = options["window"], options["warmup"]
            async with ProcSampler(controller.pid) as sampler:
                for round_ in range(options["rounds"]):
                    # ABBA: the order alternates, so a drift over the run (RSS grows as
                    # Jobs are added) weighs on both sides alike.
                    order = (0, options["viewers"])
                    for viewers_count in order if round_ % 2 == 0 else order[::-1]:
                        viewers = [Viewer() for _ in range(viewers_count)]
                        joining = time.monotonic()
                        await asyncio.gather(*(v.start(http) for v in viewers))
                        joined = time.monotonic()
                        if viewers:
                            result["joins"].append({
                                "round": round_, "seconds": joined - joining,
                                **sampler.window(joining, joined)})  # fmt: skip
                        churn = asyncio.create_task(
                            _churn(manager, options["churn"], warmup + window, churned, stamp)
                        )
                        await asyncio.sleep(warmup)
                        start = time.monotonic()
                        events_before = sum(v.events for v in viewers)
                        await asyncio.sleep(window)
                        end = time.monotonic()
                        events = sum(v.events for v in viewers) - events_before
                        churned += await churn
                        await asyncio.gather(*(v.stop() for v in viewers))
                        figures = sampler.window(start, end)
                        result["windows"].append({
                            "round": round_, "viewers": viewers_count,
                            "events_per_viewer_per_s": events / max(1, viewers_count) / window,
                            **figures})  # fmt: skip
                        _say(f"round {round_ + 1}, {viewers_count} viewers: CPU "
                             f"{figures['cpu_mean_pct']:.1f} %, RSS "
                             f"{figures['rss_mean_mib']:.0f} MiB")  # fmt: skip
            result["churned"] = churned
    finally:
        await controller.stop()
    return result


def summary(result: dict[str, Any], viewers: int) -> dict[str, Any]:
    def median(key: str, count: int) -> float:
        return statistics.median(w[key] for w in result["windows"] if w["viewers"] == count)

    quiet_cpu, watched_cpu = median("cpu_mean_pct", 0), median("cpu_mean_pct", viewers)
    quiet_rss, watched_rss = median("rss_mean_mib", 0), median("rss_mean_mib", viewers)
    cpu_pct = 100 * (watched_cpu - quiet_cpu) / quiet_cpu
    rss_pct = 100 * (watched_rss - quiet_rss) / quiet_rss
    return {
        "cpu_no_viewer_pct": quiet_cpu, "cpu_viewers_pct": watched_cpu, "cpu_change_pct": cpu_pct,
        "rss_no_viewer_mib": quiet_rss, "rss_viewers_mib": watched_rss, "rss_change_pct": rss_pct,
        "passed": cpu_pct <= TARGET_PCT and rss_pct <= TARGET_PCT,
    }  # fmt: skip


def render(result: dict[str, Any], options: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [
        f"## Dashboard viewers ({result['started_utc']})", "",
        f"{result['held']} workloads held, a churn of {options['churn']:g} Jobs/s, "
        f"{options['viewers']} viewers each watching fleet, queues and workloads through the "
        f"manager's apiserver; {options['rounds']} rounds of {options['window']:g} s windows "
        f"(after {options['warmup']:g} s warm-up; ABBA order). Controller from /proc:", "",
        "| round | viewers | CPU mean % of a core | CPU busiest % | RSS mean MiB | events/viewer/s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for w in result["windows"]:
        lines.append(f"| {w['round'] + 1} | {w['viewers']} | {w['cpu_mean_pct']:.1f} | "
                     f"{w['cpu_max_pct']:.0f} | {w['rss_mean_mib']:.0f} | "
                     f"{w['events_per_viewer_per_s']:.1f} |")  # fmt: skip
    joins = result["joins"]
    if joins:
        lines += ["", f"{options['viewers']} viewers joining at once (each gets every row): "
                  f"median {statistics.median(j['seconds'] for j in joins):.1f} s, "
                  f"{statistics.median(j['cpu_seconds'] for j in joins):.2f} CPU-s of the "
                  "controller."]  # fmt: skip
    verdict = "PASS" if s["passed"] else "FAIL"
    lines += ["", f"**{verdict}** (target: within {TARGET_PCT:g} %): CPU "
              f"{s['cpu_no_viewer_pct']:.1f} -> {s['cpu_viewers_pct']:.1f} % of a core "
              f"({s['cpu_change_pct']:+.1f} %), RSS {s['rss_no_viewer_mib']:.0f} -> "
              f"{s['rss_viewers_mib']:.0f} MiB ({s['rss_change_pct']:+.1f} %), medians over "
              "the rounds.", ""]  # fmt: skip
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Reuse (or bring up) the fleet here; default: a temporary one.",
)
@click.option("--keep-fleet", is_flag=True, help="Leave a fleet this run brought up running.")
@click.option("--workloads", default=5000, show_default=True, type=click.IntRange(1))
@click.option("--viewers", default=10, show_default=True, type=click.IntRange(1, 100))
@click.option(
    "--churn",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="New Jobs a second during each window.",
)
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1))
@click.option("--window", default=40.0, show_default=True, type=click.FloatRange(5))
@click.option("--warmup", default=5.0, show_default=True, type=click.FloatRange(0))
@click.option("--timeout", default=1800.0, show_default=True, type=click.FloatRange(1))
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path),
              default=REPO / "bench" / "results", show_default=True)  # fmt: skip
def main(state_dir: Path | None, keep_fleet: bool, results_dir: Path, **options: Any) -> None:
    """The controller's CPU and memory with dashboard viewers watching, against none."""
    started = datetime.datetime.now(datetime.UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    logs = Path(tempfile.mkdtemp(prefix=f"jobrelay-bench-{stamp}-"))
    try:
        fleet = Fleet.ensure(state_dir, FleetShape())
    except FleetError as not_up:
        raise click.ClickException(str(not_up)) from not_up
    try:
        result = asyncio.run(_run(fleet, options, logs, stamp.lower()))
    except Exception as failure:
        raise click.ClickException(f"panel_viewers: {failure}; logs in {logs}") from None
    finally:
        if not keep_fleet:
            fleet.down()
    result["started_utc"] = started.strftime("%Y-%m-%d %H:%M UTC")
    result["options"] = options
    result["summary"] = summary(result, options["viewers"])
    markdown = render(result, options)
    base = results_dir / f"{stamp}-panel"
    base.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    base.with_suffix(".md").write_text(markdown)
    click.echo(markdown)
    _say(f"results in {base}.json and {base}.md; controller log in {logs}")
    if not result["summary"]["passed"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
