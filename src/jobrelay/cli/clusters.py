"""`jobrelay clusters`: register, list and remove worker clusters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from jobrelay.cli.common import manager_client
from jobrelay.fleet import registry
from jobrelay.kube.api import ApiError

manager_kubeconfig = click.option(
    "--manager-kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    envvar="JOBRELAY_KUBECONFIG",
    help="Management cluster kubeconfig [default: $KUBECONFIG, ~/.kube/config].",
)
namespace_option = click.option("--namespace", default=registry.DEFAULT_NAMESPACE, show_default=True,
                                help="Namespace of the kubeconfig Secrets.")  # fmt: skip


@click.group()
def clusters() -> None:
    """Worker clusters registered with the management cluster (WorkerCluster objects)."""


def _run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except (ApiError, registry.RegistryError) as error:
        raise click.ClickException(str(error)) from error


@clusters.command()
@click.argument("name")
@click.option("--kubeconfig", "worker_kubeconfig", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The worker's kubeconfig.")  # fmt: skip
@click.option(
    "--context", default=None, help="Context in the worker's kubeconfig [default: current]."
)
@click.option(
    "--label", "labels", multiple=True, help="k=v label on the WorkerCluster (repeatable)."
)
@manager_kubeconfig
@namespace_option
def add(
    name: str,
    worker_kubeconfig: Path,
    context: str | None,
    labels: tuple[str, ...],
    manager_kubeconfig: Path | None,
    namespace: str,
) -> None:
    """Register worker NAME from a kubeconfig (stored, files inlined, in a Secret)."""
    parsed = {}
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{label!r} is not k=v", param_hint="--label")
        parsed[key] = value
    kubeconfig = registry.inline_kubeconfig(worker_kubeconfig, context)

    async def go() -> None:
        async with manager_client(manager_kubeconfig, None) as client:
            await registry.install_crd(client)
            await registry.register(client, name, kubeconfig, labels=parsed, namespace=namespace)

    try:
        _run(go())
    except registry.RegistryError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"registered worker cluster {name}")


@clusters.command("list")
@manager_kubeconfig
def list_(manager_kubeconfig: Path | None) -> None:
    """List worker clusters with their connection state and active mirrors."""

    async def go() -> list[dict[str, Any]]:
        async with manager_client(manager_kubeconfig, None) as client:
            return await registry.list_workers(client)

    workers = _run(go())
    if not workers:
        click.echo("no worker clusters registered (jobrelay clusters add NAME --kubeconfig FILE)")
        return
    click.echo(f"{'NAME':<20} {'CONNECTED':<10} {'ACTIVE':>6}  {'CORDONED':<8}  LABELS / MESSAGE")
    for worker in workers:
        status = worker.get("status") or {}
        connected: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Connected"), {}
        )
        labels = ",".join(f"{k}={v}" for k, v in (worker["metadata"].get("labels") or {}).items())
        message = connected.get("message", "") if connected.get("status") != "True" else ""
        click.echo(
            f"{worker['metadata']['name']:<20} {connected.get('status', 'Unknown'):<10} "
            f"{status.get('activeMirrors', 0):>6}  {bool(worker.get('spec', {}).get('cordoned'))!s:<8}  "
            f"{labels} {message}".rstrip()
        )


@clusters.command()
@click.argument("name")
@manager_kubeconfig
@namespace_option
def remove(name: str, manager_kubeconfig: Path | None, namespace: str) -> None:
    """Unregister worker NAME (its running mirrors are left alone)."""

    async def go() -> bool:
        async with manager_client(manager_kubeconfig, None) as client:
            return await registry.unregister(client, name, namespace=namespace)

    if not _run(go()):
        raise click.ClickException(f"no worker cluster named {name}")
    click.echo(f"removed worker cluster {name}")
