"""``python -m bench.many_workers``: what each worker costs one jobrelay leader (issue 36).

For each fleet size (``--workers``, default 1, 8 and 32): a fleet of light workers
(``jobrelay fleet up --light``, reused when a healthy one of that size is in its state
directory), the controller started as the README's first hour starts it (``jobrelay
run`` on the manager's kubeconfig, bench/controller.py, finished mirrors kept their
default hour), every worker Connected, then ``--idle-seconds`` of idle:

- the controller's RSS and CPU (% of a core, median of 1 s samples, from ``/proc``);
- its established TCP connections to each worker (its sockets in ``/proc/PID/fd``
  matched in ``/proc/PID/net/tcp``), and the watches it opened on each (its
  ``jobrelay_apiserver_requests_total{verb="watch"}``);
- its requests to each worker per minute (the same counter's other verbs: probes,
  status refreshes);
- each light worker's kube-apiserver RSS and CPU.

At the largest size, ``--jobs`` one-pod Jobs of one second are created on the manager
(``--concurrency`` at a time) and waited for until all are Complete there: total time,
Jobs per worker, that none ran twice (one recorded mirror per Job, and the one mirror
found on the workers is it), the controller's RSS peak and CPU per Job. With
``--lose-one``, ``--long-jobs`` Jobs of ``--long-duration`` follow; the light worker
holding most of them has its kube-apiserver stopped (SIGSTOP by its recorded PID, as the
e2e tests lose a worker): it must turn Lost (``status.lostTime``), its Jobs must run
again elsewhere and Complete, and, once it is continued, its stale mirrors be deleted.

The per-worker cost is then fitted over the sizes (bench/worker_model.py) and projected
to 100 and 1,000 workers and a million held workloads.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
import httpx2
import yaml

from bench import report, worker_model
from bench.controller import ControllerProcess, ProcSampler, read_proc
from bench.window_cpu import FleetProcess, load_fleet_processes, parse_proc_stat
from bench.workload import PodShape, burst, create_namespace, create_request, job_manifest
from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.resources import JOBS, WORKER_CLUSTERS
from jobrelay.vocabulary.names import (
    DEFAULT_CONTROLLER_NAME,
    MIRROR_LABEL,
    MIRRORS_ANNOTATION,
    ORIGIN_UID_LABEL,
    RUN_ANNOTATION,
    controller_label_value,
)
from jobrelay.vocabulary.placement import placement_of, placements_of

Json = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
MANAGER = "manager"
APISERVER = "kube-apiserver"
MIRROR_SELECTOR = f"{MIRROR_LABEL}={controller_label_value(DEFAULT_CONTROLLER_NAME)}"
# docs/performance.md: RSS per workload held before its first placement
# (`python -m bench.held_backlog`, 100,000 Jobs from 20 templates), and per dispatched
# workload or one with a template of its own ("Sizing").
HELD_KIB_TEMPLATED = 1.96
HELD_KIB_DISPATCHED = 7.5
IDLE_SAMPLE_SECONDS = 5.0


def _say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


async def _until(
    check: Callable[[], Awaitable[Any]], *, timeout: float, what: str, interval: float = 1.0
) -> Any:
    """``check()``'s first truthy answer; TimeoutError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not within {timeout:.0f}s: {what}")
        await asyncio.sleep(interval)


# -- the fleet ----------------------------------------------------------------------------


def _fleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobrelay", "fleet", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )


def light_workers(state_dir: Path) -> list[str]:
    return sorted(
        (p.stem for p in state_dir.glob("*.kubeconfig") if p.stem != MANAGER),
        key=lambda name: (len(name), name),
    )


