"""`jobrelay queues`: the fleet's RelayQueues as the controller last wrote their status.

NAME, WEIGHT, PENDING, ADMITTED, usage of nominal quota per resource (``40/32``: 40 CPUs
in use, 32 guaranteed; ``-``: nothing guaranteed), FAIR SHARE and ACTUAL SHARE (of the
fleet, the resource each queue uses most). ``-o wide`` adds the strategy, the borrowing
limits, the preemption settings and why a queue is ignored; ``-o json|yaml`` prints the
RelayQueues as kubectl does (a ``v1 List``), ``-o name`` their names, ``-o jsonpath=``
and ``custom-columns=`` as `get`; ``-w`` each change after. The rows are pure
(:func:`queue_rows`); the command only lists and watches (cli/object_watch.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobrelay.cli.common import manager_client, manager_options, run_command
from jobrelay.cli.object_watch import list_output_option, watch_option
from jobrelay.cli.workloads import table
from jobrelay.readmodel.queue_rows import queue_row

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient

__all__ = ["queue_rows", "queues"]

# Shown first, in this order; other resources follow by name.
_FIRST = ("cpu", "memory", "nvidia.com/gpu")
_NO_CRD = (
    "the management cluster serves no RelayQueues (relayqueues.jobrelay.dev): install "
    "jobrelay's CRDs with its chart (crds.install, the default) or `kubectl apply "
    "--server-side -f charts/jobrelay/files/crds/`, then define queues (docs/queues.md)"
)


def _map(raw: object) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def _text(raw: object) -> str:
    return "-" if raw is None or raw == "" else str(raw)


def _share(raw: object) -> str:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return "-"
    return f"{raw * 100:.1f}%"


def resources_shown(queues: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every resource a queue uses or is guaranteed, the usual ones first."""
    names: set[str] = set()
    for queue in queues:
        names.update(str(r) for r in _map(_map(queue.get("status")).get("usage")))
        names.update(str(r) for r in _map(_map(queue.get("spec")).get("nominalQuota")))
    return [r for r in _FIRST if r in names] + sorted(names - set(_FIRST))


def _pairs(raw: object) -> str:
    shown = ",".join(f"{k}={v}" for k, v in sorted(_map(raw).items()))
    return shown or "-"


def queue_rows(queues: Sequence[Mapping[str, Any]], *, wide: bool) -> list[str]:
    """The table of ``queues`` (RelayQueue objects), sorted by name, aligned."""
    resources = resources_shown(queues)
    header = ("NAME", "WEIGHT", "PENDING", "ADMITTED", *(r.upper() for r in resources),
              "FAIR SHARE", "ACTUAL SHARE")  # fmt: skip
    if wide:
        header = (*header, "STRATEGY", "BORROWING LIMIT", "RECLAIM", "WITHIN QUEUE", "MESSAGE")
    rows = []
    by_name = sorted(queues, key=lambda q: str(_map(q.get("metadata")).get("name") or ""))
    for queue in by_name:
        shared = queue_row(queue)
        spec = _map(queue.get("spec"))
        row = (
            _text(shared.name),
            _text(shared.weight),
            _text(shared.pending),
            _text(shared.admitted),
            *(f"{shared.usage.get(r, '0')}/{shared.nominal_quota.get(r, '-')}" for r in resources),
            _share(shared.fair_share),
            _share(shared.actual_share),
        )
        if wide:
            preemption = _map(spec.get("preemption"))
            row = (
                *row,
                _text(spec.get("queueingStrategy") or "BestEffortFIFO"),
                _pairs(shared.borrowing_limit),
                _text(preemption.get("reclaimWithinFleet") or "Never"),
                _text(preemption.get("withinQueue") or "Never"),
                shared.message,
            )
        rows.append(tuple(str(cell) for cell in row))
    return table(rows, header)


async def list_queues(client: ApiClient) -> tuple[list[dict[str, Any]], str]:
    """The RelayQueues and the list's resourceVersion (where a watch starts)."""
    from jobrelay.kube.errors import ApiError
    from jobrelay.kube.resources import RELAY_QUEUES

    try:
        listed = await client.list(RELAY_QUEUES)
        return listed.items, listed.resource_version
    except ApiError as error:
        if error.is_not_found:
            raise click.ClickException(_NO_CRD) from None
        raise


@click.command()
@list_output_option()
@watch_option
@manager_options
def queues(output: str | None, watch: bool, kubeconfig: Path | None, context: str | None) -> None:
    """The fleet's queues (RelayQueue objects): weight, pending and admitted workloads,
    usage of nominal quota per resource, fair and actual share of the fleet.

    The figures are the controller's (its leader writes each queue's status on change);
    a queue it ignores says why in -o wide. -w prints each queue's new row as its status
    changes. See docs/queues.md.
    """
    from jobrelay.cli.object_watch import ObjectPrinter, watch_objects
    from jobrelay.cli.terminal import safe_lines

    def rows(found: Sequence[Mapping[str, Any]], wide: bool) -> list[str]:
        return list(safe_lines(queue_rows(found, wide=wide)))

    printer = ObjectPrinter(
        output, rows, "relayqueue.jobrelay.dev",
        empty="no RelayQueues: every workload is placed as it comes (docs/queues.md)",
    )  # fmt: skip

    async def go() -> None:
        from jobrelay.kube.resources import RELAY_QUEUES

        async with manager_client(kubeconfig, context) as client:
            found, version = await list_queues(client)
            printer.first(found)
            if watch:
                await watch_objects(client, RELAY_QUEUES, version, printer)

    run_command(go())
