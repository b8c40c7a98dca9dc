"""`jobrelay top`: the fleet at a glance, refreshed every few seconds (what is printed is
:func:`jobrelay.cli.fleetview.top_lines`, pure)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from jobrelay.cli import fleetview
from jobrelay.cli.common import manager_client, manager_options, run_command
from jobrelay.cli.get_kinds import JOB_KIND, JOBSET_KIND
from jobrelay.cli.get_listing import WorkloadQuery, fetch
from jobrelay.cli.terminal import safe_lines
from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME

# ANSI: cursor home and clear the screen, as `watch` and `top` redraw.
_CLEAR = "\x1b[H\x1b[2J"


async def snapshot(
    client: ApiClient, controller_name: str, namespace: str | None = None
) -> list[str]:
    """One frame: the WorkerClusters and the managed workloads (of ``namespace``; None:
    every namespace), from the manager."""
    workers = await workerclusters.list_workers(client)
    query = WorkloadQuery(
        (JOB_KIND, JOBSET_KIND), namespace, None, (), controller_name, explicit=False
    )
    listed = await fetch(client, query)
    left_out = [f"(left out: {kind.ref.plural}, which you may not list)" for kind in listed.refused]
    return fleetview.top_lines(workers, listed.found) + left_out


async def refresh(
    client: ApiClient,
    controller_name: str,
    interval: float,
    *,
    frames: int | None,
    show: Callable[[list[str]], None],
    namespace: str | None = None,
) -> None:
    """Show a frame every ``interval`` seconds (``frames`` of them; None: until Ctrl-C)."""
    shown = 0
    while frames is None or shown < frames:
        show(await snapshot(client, controller_name, namespace))
        shown += 1
        if frames is None or shown < frames:
            await asyncio.sleep(interval)


@click.command()
@click.option("--interval", type=click.FloatRange(min=0.5), default=2.0, show_default=True,
              help="Seconds between refreshes.")  # fmt: skip
@click.option("--once", is_flag=True, help="Print one frame and exit (for scripts and tests).")
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              help="Count workloads with this spec.managedBy.")  # fmt: skip
@click.option("-n", "--namespace", default=None,
              help="Count the workloads of this namespace only [default: every namespace].")  # fmt: skip
@click.option("-A", "--all-namespaces", is_flag=True,
              help="Every namespace's workloads (the default; overrides -n).")  # fmt: skip
@manager_options
def top(
    interval: float,
    once: bool,
    controller_name: str,
    namespace: str | None,
    all_namespaces: bool,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """The fleet at a glance: per worker, whether it is connected, its nodes, CPU, memory
    and GPUs used of allocatable, its unfinished mirrors and the workloads running there;
    then the managed workloads by state (-n: of one namespace). Refreshes every --interval
    seconds until Ctrl-C."""
    where = None if all_namespaces else namespace
    clear = not once and sys.stdout.isatty()

    def show(lines: list[str]) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        lines = list(safe_lines(lines))
        text = "\n".join(lines) if once else "\n".join([f"jobrelay top  {stamp}", "", *lines])
        click.echo((_CLEAR if clear else "") + text)

    async def go() -> Any:
        async with manager_client(kubeconfig, context) as client:
            await refresh(
                client, controller_name, interval, frames=1 if once else None, show=show,
                namespace=where,
            )  # fmt: skip

    try:
        run_command(go())
    except workerclusters.RegistryError as error:
        raise click.ClickException(str(error)) from error
