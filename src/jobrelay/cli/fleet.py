"""`jobrelay fleet`: real local clusters for development, demos, tests and benchmarks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from jobrelay.localfleet import binaries
from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.fleet import FleetError, LocalFleet, NodeShape

state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the fleet keeps its state [default: $JOBRELAY_FLEET_DIR or ./.fleet].",
)


def _progress(message: str) -> None:
    click.echo(message, err=True)


@click.group()
def fleet() -> None:
    """Run a local fleet of real Kubernetes clusters (manager + workers, KWOK nodes)."""


@fleet.command()
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 20))
@state_dir_option
@click.option("--nodes-per-cluster", default=2, show_default=True, type=click.IntRange(0, 1000))
@click.option("--node-cpu", default="8", show_default=True, help="CPU capacity of each node.")
@click.option(
    "--node-memory", default="32Gi", show_default=True, help="Memory capacity of each node."
)
@click.option(
    "--node-gpu",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="nvidia.com/gpu per node.",
)
@click.option(
    "--base-port",
    default=0,
    type=click.IntRange(0, 65000),
    help="Use ports from N up, not random ones.",
)
def up(
    workers: int,
    state_dir: Path | None,
    nodes_per_cluster: int,
    node_cpu: str,
    node_memory: str,
    node_gpu: int,
    base_port: int,
) -> None:
    """Start (or reuse) the manager and WORKERS worker clusters."""
    local = _open(state_dir)
    shape = NodeShape(count=nodes_per_cluster, cpu=node_cpu, memory=node_memory, gpu=node_gpu)
    try:
        started = asyncio.run(local.up(workers=workers, node_shape=shape, base_port=base_port))
    except (FleetError, BinaryError) as error:
        raise click.ClickException(f"{error}\n(run `jobrelay fleet down` to clean up)") from error
    if not started:
        click.echo("the fleet is already up", err=True)
    click.echo(local.summary())


@fleet.command()
def build() -> None:
    """Build (or find in the cache) the Kubernetes, etcd and kwok binaries the fleet runs."""
    try:
        found = binaries.resolve(_progress)
    except BinaryError as error:
        raise click.ClickException(str(error)) from error
    for name, path in vars(found).items():
        click.echo(f"{name:<24} {path}")


@fleet.command()
@state_dir_option
@click.option(
    "--purge", is_flag=True, help="Also delete the state directory (etcd data, certificates)."
)
def down(state_dir: Path | None, purge: bool) -> None:
    """Stop every process the fleet started (by recorded PID)."""
    local = _open(state_dir)
    stopped = local.down(purge=purge)
    click.echo(
        f"stopped {len(stopped)} processes" + (f" and removed {local.state_dir}" if purge else "")
    )


@fleet.command()
@state_dir_option
def status(state_dir: Path | None) -> None:
    """Show each cluster's components and their health."""
    local = _open(state_dir)
    if not local.clusters:
        raise click.ClickException(f"no fleet in {local.state_dir}: run `jobrelay fleet up`")
    report = asyncio.run(local.health())
    healthy = True
    for name, components in report.items():
        click.echo(f"{name}  (kubeconfig {local.kubeconfig(name)})")
        for component, (ok, detail) in components.items():
            healthy &= ok
            mark = click.style("ok  ", fg="green") if ok else click.style("DOWN", fg="red")
            click.echo(f"  {mark} {component:<24} {detail}")
    if not healthy:
        raise click.ClickException(
            "some components are down: `jobrelay fleet up` restarts the fleet"
        )


@fleet.command()
@state_dir_option
def env(state_dir: Path | None) -> None:
    """Print shell exports: KUBECONFIG_<CLUSTER> for each cluster, KUBECONFIG for the manager."""
    local = _open(state_dir)
    if not local.clusters:
        raise click.ClickException(f"no fleet in {local.state_dir}: run `jobrelay fleet up`")
    click.echo(local.env_exports())


def _open(state_dir: Path | None) -> LocalFleet:
    try:
        return LocalFleet(state_dir, progress=_progress)
    except FleetError as error:
        raise click.ClickException(str(error)) from error
