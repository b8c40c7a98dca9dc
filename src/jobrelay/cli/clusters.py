"""`jobrelay clusters`: register, list, cordon, drain and remove worker clusters.

What each verb decides and says lives in :mod:`jobrelay.fleet.maintenance_rules` (pure);
the requests in :mod:`jobrelay.fleet.maintenance`. `add` is in clusters_add, the flags
and the running every verb shares in clusters_options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from jobrelay.cli import fleetview
from jobrelay.cli.clusters_add import add
from jobrelay.cli.clusters_options import (
    allow_exec_option,
    kind_option,
    locate_for_verb,
    manager_flags,
    manager_kubeconfig,
    namespace_option,
    run_verb,
    verb_manager,
)
from jobrelay.cli.common import (
    EXIT_INTERRUPTED,
    checked_origin,
    given_manager_flags,
    manager_client,
    manager_options,
)
from jobrelay.cli.object_watch import list_output_option, watch_option
from jobrelay.cli.terminal import safe, safe_lines
from jobrelay.fleet import maintenance, maintenance_rules, origin_record, workerclusters
from jobrelay.fleet.maintenance_rules import (
    DrainMode,
    DrainProgress,
    Removal,
    RemovalPhase,
    WorkerClusterView,
)
from jobrelay.kinds.catalog import KindError
from jobrelay.kinds.managed_by_claims import parse_kind_flag
from jobrelay.placement.capacity import Summary
from jobrelay.placement.units import resources_of
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME


@click.group(invoke_without_command=True)
@list_output_option("Without a subcommand: ")
@watch_option
@manager_options
@manager_kubeconfig
@click.pass_context
def clusters(
    ctx: click.Context,
    output: str | None,
    watch: bool,
    kubeconfig: Path | None,
    context: str | None,
    manager_kubeconfig: Path | None,
) -> None:
    """Worker clusters registered with the management cluster (WorkerCluster objects).

    Without a subcommand: each one's health (CONNECTED, STATE), Kubernetes version,
    unfinished mirrors and capacity. --kubeconfig/--context are the manager's, here and
    on every subcommand (a subcommand's own win); the worker's kubeconfig of `add` is
    --worker-kubeconfig.
    """
    if ctx.invoked_subcommand is None:
        _show_workers(output, watch, fleet_table, *given_manager_flags(ctx))


clusters.add_command(add)


def fleet_table(workers: Sequence[Mapping[str, Any]], wide: bool) -> list[str]:
    """Bare `clusters`' table (and `clusters list -o wide`'s)."""
    shown = [(w, capacity_text((w.get("status") or {}).get("capacity"))) for w in workers]
    return list(safe_lines(fleetview.cluster_table(shown, datetime.now(UTC), wide=wide)))


def _show_workers(
    output: str | None,
    watch: bool,
    lines: Callable[[Sequence[Mapping[str, Any]], bool], list[str]],
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """The WorkerClusters as a kubectl-style table (``wide`` with labels and messages), a
    List (``json``, ``yaml``), ``workercluster.jobrelay.dev/NAME`` lines, a template;
    with ``watch`` each change after (cli/object_watch.py)."""
    from jobrelay.cli.object_watch import ObjectPrinter, watch_objects
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import WORKER_CLUSTERS

    printer = ObjectPrinter(
        output, lines, "workercluster.jobrelay.dev",
        empty="no worker clusters registered (jobrelay clusters add NAME --worker-kubeconfig FILE)",
    )  # fmt: skip

    async def go() -> None:
        async with manager_client(kubeconfig, context) as client:
            try:
                listed = await client.list(WORKER_CLUSTERS)
            except ApiError as error:
                if error.is_not_found:  # no CRD: said as `list_workers` says it
                    await workerclusters.list_workers(client)
                raise
            printer.first(listed.items)
            if watch:  # from the list's version: no change missed, none twice
                await watch_objects(client, WORKER_CLUSTERS, listed.resource_version, printer)

    try:
        run_verb(go())
    except KeyboardInterrupt:  # Ctrl-C ends a watch: exit 130, as a shell says it
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


# How `remove` reaches a worker (from its Secret's kubeconfig); unit tests swap it.
worker_connector = maintenance.connect_worker


@clusters.command("list")
@manager_flags
@list_output_option("As bare `jobrelay clusters` [default: this table]: ")
@watch_option
def list_(output: str | None, watch: bool, **_manager_flags: Any) -> None:
    """List worker clusters: connection, unfinished mirrors, cordoned/draining/lost state,
    capacity (schedulable/all nodes, requested/allocatable resources). -w prints each
    worker's new row as it changes."""
    _show_workers(output, watch, list_table, *verb_manager())


