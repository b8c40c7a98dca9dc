"""`jobrelay demo`: a local fleet, jobrelay running, and a batch of Jobs and JobSets dispatched
to completion."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from jobrelay.cli import workloads
from jobrelay.cli.fleet import load_config
from jobrelay.cli.workloads import State
from jobrelay.kinds import WorkloadKind
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES
from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.fleet_state import FleetError
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.localfleet.shape import MANAGER, FleetShape
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME
from jobrelay.vocabulary.placement import not_placed_reason, placement_of

DEMO_NAMESPACE = "demo"
JOB = DEDICATED["Job.v1.batch"]
JOBSET = DEDICATED["JobSet.v1alpha2.jobset.x-k8s.io"]
DEMO_KINDS = (JOB, JOBSET)
# Two plain workers and a tainted GPU worker (in the source tree: `make demo` runs from it).
DEMO_FLEET = Path(__file__).resolve().parents[3] / "deploy" / "demo-fleet.yaml"


def _pod_template(duration: str, outcome: str, gpus: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main", "image": "busybox", "resources": {"requests": {"cpu": "250m"}},
    }  # fmt: skip
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if gpus:
        # GPU nodes are tainted: only pods that ask for GPUs and tolerate it go there.
        container["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    return {
        "metadata": {
            "annotations": {
                "fleet.jobrelay.dev/duration": duration,
                "fleet.jobrelay.dev/outcome": outcome,
            }
        },
        "spec": spec,
    }


def _job(
    name: str,
    *,
    managed: bool = True,
    duration: str = "2s",
    outcome: str = "succeed",
    gpus: int = 0,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": JOB.ref.api_version,
        "kind": JOB.ref.kind,
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE, "labels": {"app": "jobrelay-demo"}},
        "spec": {
            **({"managedBy": DEFAULT_CONTROLLER_NAME} if managed else {}),
            "backoffLimit": 1,
            "template": _pod_template(duration, outcome, gpus),
            **spec,
        },
    }


def _jobset(name: str, *, managed: bool = True, replicas: int = 2) -> dict[str, Any]:
    """A JobSet of a driver and ``replicas`` workers of 2 pods each."""

    def replicated(role: str, count: int, parallelism: int) -> dict[str, Any]:
        return {
            "name": role,
            "replicas": count,
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "completions": parallelism,
                    "backoffLimit": 0,
                    "template": _pod_template("3s", "succeed"),
                }
            },
        }

    return {
        "apiVersion": JOBSET.ref.api_version,
        "kind": JOBSET.ref.kind,
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE, "labels": {"app": "jobrelay-demo"}},
        "spec": {
            **({"managedBy": DEFAULT_CONTROLLER_NAME} if managed else {}),
            "replicatedJobs": [replicated("driver", 1, 1), replicated("workers", replicas, 2)],
        },
    }


def sample_jobs() -> list[dict[str, Any]]:
    jobs = [_job(f"train-{index}", duration=f"{1 + index % 3}s") for index in range(1, 7)]
    jobs += [
        _job("sweep", completions=6, parallelism=3, duration="1s"),
        _job("shards", completions=4, parallelism=4, completionMode="Indexed", duration="2s"),
        _job("flaky", outcome="fail", duration="1s"),
        _job("local-report", managed=False, duration="2s"),
        # Only worker-gpu has GPUs. It has 4: while one of these runs the other waits on
        # the manager, held with its reason (NotPlaced), and goes there once it fits.
        _job("gpu-train", gpus=3, duration="8s"),
        _job("gpu-wide", gpus=4, duration="2s"),
    ]
    return jobs


def sample_jobsets() -> list[dict[str, Any]]:
    return [_jobset("pipeline"), _jobset("local-pipeline", managed=False, replicas=1)]


def _row(kind: WorkloadKind, obj: dict[str, Any]) -> tuple[str, str, str, str, str]:
    status = obj.get("status") or {}
    managed = kind.managed_by(obj) == DEFAULT_CONTROLLER_NAME
    where = (placement_of(obj) or "-") if managed else "manager (local)"
    if managed:
        standing = workloads.standing(kind, obj)
        state = standing.state.value
        if standing.state in (State.FAILED, State.HELD, State.BLOCKED) and standing.reason:
            state += f" ({standing.reason.partition(':')[0]})"
    else:  # the manager's own controller runs it: only how it ended is jobrelay's to say
        finish = kind.finish(obj)
        if finish is None:
            state = "Running" if kind.has_run(obj) or status.get("active") else "Pending"
        else:
            state = State.COMPLETE.value if finish.succeeded else f"Failed ({finish.reason})"
    if kind is JOBSET:
        replicated = status.get("replicatedJobsStatus") or []
        done = sum(int(r.get("succeeded") or 0) for r in replicated)
        failed = sum(int(r.get("failed") or 0) for r in replicated)
        counts = f"{done}/{failed} jobs"
    else:
        counts = f"{status.get('succeeded', 0)}/{status.get('failed', 0)}"
    return kind.ref.kind, Meta(obj).name, where, state, counts


async def _list(manager: ApiClient, names: set[tuple[str, str]]) -> list[tuple[WorkloadKind, Any]]:
    found = []
    for kind in DEMO_KINDS:
        listed = await manager.list(kind.ref, namespace=DEMO_NAMESPACE)
        found += [
            (kind, obj) for obj in listed.items if (kind.ref.kind, obj["metadata"]["name"]) in names
        ]
    return found


async def _watch(
    manager: ApiClient, names: set[tuple[str, str]], timeout: float
) -> list[tuple[WorkloadKind, Any]]:
    deadline = time.monotonic() + timeout
    last = ""
    told: set[str] = set()
    while True:
        items = await _list(manager, names)
        for _, obj in items:
            held = not_placed_reason(obj)
            why = f"{obj['metadata']['name']} waits on the manager: {held}"
            if held and why not in told:
                told.add(why)
                click.echo(f"\n{why}")
        rows = sorted(_row(kind, obj) for kind, obj in items)
        table = "\n".join(f"  {k:<7} {n:<15} {w:<16} {s:<24} {c:>8}" for k, n, w, s, c in rows)
        if table != last:
            click.echo(
                f"\n{time.strftime('%H:%M:%S')}  {'KIND':<7} {'NAME':<15} {'WHERE':<16} "
                f"{'STATE':<24} {'OK/FAIL':>8}"
            )
            click.echo(table)
            last = table
        if len(items) == len(names) and all(kind.is_finished(obj) for kind, obj in items):
            return items
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"the demo workloads did not all finish within {timeout:.0f}s"
            )
        await asyncio.sleep(1.0)


async def _submit(manager: ApiClient) -> set[tuple[str, str]]:
    with contextlib.suppress(ApiError):
        await manager.delete(NAMESPACES, DEMO_NAMESPACE)
    # A namespace being deleted refuses new objects: wait for it to go.
    for _ in range(120):
        try:
            await manager.get(NAMESPACES, DEMO_NAMESPACE)
        except ApiError as error:
            if error.is_not_found:
                break
            raise
        await asyncio.sleep(0.5)
    await manager.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEMO_NAMESPACE}}
    )
    names: set[tuple[str, str]] = set()
    for kind, objects in ((JOB, sample_jobs()), (JOBSET, sample_jobsets())):
        for obj in objects:
            await manager.create(kind.ref, obj)
            names.add((kind.ref.kind, obj["metadata"]["name"]))
    return names


@click.command()
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fleet state directory [default: $JOBRELAY_FLEET_DIR or ./.fleet].")  # fmt: skip
@click.option("--config", "fleet_shape", default=DEMO_FLEET, show_default="deploy/demo-fleet.yaml",
              callback=load_config,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The fleet's shape (as for `jobrelay fleet up --config`).")  # fmt: skip
@click.option("--timeout", default=180.0, show_default=True, help="Seconds to wait for the Jobs.")
def demo(state_dir: Path | None, fleet_shape: FleetShape, timeout: float) -> None:
    """Bring up a local fleet, run jobrelay, and dispatch a batch of sample Jobs and JobSets."""
    local = LocalFleet(state_dir, progress=lambda m: click.echo(m, err=True))
    try:
        asyncio.run(local.up(shape=fleet_shape))
    except (FleetError, BinaryError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(local.summary())
    kubeconfig = local.kubeconfig(MANAGER)
    log_path = local.state_dir / "jobrelay-demo.log"
    click.echo(f"\nstarting jobrelay (log: {log_path}) ...")
    with log_path.open("ab") as log:
        controller = subprocess.Popen(
            [sys.executable, "-m", "jobrelay", "run", "--kubeconfig", str(kubeconfig),
             "--install-crds",  # the local fleet's admin; a real install ships the CRD
             "--metrics-address", "127.0.0.1:0",  # loopback only, any free port (logged)
             # The aggregated API (`jobrelay logs`), registered with the manager's apiserver.
             "--api-address", "127.0.0.1:0", "--api-register",
             *(arg for kind in DEMO_KINDS for arg in ("--kind", kind.name))],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    async def go() -> list[tuple[WorkloadKind, Any]]:
        async with ApiClient.from_kubeconfig(kubeconfig, cluster=MANAGER) as manager:
            names = await _submit(manager)
            click.echo(f"submitted {len(names)} Jobs and JobSets to the manager (namespace "
                       f"{DEMO_NAMESPACE}); all but the local-* ones carry "
                       "spec.managedBy: jobrelay.dev/relay")  # fmt: skip
            return await _watch(manager, names, timeout)

    try:
        finished = asyncio.run(go())
    finally:
        controller.send_signal(signal.SIGTERM)
        try:
            controller.wait(timeout=15)
        except subprocess.TimeoutExpired:
            controller.kill()
    placed: dict[str, int] = {}
    for kind, obj in finished:
        where = _row(kind, obj)[2]
        placed[where] = placed.get(where, 0) + 1
    click.echo(
        "\nall demo workloads finished: "
        + ", ".join(f"{count} on {where}" for where, count in sorted(placed.items()))
    )
    click.echo(
        f"\nexplore:  export KUBECONFIG={kubeconfig}\n"
        f"          kubectl get jobs,jobsets -n {DEMO_NAMESPACE}; kubectl get workerclusters; "
        f"kubectl get events -n {DEMO_NAMESPACE}\n"
        f"run:      jobrelay run --kubeconfig {kubeconfig} --api-address 127.0.0.1:0 "
        f"--api-register {' '.join('--kind ' + kind.name for kind in DEMO_KINDS)}\n"
        f"logs:     jobrelay logs -n {DEMO_NAMESPACE} JOB (through the manager's APIService "
        "v1alpha1.api.jobrelay.dev, while jobrelay runs), e.g. "
        f"jobrelay logs -n {DEMO_NAMESPACE} flaky --all-pods: the failed Job's attempts (a "
        "finished Job's pods stay on its worker for --finished-mirror-ttl, 1h)\n"
        "panel:    kubectl proxy, then open "
        "http://127.0.0.1:8001/apis/api.jobrelay.dev/v1alpha1/dashboard/ (while jobrelay runs)\n"
        f"stop:     jobrelay fleet down --state-dir {local.state_dir}"
    )