def ensure_light_fleet(state_dir: Path, workers: int) -> Json:
    """A healthy light fleet of ``workers`` in ``state_dir``: reused, else (re)made."""
    state_dir.mkdir(parents=True, exist_ok=True)
    if (
        (state_dir / "state.json").exists()
        and len(light_workers(state_dir)) == workers
        and _fleet("status", "--state-dir", str(state_dir)).returncode == 0
    ):
        _say(f"reusing the healthy light fleet of {workers} in {state_dir}")
        return {"reused": True, "up_seconds": math.nan}
    if (state_dir / "state.json").exists() and len(light_workers(state_dir)) != workers:
        _fleet("down", "--purge", "--state-dir", str(state_dir))
    _say(f"fleet up --workers {workers} --light in {state_dir} ...")
    started = time.monotonic()
    code = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobrelay",
            "fleet",
            "up",
            "--light",
            "--workers",
            str(workers),
            "--state-dir",
            str(state_dir),
        ],
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr,
        check=False,
    ).returncode
    if code != 0:
        _fleet("down", "--state-dir", str(state_dir))
        raise click.ClickException(f"`jobrelay fleet up --light --workers {workers}` failed")
    return {"reused": False, "up_seconds": time.monotonic() - started}


def worker_ports(state_dir: Path) -> dict[int, str]:
    """The apiserver port of each worker, from its kubeconfig."""
    ports = {}
    for worker in light_workers(state_dir):
        config = yaml.safe_load((state_dir / f"{worker}.kubeconfig").read_text())
        server = config["clusters"][0]["cluster"]["server"]
        ports[int(server.rsplit(":", 1)[1].strip("/"))] = worker
    return ports


def connections(pid: int, ports: dict[int, str]) -> dict[str, int]:
    """The controller's established TCP connections to each worker."""
    inodes = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.append(int(target[8:-1]))
    sockets: dict[int, tuple[int, str]] = {}
    for table in ("tcp", "tcp6"):
        try:
            sockets |= worker_model.tcp_sockets(Path(f"/proc/{pid}/net/{table}").read_text())
        except OSError:
            continue
    by_port = worker_model.connections_by_port(inodes, sockets)
    return {worker: by_port.get(port, 0) for port, worker in ports.items()}


