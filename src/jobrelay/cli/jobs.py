"""`jobrelay jobs`: the managed workloads of every kind, where they run, and what went wrong."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from jobrelay.cli.common import manager_client, manager_options
from jobrelay.kinds import KindError, WorkloadKind, kinds_from_names
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import EVENTS
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    DEFAULT_CONTROLLER_NAME,
    NOT_PLACED_ANNOTATION,
    PLACEMENTS_ANNOTATION,
)


def _workers(obj: dict[str, Any]) -> str:
    """Where it ran, in order, the current worker last: ``worker-1>worker-2``."""
    annotations = obj["metadata"].get("annotations") or {}
    history = annotations.get(PLACEMENTS_ANNOTATION) or annotations.get(CLUSTER_ANNOTATION)
    return ">".join(filter(None, str(history or "").split(","))) or "-"


def _state(kind: WorkloadKind, obj: dict[str, Any]) -> str:
    finish = kind.finish(obj)
    if finish is not None:
        return "Succeeded" if finish.succeeded else "Failed"
    if kind.is_suspended(obj):
        return "Suspended"
    status = obj.get("status") or {}
    if status.get("active") or kind.has_run(obj):
        return "Running"
    annotations = obj["metadata"].get("annotations") or {}
    if annotations.get(CLUSTER_ANNOTATION):
        return "Dispatched"
    return "Held" if annotations.get(NOT_PLACED_ANNOTATION) else "Pending"


def _held_reason(obj: dict[str, Any]) -> str:
    """Why it is not placed (``NotPlaced: ...`` or ``NeverFits: ...``), while it is not."""
    annotations = obj["metadata"].get("annotations") or {}
    if annotations.get(CLUSTER_ANNOTATION):
        return ""
    return str(annotations.get(NOT_PLACED_ANNOTATION) or "")


async def _managed(
    client: ApiClient, kinds: list[WorkloadKind], namespace: str | None, controller_name: str
) -> list[tuple[WorkloadKind, dict[str, Any]]]:
    found: list[tuple[WorkloadKind, dict[str, Any]]] = []
    for kind in kinds:
        try:
            listed = await client.list(kind.ref, namespace=namespace)
        except ApiError as error:
            if error.is_not_found:
                continue  # a kind this manager does not serve
            raise
        found.extend(
            (kind, obj)
            for obj in listed.items
            if (obj.get("spec") or {}).get("managedBy") == controller_name
        )
    return found


@click.command()
@manager_options
@click.option("-n", "--namespace", default=None, help="Only this namespace [default: all].")
@click.option("--controller-name", default=DEFAULT_CONTROLLER_NAME, show_default=True)
@click.option("--kind", "kind_names", multiple=True, metavar="Kind.version.group",
              help="Kinds to list (repeatable) [default: every kind with an adapter of its own "
                   "that the manager serves].")  # fmt: skip
def jobs(
    kubeconfig: Path | None,
    context: str | None,
    namespace: str | None,
    controller_name: str,
    kind_names: tuple[str, ...],
) -> None:
    """List managed workloads: kind, the workers each ran on (in order, the current one
    last), state, counts, and the reason: why it waits unplaced (Held), else the latest
    warning about it."""
    try:
        kinds = kinds_from_names(kind_names or tuple(DEDICATED))
    except KindError as error:
        raise click.BadParameter(str(error), param_hint="--kind") from error

    async def go() -> tuple[list[tuple[WorkloadKind, dict[str, Any]]], list[dict[str, Any]]]:
        async with manager_client(kubeconfig, context) as client:
            found = await _managed(client, kinds, namespace, controller_name)
            warnings = await client.list(EVENTS, namespace=namespace, field_selector="type=Warning")
            return found, warnings.items

    try:
        managed, warnings = asyncio.run(go())
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
    width = max([12, *(len(_workers(obj)) for _, obj in managed)])
    click.echo(
        f"{'KIND':<8} {'NAMESPACE':<20} {'NAME':<30} {'WORKERS':<{width}} {'STATE':<10} "
        f"{'OK/FAIL':>8}  REASON"
    )
    for kind, obj in managed:
        meta, status = obj["metadata"], obj.get("status") or {}
        warning = latest.get(meta.get("uid"), {})
        note = _held_reason(obj) or (
            f"{warning.get('reason')}: {warning.get('message')}" if warning else ""
        )
        counts = (
            f"{status.get('succeeded', 0):>4}/{status.get('failed', 0):<3}"
            if "succeeded" in status or "failed" in status or "active" in status
            else f"{'-':>4}/{'-':<3}"
        )
        click.echo(
            f"{kind.ref.kind:<8} {meta['namespace']:<20} {meta['name']:<30} "
            f"{_workers(obj):<{width}} "
            f"{_state(kind, obj):<10} {counts}  {note}".rstrip()
        )
    if not managed:
        click.echo(f"no workloads with spec.managedBy={controller_name}")
