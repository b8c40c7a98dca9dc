"""`jobrelay demo`: a local fleet, jobrelay running, and a batch of Jobs dispatched to completion."""

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

from jobrelay.kinds.job.conditions import finished_condition
from jobrelay.kinds.naming import CLUSTER_ANNOTATION, DEFAULT_CONTROLLER_NAME
from jobrelay.kube.api import JOBS, NAMESPACES, ApiClient, ApiError
from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.fleet import MANAGER, FleetError, LocalFleet

DEMO_NAMESPACE = "demo"


def _job(
    name: str, *, managed: bool = True, duration: str = "2s", outcome: str = "succeed", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE, "labels": {"app": "jobrelay-demo"}},
        "spec": {
            **({"managedBy": DEFAULT_CONTROLLER_NAME} if managed else {}),
            "backoffLimit": 1,
            "template": {
                "metadata": {
                    "annotations": {
                        "fleet.jobrelay.dev/duration": duration,
                        "fleet.jobrelay.dev/outcome": outcome,
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "250m"}},
                        }
                    ],
                },
            },
            **spec,
        },
    }


def sample_jobs() -> list[dict[str, Any]]:
    jobs = [_job(f"train-{index}", duration=f"{1 + index % 3}s") for index in range(1, 7)]
    jobs += [
        _job("sweep", completions=6, parallelism=3, duration="1s"),
        _job("shards", completions=4, parallelism=4, completionMode="Indexed", duration="2s"),
        _job("flaky", outcome="fail", duration="1s"),
        _job("local-report", managed=False, duration="2s"),
    ]
    return jobs


def _row(job: dict[str, Any]) -> tuple[str, str, str, str]:
    meta, status = job["metadata"], job.get("status") or {}
    managed = (job.get("spec") or {}).get("managedBy") == DEFAULT_CONTROLLER_NAME
    where = (
        (meta.get("annotations") or {}).get(CLUSTER_ANNOTATION, "-")
        if managed
        else "manager (local)"
    )
    final = finished_condition(job)
    if final:
        state = str(final["type"]) + (
            f" ({final.get('reason')})" if final["type"] == "Failed" else ""
        )
    elif status.get("active"):
        state = f"Running ({status['active']} active)"
    else:
        state = "Dispatched" if where != "-" else "Pending"
    counts = f"{status.get('succeeded', 0)}/{status.get('failed', 0)}"
    return meta["name"], where, state, counts


async def _watch(manager: ApiClient, names: set[str], timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        items = [
            j
            for j in (await manager.list(JOBS, namespace=DEMO_NAMESPACE)).items
            if j["metadata"]["name"] in names
        ]
        lines = [f"  {n:<14} {w:<16} {s:<24} {c:>5}" for n, w, s, c in sorted(map(_row, items))]
        table = "\n".join(lines)
        if table != last:
            click.echo(
                f"\n{time.strftime('%H:%M:%S')}  {'JOB':<14} {'WHERE':<16} {'STATE':<24} {'OK/FAIL':>5}"
            )
            click.echo(table)
            last = table
        if len(items) == len(names) and all(finished_condition(j) for j in items):
            return items
        if time.monotonic() > deadline:
            raise click.ClickException(f"the demo Jobs did not all finish within {timeout:.0f}s")
        await asyncio.sleep(1.0)


async def _submit(manager: ApiClient) -> set[str]:
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
    names = set()
    for job in sample_jobs():
        await manager.create(JOBS, job)
        names.add(job["metadata"]["name"])
    return names


@click.command()
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fleet state directory [default: $JOBRELAY_FLEET_DIR or ./.fleet].")  # fmt: skip
@click.option("--timeout", default=180.0, show_default=True, help="Seconds to wait for the Jobs.")
def demo(state_dir: Path | None, timeout: float) -> None:
    """Bring up a local fleet, run jobrelay, and dispatch a batch of sample Jobs."""
    local = LocalFleet(state_dir, progress=lambda m: click.echo(m, err=True))
    try:
        asyncio.run(local.up(workers=2))
    except (FleetError, BinaryError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(local.summary())
    kubeconfig = local.kubeconfig(MANAGER)
    log_path = local.state_dir / "jobrelay-demo.log"
    click.echo(f"\nstarting jobrelay (log: {log_path}) ...")
    with log_path.open("ab") as log:
        controller = subprocess.Popen(
            [sys.executable, "-m", "jobrelay", "run", "--kubeconfig", str(kubeconfig)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    async def go() -> list[dict[str, Any]]:
        async with ApiClient.from_kubeconfig(kubeconfig, cluster=MANAGER) as manager:
            names = await _submit(manager)
            click.echo(f"submitted {len(names)} Jobs to the manager (namespace {DEMO_NAMESPACE}); "
                       "all but local-report carry spec.managedBy: jobrelay.dev/relay")  # fmt: skip
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
    for job in finished:
        where = _row(job)[1]
        placed[where] = placed.get(where, 0) + 1
    click.echo(
        "\nall demo Jobs finished: "
        + ", ".join(f"{count} on {where}" for where, count in sorted(placed.items()))
    )
    click.echo(
        f"\nexplore:  export KUBECONFIG={kubeconfig}\n"
        f"          kubectl get jobs -n {DEMO_NAMESPACE}; kubectl get workerclusters; "
        f"kubectl get events -n {DEMO_NAMESPACE}\n"
        f"run:      jobrelay run --kubeconfig {kubeconfig}\n"
        f"stop:     jobrelay fleet down --state-dir {local.state_dir}"
    )
