"""`jobrelay fleet`: real local clusters for development, demos, tests and benchmarks."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import click

from jobrelay.localfleet import cluster, shape
from jobrelay.localfleet.binaries import BinaryError, resolver
from jobrelay.localfleet.fleet_state import DEFAULT_WORKERS, FleetError, NodeShape
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.localfleet.shape import MANAGER

MAX_FULL_WORKERS = 20
MAX_LIGHT_WORKERS = 64

state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the fleet keeps its state [default: $JOBRELAY_FLEET_DIR or ./.fleet].",
)


def _progress(message: str) -> None:
    click.echo(message, err=True)


def load_config(
    _context: click.Context, _parameter: click.Parameter, path: Path | None
) -> shape.FleetShape | None:
    """A --config file's fleet shape; a usage error (exit 2) naming file, cluster and field."""
    if path is None:
        return None
    try:
        return shape.load(path)
    except shape.ShapeError as error:
        raise click.BadParameter(str(error)) from None


config_option = click.option(
    "--config",
    "fleet_shape",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    callback=load_config,
    default=None,
    help="YAML file giving each cluster's nodes (count, cpu, memory, gpu, pods, "
    "extendedResources, nodeLabels, taints) and each worker's labels; its clusters are the "
    "workers (and the manager, if listed). Not with --workers or the --node-* options.",
)


@click.group()
def fleet() -> None:
    """Run a local fleet of real Kubernetes clusters (manager + workers, KWOK nodes)."""


@fleet.command()
@config_option
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(1, MAX_LIGHT_WORKERS),
    help=f"Worker clusters [default: the stopped fleet's count, else {DEFAULT_WORKERS}]; "
    f"at most {MAX_FULL_WORKERS}, or {MAX_LIGHT_WORKERS} with --light.",
)
@click.option(
    "--light",
    is_flag=True,
    default=None,
    help="Light workers: a kube-apiserver each, all on one shared etcd, and one job "
    "stand-in process for all of them instead of their controllers, scheduler and kwok "
    "(for scale runs; correctness tests use full workers) [default: as the stopped fleet].",
)
@state_dir_option
@click.option(
    "--nodes-per-cluster",
    default=None,
    type=click.IntRange(0, 1000),
    help=f"Simulated nodes per cluster [default: {NodeShape.count}].",
)
@click.option(
    "--node-cpu", default=None, help=f"CPU capacity of each node [default: {NodeShape.cpu}]."
)
@click.option(
    "--node-memory",
    default=None,
    help=f"Memory capacity of each node [default: {NodeShape.memory}].",
)
@click.option(
    "--node-gpu",
    default=None,
    type=click.IntRange(0),
    help=f"nvidia.com/gpu per node [default: {NodeShape.gpu}].",
)
@click.option(
    "--base-port",
    default=0,
    type=click.IntRange(0, 65535),
    help=f"Put the fleet on ports N, N+1, ... ({len(cluster.PORT_NAMES)} per cluster) instead "
    "of random free ones; also moves a stopped fleet, keeping its data. Best below 32768, "
    "where outgoing connections never take ports.",
)
def up(
    fleet_shape: shape.FleetShape | None,
    workers: int | None,
    state_dir: Path | None,
    nodes_per_cluster: int | None,
    node_cpu: str | None,
    node_memory: str | None,
    node_gpu: int | None,
    base_port: int,
    light: bool | None,
) -> None:
    """Start (or reuse) the manager and WORKERS worker clusters, or those of --config.

    On a healthy fleet it returns at once; on a stopped or crashed one it stops
    what is left and starts it again, keeping the clusters' data.
    """
    node_options = (nodes_per_cluster, node_cpu, node_memory, node_gpu)
    if fleet_shape is not None and (
        workers is not None or any(o is not None for o in node_options)
    ):
        raise click.UsageError(
            "--config gives every cluster's shape: leave out --workers, --nodes-per-cluster, "
            "--node-cpu, --node-memory and --node-gpu"
        )
    if fleet_shape is not None and light:
        raise click.UsageError("--light makes worker-N clusters: leave out --config")
    if workers is not None and workers > MAX_FULL_WORKERS and not light:
        raise click.UsageError(
            f"--workers {workers}: at most {MAX_FULL_WORKERS} full workers fit one machine; "
            "add --light for more"
        )
    local = _open(state_dir)
    node_shape = None
    if any(option is not None for option in node_options):
        # Options left out keep what a stopped fleet was started with (else NodeShape's defaults).
        recorded = local.node_shape
        node_shape = dataclasses.replace(
            recorded,
            count=recorded.count if nodes_per_cluster is None else nodes_per_cluster,
            cpu=node_cpu or recorded.cpu,
            memory=node_memory or recorded.memory,
            gpu=recorded.gpu if node_gpu is None else node_gpu,
        )
    try:
        started = asyncio.run(
            local.up(
                workers=workers,
                node_shape=node_shape,
                shape=fleet_shape,
                base_port=base_port,
                light=True if light else None,
            )
        )
    except (FleetError, BinaryError) as error:
        raise click.ClickException(str(error)) from error
    if not started:
        note = "the fleet is already up"
        if base_port and local.clusters[MANAGER].ports["etcd-client"] != base_port:
            note += (
                f" on its recorded ports (--base-port ignored: run {local.command('down')} "
                "first to move it)"
            )
        click.echo(note, err=True)
    click.echo(local.summary())


