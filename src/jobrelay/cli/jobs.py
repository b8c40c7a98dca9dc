"""`jobrelay jobs`: the managed Jobs, where they run, and what went wrong."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from jobrelay.cli.common import manager_client, manager_options
from jobrelay.jobs.conditions import finished_condition
from jobrelay.jobs.naming import CLUSTER_ANNOTATION, DEFAULT_CONTROLLER_NAME
from jobrelay.jobs.spec import is_suspended
from jobrelay.kube.api import EVENTS, JOBS, ApiError


def _state(job: dict[str, Any]) -> str:
    final = finished_condition(job)
    if final:
        return str(final["type"])
    if is_suspended(job):
        return "Suspended"
    status = job.get("status") or {}
    if status.get("active"):
        return "Running"
    return (
        "Dispatched"
        if (job["metadata"].get("annotations") or {}).get(CLUSTER_ANNOTATION)
        else "Pending"
    )


@click.command()
@manager_options
@click.option("-n", "--namespace", default=None, help="Only this namespace [default: all].")
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True)
def jobs(
    kubeconfig: Path | None, context: str | None, namespace: str | None, controller_name: str
) -> None:
    """List managed Jobs: worker, state, counts and the latest warning about each."""

    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with manager_client(kubeconfig, context) as client:
            found = await client.list(JOBS, namespace=namespace)
            warnings = await client.list(
                EVENTS, namespace=namespace, field_selector="type=Warning,involvedObject.kind=Job"
            )
            return found.items, warnings.items

    try:
        items, warnings = asyncio.run(go())
    except ApiError as error:
        raise click.ClickException(str(error)) from error
    latest: dict[str, dict[str, Any]] = {}
    for event in warnings:
        uid = event.get("involvedObject", {}).get("uid")
        when = event.get("lastTimestamp") or event.get("eventTime") or ""
        if uid and when >= (
            latest.get(uid, {}).get("lastTimestamp") or latest.get(uid, {}).get("eventTime") or ""
        ):
            latest[uid] = event
    managed = [job for job in items if (job.get("spec") or {}).get("managedBy") == controller_name]
    click.echo(
        f"{'NAMESPACE':<20} {'NAME':<30} {'WORKER':<12} {'STATE':<11} {'OK/FAIL':>8}  LAST WARNING"
    )
    for job in managed:
        meta, status = job["metadata"], job.get("status") or {}
        warning = latest.get(meta.get("uid"), {})
        note = f"{warning.get('reason')}: {warning.get('message')}" if warning else ""
        click.echo(
            f"{meta['namespace']:<20} {meta['name']:<30} "
            f"{(meta.get('annotations') or {}).get(CLUSTER_ANNOTATION, '-'):<12} {_state(job):<11} "
            f"{status.get('succeeded', 0):>4}/{status.get('failed', 0):<3}  {note}".rstrip()
        )
    if not managed:
        click.echo(f"no Jobs with spec.managedBy={controller_name}")
