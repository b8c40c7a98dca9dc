"""`jobrelay run` and `jobrelay install`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from jobrelay.cli.common import manager_client, manager_options
from jobrelay.controller import runner
from jobrelay.controller.options import ControllerOptions
from jobrelay.fleet import registry
from jobrelay.jobs.naming import DEFAULT_CONTROLLER_NAME
from jobrelay.kube.api import ApiError
from jobrelay.observe.logging import setup_logging


@click.command()
@manager_options
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True,
              help="The spec.managedBy value of the Jobs to dispatch.")  # fmt: skip
@click.option("--namespace", default=registry.DEFAULT_NAMESPACE, show_default=True,
              help="Namespace of the worker kubeconfig Secrets.")  # fmt: skip
@click.option(
    "--keep-finished-mirrors", is_flag=True, help="Leave finished mirrors on the workers."
)
@click.option("--no-create-namespaces", is_flag=True,
              help="Do not create a Job's namespace on a worker that lacks it (report it instead).")  # fmt: skip
@click.option("--gc-interval", default=60.0, show_default=True, type=click.FloatRange(1.0),
              help="Seconds between full passes over all Jobs and mirrors (orphan clean-up bound).")  # fmt: skip
@click.option("--concurrency", default=16, show_default=True, type=click.IntRange(1, 256))
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--log-level", default="info", show_default=True)
def run(
    kubeconfig: Path | None,
    context: str | None,
    controller_name: str,
    namespace: str,
    keep_finished_mirrors: bool,
    no_create_namespaces: bool,
    gc_interval: float,
    concurrency: int,
    log_format: str,
    log_level: str,
) -> None:
    """Run the controller in the foreground until SIGTERM or SIGINT.

    Installs (or updates) the WorkerCluster CRD at start.
    """
    setup_logging("json" if log_format == "json" else "text", log_level)
    options = ControllerOptions(
        controller_name=controller_name,
        namespace=namespace,
        keep_finished_mirrors=keep_finished_mirrors,
        create_namespaces=not no_create_namespaces,
        gc_interval=gc_interval,
        concurrency=concurrency,
    )
    manager = manager_client(kubeconfig, context)
    try:
        asyncio.run(runner.run(manager, options))
    except ApiError as error:
        raise click.ClickException(f"the management cluster answered: {error}") from error


@click.command()
@manager_options
@click.option("--namespace", default=registry.DEFAULT_NAMESPACE, show_default=True)
def install(kubeconfig: Path | None, context: str | None, namespace: str) -> None:
    """Install the WorkerCluster CRD and the controller's namespace on the management cluster."""

    async def go() -> None:
        async with manager_client(kubeconfig, context) as client:
            await registry.install_crd(client)
            await registry.ensure_namespace(client, namespace)

    try:
        asyncio.run(go())
    except (ApiError, registry.RegistryError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"installed the WorkerCluster CRD and namespace {namespace}")