def _alive(process: FleetProcess) -> bool:
    try:
        stat = parse_proc_stat(Path(f"/proc/{process.pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return False
    return stat.start_ticks == process.start_ticks


# -- the controller and its workers ----------------------------------------------------


async def worker_states(manager: ApiClient) -> dict[str, Json]:
    """Each WorkerCluster's connected/lost state."""
    states = {}
    for item in (await manager.list(WORKER_CLUSTERS)).items:
        status = item.get("status") or {}
        connected = any(
            c.get("type") == "Connected" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        states[item["metadata"]["name"]] = {
            "connected": connected,
            "lost_time": status.get("lostTime"),
        }
    return states


async def all_connected(manager: ApiClient, workers: list[str]) -> bool:
    states = await worker_states(manager)
    return all(
        states.get(w, {}).get("connected") and not states[w].get("lost_time") for w in workers
    )


async def scrape(url: str) -> dict[str, dict[str, float]]:
    async with httpx2.AsyncClient(timeout=10.0, trust_env=False) as http:
        answer = await http.get(url)
    answer.raise_for_status()
    return worker_model.requests_by_worker(answer.text)


async def measure_idle(controller: ControllerProcess, state_dir: Path, seconds: float) -> Json:
    """The controller's and the light workers' standing cost over ``seconds`` of idle."""
    assert controller.metrics_url is not None
    ports = worker_ports(state_dir)
    fleet = [p for p in load_fleet_processes(state_dir) if p.name == APISERVER]
    workers = [p for p in fleet if p.cluster != MANAGER]
    shared = [p for p in load_fleet_processes(state_dir) if p.cluster == "worker-1"]
    before = await scrape(controller.metrics_url)
    fleet_before = {p: read_proc(p.pid) for p in workers + shared}
    started = time.monotonic()
    # 5 s samples: /proc counts CPU in 10 ms ticks, too coarse for 1 s at under 1 %.
    async with ProcSampler(controller.pid, interval=IDLE_SAMPLE_SECONDS) as sampler:
        await asyncio.sleep(seconds / 2)
        held = connections(controller.pid, ports)
        await asyncio.sleep(seconds / 2)
    elapsed = time.monotonic() - started
    after = await scrape(controller.metrics_url)
    fleet_after = {p: read_proc(p.pid) for p in workers + shared}
    series = [cpu for _, cpu, _ in sampler.series(sampler.samples[0].at)]
    window = sampler.window(started - 1, time.monotonic() + 1)
    rates = worker_model.request_rates(before, after, elapsed)

    def cpu_pct(p: FleetProcess) -> float:
        a, b = fleet_before[p], fleet_after[p]
        return 100.0 * (b.cpu_seconds - a.cpu_seconds) / (b.at - a.at)

    apiservers = [(cpu_pct(p), fleet_after[p].rss_bytes / 2**20) for p in workers]
    return {
        "seconds": elapsed,
        "controller_rss_mib": window["rss_end_mib"],
        # The fit takes the whole window's CPU (exact); the median of the 5 s samples
        # shows whether a burst (a relist, a GC) weighed on it.
        "controller_cpu_pct": window["cpu_mean_pct"],
        "controller_cpu_median_pct": statistics.median(series) if series else math.nan,
        "connections": sum(held.values()),
        "connections_by_worker": held,
        "watches": sum(r["watches_opened"] for r in rates.values()),
        "requests_per_min": sum(r["requests_per_min"] for r in rates.values()),
        "rewatches_per_min": sum(r["rewatches_per_min"] for r in rates.values()),
        "by_worker": rates,
        "worker_apiserver_cpu_pct_mean": statistics.fmean(c for c, _ in apiservers),
        "worker_apiserver_rss_mib_mean": statistics.fmean(r for _, r in apiservers),
        "worker_apiservers_cpu_pct": sum(c for c, _ in apiservers),
        "worker_apiservers_rss_mib": sum(r for _, r in apiservers),
        "shared": {
            p.name: {"cpu_pct": cpu_pct(p), "rss_mib": fleet_after[p].rss_bytes / 2**20}
            for p in shared
            if p.name != APISERVER
        },
    }


# -- Jobs ------------------------------------------------------------------------------


async def submit(
    manager: ApiClient, namespace: str, run: str, count: int, concurrency: int, duration: str
) -> Json:
    await create_namespace(manager, namespace)
    bodies = [
        job_manifest(
            f"j{index:05d}",
            namespace,
            run,
            PodShape(duration=duration),
            managed_by=DEFAULT_CONTROLLER_NAME,
        )
        for index in range(count)
    ]
    stats = await burst(
        [create_request(manager, body) for body in bodies], concurrency, lambda *_: None
    )
    return stats.to_json()


def _finished(job: Json) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _complete(job: Json) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


async def jobs_of(manager: ApiClient, namespace: str) -> list[Json]:
    return (await manager.list(JOBS, namespace=namespace)).items


async def mirrors_on(
    workers: dict[str, ApiClient], namespace: str
) -> dict[str, list[tuple[str, str, int]]]:
    """Management Job UID -> every mirror ``(worker, uid)`` found on the workers."""
    found: dict[str, list[tuple[str, str, int]]] = {}
    listed = await asyncio.gather(
        *(
            c.list(JOBS, namespace=namespace, label_selector=MIRROR_SELECTOR)
            for c in workers.values()
        )
    )
    for worker, result in zip(workers, listed, strict=True):
        for mirror in result.items:
            meta = mirror["metadata"]
            origin = (meta.get("labels") or {}).get(ORIGIN_UID_LABEL, "")
            run = (meta.get("annotations") or {}).get(RUN_ANNOTATION, "0")
            found.setdefault(origin, []).append(
                (worker, meta["uid"], int(run) if run.isdigit() else 0)
            )
    return found


def run_twice(
    jobs: list[Json], found: dict[str, list[tuple[str, str, int]]], moved_from: str | None
) -> dict[str, list[str]]:
    problems = {}
    for job in jobs:
        annotations = job["metadata"].get("annotations") or {}
        placements = placements_of(job)
        moved = moved_from if moved_from is not None and placements[:1] == (moved_from,) else None
        found_here = found.get(job["metadata"]["uid"], [])
        wrong = worker_model.run_twice_problems(
            placements,
            worker_model.mirror_records(annotations.get(MIRRORS_ANNOTATION, "")),
            found_here,
            moved_from=moved,
        )
        if (job.get("status") or {}).get("succeeded", 0) > 1:
            wrong.append(f"succeeded {job['status']['succeeded']} times")
        if wrong:
            problems[job["metadata"]["name"]] = wrong
    return problems


async def burst_run(
    manager: ApiClient,
    workers: dict[str, ApiClient],
    controller: ControllerProcess,
    *,
    namespace: str,
    run: str,
    jobs: int,
    concurrency: int,
    timeout: float,
) -> Json:
    """``jobs`` one-second Jobs created at once; first create -> all Complete."""
    at_start = read_proc(controller.pid)
    started = time.monotonic()
    async with ProcSampler(controller.pid, interval=1.0) as sampler:
        created = await submit(manager, namespace, run, jobs, concurrency, "1s")

        async def done() -> list[Json] | None:
            listed = await jobs_of(manager, namespace)
            return listed if len(listed) == jobs and all(map(_finished, listed)) else None

        listed = await _until(done, timeout=timeout, what=f"{jobs} Jobs finished", interval=1.0)
        total = time.monotonic() - started
    at_end = read_proc(controller.pid)
    per_worker = Counter(placement_of(job) for job in listed)
    found = await mirrors_on(workers, namespace)
    problems = run_twice(listed, found, None)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "created": created,
        "total_s": total,
        "complete": sum(map(_complete, listed)),
        "per_worker": dict(sorted(per_worker.items())),
        "workers_used": len([w for w in workers if per_worker.get(w)]),
        "ran_twice": problems,
        "moved": sum(1 for job in listed if len(placements_of(job)) > 1),
        "controller_rss_peak_mib": sampler.window(started - 1, time.monotonic() + 1)[
            "rss_peak_mib"
        ],
        "controller_cpu_ms_per_job": 1000 * (at_end.cpu_seconds - at_start.cpu_seconds) / jobs,
    }


async def lose_one(
    manager: ApiClient,
    workers: dict[str, ApiClient],
    state_dir: Path,
    *,
    namespace: str,
    run: str,
    jobs: int,
    duration: float,
    lost_timeout: float,
) -> Json:
    """Long Jobs spread, then the worker holding most of them stopped: Lost, moved, once."""
    await submit(manager, namespace, run, jobs, jobs, f"{duration:g}s")

    async def placed() -> list[Json] | None:
        listed = await jobs_of(manager, namespace)
        ok = len(listed) == jobs and all(
            placement_of(j) and (j.get("status") or {}).get("active") for j in listed
        )
        return listed if ok else None

    listed = await _until(placed, timeout=120, what=f"{jobs} long Jobs placed and running")
    spread = Counter(placement_of(j) for j in listed)
    # Not worker-1: its records hold the shared etcd and the job stand-in too.
    doomed = max((w for w in spread if w != "worker-1"), key=lambda w: spread[w])
    record = next(
        p for p in load_fleet_processes(state_dir) if p.cluster == doomed and p.name == APISERVER
    )
    assert _alive(record), f"{doomed}'s kube-apiserver is not running: {record}"
    os.kill(record.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    _say(f"stopped {doomed}'s kube-apiserver (pid {record.pid}) holding {spread[doomed]} Jobs")
    result: Json = {
        "jobs": jobs,
        "duration_s": duration,
        "spread": dict(spread),
        "doomed": doomed,
        "doomed_jobs": spread[doomed],
    }
    try:

        async def lost() -> str | None:
            return (await worker_states(manager)).get(doomed, {}).get("lost_time")

        result["lost_time"] = await _until(
            lost, timeout=lost_timeout + 90, what=f"{doomed} Lost (status.lostTime)"
        )
        result["lost_after_s"] = time.monotonic() - stopped

        async def all_complete() -> list[Json] | None:
            listed = await jobs_of(manager, namespace)
            return listed if all(map(_finished, listed)) else None

        listed = await _until(all_complete, timeout=duration + 120, what="every long Job finished")
        result["moved_complete_after_s"] = time.monotonic() - stopped
    finally:
        if _alive(record):
            os.kill(record.pid, signal.SIGCONT)
    continued = time.monotonic()

    async def stale_gone() -> dict[str, list[tuple[str, str, int]]] | None:
        found = await mirrors_on(workers, namespace)
        return found if not any(w == doomed for m in found.values() for w, _, _ in m) else None

    found = await _until(stale_gone, timeout=120, what=f"the stale mirrors on {doomed} deleted")
    result["stale_deleted_after_s"] = time.monotonic() - continued
    await _until(
        lambda: all_connected(manager, [doomed]), timeout=120, what=f"{doomed} Connected again"
    )
    moved = [j for j in listed if placements_of(j)[:1] == (doomed,) and len(placements_of(j)) > 1]
    result["moved"] = len(moved)
    result["moved_to"] = sorted({placement_of(j) for j in moved})
    result["complete"] = sum(map(_complete, listed))
    result["ran_twice"] = run_twice(listed, found, doomed)
    return result


# -- one fleet size ----------------------------------------------------------------------


async def measure_size(
    state_dir: Path, workers: int, *, largest: bool, params: Json, logs: Path
) -> Json:
    fleet = ensure_light_fleet(state_dir, workers)
    names = light_workers(state_dir)
    extra = ["--finished-mirror-ttl", "1h"]  # the default: mirrors kept for the check
    if largest and params["lose_one"]:
        extra += ["--worker-lost-timeout", f"{params['lost_timeout']:g}"]
    controller = ControllerProcess(
        state_dir / f"{MANAGER}.kubeconfig", logs / f"controller-{workers}.log", extra
    )
    out: Json = {
        "workers": workers,
        "fleet": fleet,
        "controller_args": controller.argv[3:],
        "errors": {},
    }
    api = ApiOptions(max_connections=params["concurrency"] + 32, request_timeout=60.0)
    clients = {
        name: ApiClient.from_kubeconfig(state_dir / f"{name}.kubeconfig", cluster=name, options=api)
        for name in [MANAGER, *names]
    }
    manager = clients[MANAGER]
    worker_clients = {n: clients[n] for n in names}
    controller.start()
    try:
        out["ready_s"] = await controller.wait_ready()
        await _until(
            lambda: all_connected(manager, names),
            timeout=300,
            what=f"all {workers} workers Connected",
        )
        out["connected_s"] = time.monotonic() - controller.started_at
        _say(f"{workers} workers connected after {out['connected_s']:.1f}s; idle ...")
        out["idle"] = await measure_idle(controller, state_dir, params["idle_seconds"])
        # A failed phase is reported with what was measured before it.
        if largest and params["jobs"]:
            _say(f"{params['jobs']} Jobs ...")
            try:
                out["burst"] = await burst_run(
                    manager, worker_clients, controller, namespace=f"many-{params['run']}",
                    run=params["run"], jobs=params["jobs"], concurrency=params["concurrency"],
                    timeout=params["timeout"],
                )  # fmt: skip
            except Exception as error:
                out["errors"]["burst"] = f"{type(error).__name__}: {error}"
        if largest and params["lose_one"] and workers > 1:
            _say("losing one worker ...")
            try:
                out["lose_one"] = await lose_one(
                    manager, worker_clients, state_dir, namespace=f"lose-{params['run']}",
                    run=params["run"], jobs=params["long_jobs"],
                    duration=params["long_duration"], lost_timeout=params["lost_timeout"],
                )  # fmt: skip
            except Exception as error:
                out["errors"]["lose_one"] = f"{type(error).__name__}: {error}"
    finally:
        out["controller_exit"] = await controller.stop()
        for client in clients.values():
            await client.aclose()
    return out


# -- the command -------------------------------------------------------------------------


def _sizes(values: tuple[str, ...]) -> list[int]:
    sizes = sorted({int(part) for value in values for part in value.split(",") if part.strip()})
    if not sizes or sizes[0] < 1:
        raise click.BadParameter("worker counts of 1 or more", param_hint="--workers")
    return sizes


def _inotify_limit() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    except (OSError, ValueError):
        return 128


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--workers",
    "workers_args",
    multiple=True,
    default=("1,8,32",),
    show_default=True,
    help="Light worker counts to measure (repeatable or comma list).",
)
@click.option(
    "--jobs",
    default=2000,
    show_default=True,
    type=click.IntRange(0),
    help="One-second Jobs run at the largest size (0: none).",
)
@click.option("--concurrency", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where each size's fleet lives (a light-N directory each).",
)
@click.option(
    "--lose-one/--no-lose-one",
    default=True,
    show_default=True,
    help="At the largest size, stop one worker's apiserver after the Jobs.",
)
@click.option("--idle-seconds", default=30.0, show_default=True, type=click.FloatRange(5.0))
@click.option("--long-jobs", default=16, show_default=True, type=click.IntRange(1))
@click.option("--long-duration", default=60.0, show_default=True, type=click.FloatRange(1.0))
@click.option(
    "--lost-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1.0),
    help="The controller's --worker-lost-timeout when --lose-one.",
)
@click.option("--timeout", default=480.0, show_default=True, type=click.FloatRange(1.0))
@click.option("--keep-fleet", is_flag=True, help="Leave each size's fleet up.")
@click.option(
    "--fit-with",
    "fit_with",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Earlier results (JSON) whose sizes join the fit.",
)
@click.option(
    "--held-kib",
    default=HELD_KIB_TEMPLATED,
    show_default=True,
    help="KiB of controller RSS per held workload, for the model.",
)
@click.option(
    "--results-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=REPO / "bench" / "results",
    show_default=True,
)
def main(
    workers_args: tuple[str, ...],
    jobs: int,
    concurrency: int,
    state_dir: Path | None,
    lose_one: bool,
    idle_seconds: float,
    long_jobs: int,
    long_duration: float,
    lost_timeout: float,
    timeout: float,
    keep_fleet: bool,
    fit_with: tuple[Path, ...],
    held_kib: float,
    results_dir: Path,
) -> None:
    """What each worker costs one jobrelay leader, at 1, 8 and 32 light workers, and the
    model fitted over them."""
    sizes = _sizes(workers_args)
    started = datetime.datetime.now(datetime.UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    root = (state_dir or Path(tempfile.mkdtemp(prefix="jobrelay-many-"))).absolute()
    logs = Path(tempfile.mkdtemp(prefix=f"jobrelay-many-{stamp}-"))
    params = {
        "jobs": jobs,
        "concurrency": concurrency,
        "lose_one": lose_one,
        "idle_seconds": idle_seconds,
        "long_jobs": long_jobs,
        "long_duration": long_duration,
        "lost_timeout": lost_timeout,
        "timeout": timeout,
        "run": stamp[9:15].lower(),
    }
    result: Json = {
        "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "-m", "bench.many_workers", *sys.argv[1:]]),
        "machine": report.machine_info(REPO),
        "params": params,
        "logs": str(logs),
        "sizes": [],
        "errors": {},
    }
    for count in sizes:
        directory = root / f"light-{count}"
        try:
            result["sizes"].append(
                asyncio.run(
                    measure_size(
                        directory, count, largest=count == sizes[-1], params=params, logs=logs
                    )
                )
            )
            for phase, error in result["sizes"][-1]["errors"].items():
                result["errors"][f"{count} workers, {phase}"] = error
            for failed in worker_model.failed_checks(result["sizes"][-1]):
                result["errors"][f"{count} workers: {failed}"] = "check failed"
        except (Exception, KeyboardInterrupt) as error:
            result["errors"][f"{count} workers"] = f"{type(error).__name__}: {error}"
        finally:
            if not keep_fleet:
                _say(_fleet("down", "--state-dir", str(directory)).stdout.strip())
    measured = list(result["sizes"])
    for path in fit_with:
        measured += [
            s
            for s in json.loads(path.read_text())["sizes"]
            if s["workers"] not in {m["workers"] for m in measured}
        ]
    if len({s["workers"] for s in measured}) >= 2:
        result["model"] = worker_model.model(
            sorted(measured, key=lambda s: s["workers"]),
            held_kib=held_kib,
            open_files=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            inotify=_inotify_limit(),
        )
        result["fit_with"] = [str(p) for p in fit_with]
    markdown = worker_model.render(result)
    results_dir.mkdir(parents=True, exist_ok=True)
    base = results_dir / f"many-workers-{stamp}"
    report.write_json(base.with_suffix(".json"), result)
    base.with_suffix(".md").write_text(markdown)
    click.echo(markdown)
    _say(f"results in {base}.json and {base}.md")
    if result["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