def list_table(workers: Sequence[Mapping[str, Any]], wide: bool) -> list[str]:
    """`clusters list`'s table (``wide``: bare `clusters`' wide one)."""
    if wide:
        return fleet_table(workers, wide)
    rows = [("NAME", "CONNECTED", "ACTIVE", "STATE", "CAPACITY", "LABELS / MESSAGE")]
    for worker in workers:
        state = WorkerClusterView.of(worker)
        labels = ",".join(f"{k}={v}" for k, v in (worker["metadata"].get("labels") or {}).items())
        notes = [labels] if labels else []
        if state.lost_time:
            notes.append(f"lost since {state.lost_time}")
        if state.connected != "True" and state.connected_message:
            notes.append(state.connected_message)
        active = "-" if state.active_mirrors is None else str(state.active_mirrors)
        capacity = capacity_text((worker.get("status") or {}).get("capacity"))
        rows.append(
            (
                state.name, state.connected, active, maintenance_rules.state_summary(state), capacity,
                "; ".join(notes),
            )
        )  # fmt: skip
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        cells[2] = row[2].rjust(widths[2])  # counts align right
        lines.append(safe("  ".join([*cells, row[5]]).rstrip()))
    return lines


def capacity_text(capacity: Any) -> str:
    """``status.capacity`` as one cell: ``nodes 3/4, cpu 12/64, memory 4Gi/256Gi`` (schedulable
    of all nodes, then requested plus reserved of allocatable); ``-`` when not known."""
    if not isinstance(capacity, Mapping):
        return "-"
    try:
        summary = Summary(
            int(capacity.get("nodes") or 0),
            int(capacity.get("schedulableNodes") or 0),
            resources_of(capacity.get("allocatable") or {}),
            resources_of(capacity.get("requested") or {}),
            resources_of(capacity.get("reserved") or {}),
        )
    except (TypeError, ValueError, AttributeError, ArithmeticError):  # an odd status
        return "-"
    return summary.columns()


@clusters.command()
@click.argument("name")
@manager_flags
def cordon(name: str, **_manager_flags: Any) -> None:
    """Place no new workloads on worker NAME; those already there finish there."""
    manager = verb_manager()

    async def go() -> str:
        async with manager_client(*manager) as client:
            before = WorkerClusterView.of(await maintenance.get_worker(client, name))
            if not before.cordoned:
                await maintenance.patch_spec(client, name, maintenance_rules.cordon_patch())
            return maintenance_rules.cordon_message(before)

    click.echo(run_verb(go()))


@clusters.command()
@click.argument("name")
@manager_flags
def uncordon(name: str, **_manager_flags: Any) -> None:
    """Let worker NAME take new workloads again, cancelling any drain."""
    manager = verb_manager()

    async def go() -> str:
        async with manager_client(*manager) as client:
            before = WorkerClusterView.of(await maintenance.get_worker(client, name))
            if before.cordoned or before.drain:
                await maintenance.patch_spec(client, name, maintenance_rules.uncordon_patch())
            return maintenance_rules.uncordon_message(before)

    click.echo(run_verb(go()))


class _Printer:
    """Progress lines, each printed once (the watch repeats unchanged states)."""

    def __init__(self) -> None:
        self._last = ""

    def progress(self, progress: DrainProgress) -> None:
        if progress.line != self._last:
            self._last = progress.line
            click.echo(progress.line)

    def retry(self, line: str) -> None:
        click.echo(line, err=True)


@clusters.command("drain")
@click.argument("name")
@click.option("--force", is_flag=True,
              help="Move running workloads too (spec.drain=All; counters carried over), "
                   "not only those that have not started (NotStarted).")  # fmt: skip
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until no unfinished mirror is left on the worker (status.activeMirrors 0).")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Seconds to wait at most; on expiry exit 1, the drain staying in place [default: until drained].")  # fmt: skip
@manager_flags
def drain_(
    name: str, force: bool, wait: bool, timeout: float | None, **_manager_flags: Any
) -> None:
    """Cordon worker NAME and move its workloads elsewhere.

    Workloads whose mirror has not started are re-dispatched to other workers;
    running ones finish on NAME, or with --force move too. Ctrl-C stops waiting
    and leaves the drain in place.
    """
    manager = verb_manager()
    requested: list[DrainMode] = []
    printer = _Printer()

    async def go() -> tuple[WorkerClusterView, bool]:
        async with manager_client(*manager) as client:
            before = WorkerClusterView.of(await maintenance.get_worker(client, name))
            mode = maintenance_rules.drain_target(before, force=force)
            stored = await maintenance.start_drain(client, name, mode)
            requested.append(mode)
            click.echo(maintenance_rules.drain_started_message(before, mode))
            if not wait:
                return WorkerClusterView.of(stored), False
            return await maintenance.wait_until_drained(
                client, stored, timeout=timeout, on_progress=printer.progress,
                on_retry=printer.retry,
            )  # fmt: skip

    def interrupted() -> str:
        if not requested:
            return f"interrupted: nothing changed on worker cluster {name}"
        return maintenance_rules.drain_interrupted_message(name, requested[0])

    state, drained = run_verb(go(), interrupted)
    if not wait:
        click.echo(
            f"not waiting: `jobrelay clusters list` shows its unfinished mirrors (ACTIVE), "
            f"`jobrelay clusters drain {name}` waits for them"
        )
    elif drained:
        click.echo(f"`jobrelay clusters remove {name}` removes it")
    else:
        assert timeout is not None  # without one, the wait ends only when drained
        raise click.ClickException(
            maintenance_rules.drain_timeout_message(state, requested[0], timeout)
        )