@fleet.command()
@click.option("--fleet-only", is_flag=True,
              help="Only what a fleet runs (`make demo`): not the tests' helm builds, "
                   "third-party CRDs and promtool (`make test` builds them).")  # fmt: skip
def build(fleet_only: bool) -> None:
    """Build (or find in the cache) the Kubernetes, etcd, kwok and JobSet binaries the fleet
    runs, and the helm builds, third-party CRDs and promtool the chart's and alerts' tests use."""
    try:
        found = vars(resolver.resolve(_progress))
        if not fleet_only:
            found |= vars(resolver.resolve_tools(_progress))
    except BinaryError as error:
        raise click.ClickException(str(error)) from error
    for name, path in found.items():
        click.echo(f"{name:<24} {path}")


@fleet.command()
@state_dir_option
@click.option(
    "--purge",
    is_flag=True,
    help="Also delete the state directory (etcd data, certificates, logs); it must hold a "
    "state.json.",
)
def down(state_dir: Path | None, purge: bool) -> None:
    """Stop every process the fleet started (by recorded PID and start time)."""
    local = _open(state_dir)
    if not local.state_dir.exists():
        click.echo(f"no fleet in {local.state_dir}: nothing to stop")
        return
    try:
        stopped = local.down(purge=purge)
    except FleetError as error:
        raise click.ClickException(str(error)) from error
    done = f"stopped {len(stopped)} processes" if stopped else "nothing was running"
    click.echo(done + (f"; removed {local.state_dir}" if purge else f" in {local.state_dir}"))


@fleet.command()
@state_dir_option
def status(state_dir: Path | None) -> None:
    """Show each cluster's components and their health; exits 1 unless all are healthy."""
    local = _require_fleet(state_dir)
    running, total = local.running_count()
    if not total:
        raise click.ClickException(
            f"the fleet in {local.state_dir} is stopped: {local.command('up')} starts it "
            "again with its data"
        )
    report = asyncio.run(local.health())
    shapes = local.cluster_shapes()
    healthy = 0
    for name, components in report.items():
        click.echo(f"{name}  (kubeconfig {local.kubeconfig(name)})")
        click.echo(f"  shape {shapes[name].describe()}")
        for component, (ok, detail) in components.items():
            healthy += ok
            mark = click.style("ok  ", fg="green") if ok else click.style("DOWN", fg="red")
            click.echo(f"  {mark} {component:<24} {detail}")
    checked = sum(len(components) for components in report.values())
    if healthy < checked:
        what = (
            f"{checked - healthy} of {checked} components are down"
            if running
            else "no component is running"
        )
        raise click.ClickException(
            f"{what}: {local.command('up')} restarts the fleet, keeping its data; "
            f"component logs are in {local.state_dir}/<cluster>/logs/"
        )


@fleet.command()
@state_dir_option
def env(state_dir: Path | None) -> None:
    """Print shell exports: KUBECONFIG_<CLUSTER> for each cluster, KUBECONFIG for the manager."""
    click.echo(_require_fleet(state_dir).env_exports())


def _open(state_dir: Path | None) -> LocalFleet:
    try:
        return LocalFleet(state_dir, progress=_progress)
    except FleetError as error:
        raise click.ClickException(str(error)) from error


def _require_fleet(state_dir: Path | None) -> LocalFleet:
    local = _open(state_dir)
    if not local.clusters:
        raise click.ClickException(
            f"no fleet in {local.state_dir}: start one with {local.command('up')}"
            + ("" if state_dir else " (or pass --state-dir, or set JOBRELAY_FLEET_DIR)")
        )
    return local