@clusters.command()
@click.argument("name")
@click.option("--force", is_flag=True,
              help="Remove it even with unfinished mirrors: drain it with All first (at most "
                   "--timeout), then remove it even if the worker cannot be reached.")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0), default=300.0, show_default=True,
              help="With --force: seconds to wait at most for the drain before removing anyway.")  # fmt: skip
@kind_option
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              help="Delete the mirrors of this controller (`jobrelay run --controller-name`).")  # fmt: skip
@click.option("--origin", default=None, callback=checked_origin,
              help="Delete the mirrors of this origin (`jobrelay run --origin`) [default: the "
                   "worker's status.origin, else the controller's recorded origin, else this management "
                   "cluster's kube-system UID].")  # fmt: skip
@allow_exec_option
@manager_flags
@namespace_option
def remove(
    name: str,
    force: bool,
    timeout: float,
    kind_names: tuple[str, ...],
    controller_name: str,
    origin: str | None,
    allow_exec_credentials: bool,
    namespace: str | None,
    **_manager_flags: Any,
) -> None:
    """Unregister worker NAME, leaving no mirror behind.

    Refused while the worker has unfinished mirrors unless it was drained or
    --force is given. The mirrors left on it (finished ones, say) are deleted with
    its own credentials (of every kind the controller runs: its Lease says, unless --kind
    is given), then its WorkerCluster and kubeconfig Secret.
    """
    try:  # `jobrelay run --kind`'s syntax: a claimed =VALUE changes nothing here
        kind_names = tuple(parse_kind_flag(kind_name).name for kind_name in kind_names)
    except KindError as error:
        raise click.BadParameter(str(error), param_hint="--kind") from error
    manager = verb_manager()
    phase = [RemovalPhase.CHECKING]
    printer = _Printer()
    where = [namespace or ""]

    async def go() -> None:
        nonlocal kind_names
        async with manager_client(*manager) as client:
            found, _ = await locate_for_verb(
                client, namespace, kind_names, controller_name, need_kinds=False
            )
            where[0] = found
            try:
                worker = await maintenance.get_worker(client, name)
            except workerclusters.RegistryError:
                # A Secret may outlive a failed `clusters add`: nothing else to remove.
                await workerclusters.unregister(client, name, namespace=found)
                raise
            state = WorkerClusterView.of(worker)
            decision = maintenance_rules.decide_removal(state, force=force)
            if decision.removal is Removal.REFUSE:
                raise click.ClickException(decision.message)
            click.echo(decision.message)
            if decision.removal is Removal.DRAIN_ALL_FIRST:
                worker = await maintenance.start_drain(client, name, DrainMode.ALL)
                phase[0] = RemovalPhase.DRAINING
                state, drained = await maintenance.wait_until_drained(
                    client, worker, timeout=timeout, on_progress=printer.progress,
                    on_retry=printer.retry,
                )  # fmt: skip
                if not drained:
                    click.echo(maintenance_rules.forced_removal_message(state, timeout))
            elif not state.cordoned:
                # No placement may start while its mirrors are being deleted.
                worker = await maintenance.patch_spec(
                    client, name, maintenance_rules.cordon_patch()
                )
            phase[0] = RemovalPhase.CLEANING
            _, kind_names = await locate_for_verb(client, found, kind_names, controller_name)
            mirrors_of = origin or (worker.get("status") or {}).get("origin")
            if not isinstance(mirrors_of, str) or not mirrors_of:
                mirrors_of = await origin_record.manager_origin(client, found, controller_name)
            result = await maintenance.delete_mirrors(
                client, worker, namespace=found, kind_names=kind_names,
                controller_name=controller_name, origin=mirrors_of, connect=worker_connector,
                allow_exec=allow_exec_credentials,
            )  # fmt: skip
            message = maintenance_rules.cleanup_message(
                name, result, kind_names=kind_names, controller_name=controller_name,
                origin=mirrors_of, force=force,
            )  # fmt: skip
            if result.error is not None and not force:
                raise click.ClickException(message)
            click.echo(message)
            phase[0] = RemovalPhase.UNREGISTERING
            await workerclusters.unregister(client, name, namespace=found)

    run_verb(
        go(), lambda: maintenance_rules.removal_interrupted_message(name, phase[0], force=force)
    )
    click.echo(
        f"removed worker cluster {name} (its WorkerCluster and Secret "
        f"{where[0]}/{workerclusters.secret_name(name)})"
    )
