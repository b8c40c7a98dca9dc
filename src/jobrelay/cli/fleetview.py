"""What `jobrelay clusters` and `jobrelay top` show of the fleet (pure: no I/O, no clock).

Everything comes from the manager: each WorkerCluster's status (Connected,
kubernetesVersion, activeMirrors, capacity, written by the controller) and the
managed workloads' own state (:mod:`jobrelay.cli.workloads`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobrelay.cli import workloads
from jobrelay.cli.workloads import State, table
from jobrelay.fleet.maintenance_rules import WorkerClusterView
from jobrelay.kinds.base import WorkloadKind
from jobrelay.placement.units import CPU, GPU, MEMORY
from jobrelay.readmodel.worker_rows import resource_uses, worker_row
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.placement import placement_of

CLUSTER_COLUMNS = ("NAME", "CONNECTED", "STATE", "VERSION", "MIRRORS", "CAPACITY", "AGE")
CLUSTER_WIDE_COLUMNS = (*CLUSTER_COLUMNS, "LABELS", "MESSAGE")


def _mirrors(state: WorkerClusterView) -> str:
    return "-" if state.active_mirrors is None else str(state.active_mirrors)


def cluster_line(
    worker: Mapping[str, Any], now: datetime, capacity_text: str, *, wide: bool
) -> tuple[str, ...]:
    """One row of `jobrelay clusters` (``capacity_text``: the CAPACITY cell, as `list` has it)."""
    row = worker_row(worker)
    cells: tuple[str, ...] = (
        row.name, row.view.connected, row.state, row.version or "-", _mirrors(row.view),
        capacity_text, workloads.age(worker, now),
    )  # fmt: skip
    if not wide:
        return cells
    labels = ",".join(f"{k}={v}" for k, v in Meta(worker).labels.items())
    notes = [f"lost since {row.view.lost_time}"] if row.view.lost_time else []
    notes.append(row.message)
    return (*cells, labels or "-", "; ".join(filter(None, notes)))


def cluster_table(
    workers: Iterable[tuple[Mapping[str, Any], str]], now: datetime, *, wide: bool
) -> list[str]:
    header = CLUSTER_WIDE_COLUMNS if wide else CLUSTER_COLUMNS
    return table([cluster_line(w, now, text, wide=wide) for w, text in workers], header)


def usage(capacity: Mapping[str, Any], resource: str) -> str:
    """``used/allocatable (pct%)`` of one resource, used being requested plus reserved by
    jobrelay's own placements not bound yet; ``-`` when the worker has none of it or its
    capacity is not known (readmodel/worker_rows.py)."""
    use = resource_uses(capacity).get(resource)
    return "-" if use is None else use.text


TOP_COLUMNS = (
    "WORKER",
    "CONNECTED",
    "STATE",
    "NODES",
    "CPU",
    "MEMORY",
    "GPU",
    "MIRRORS",
    "RUNNING",
)


def top_lines(
    workers: Sequence[Mapping[str, Any]],
    managed: Sequence[tuple[WorkloadKind, Mapping[str, Any]]],
) -> list[str]:
    """The fleet at a glance: per worker its connection, capacity used of allocatable,
    unfinished mirrors (its status) and workloads running there (the manager's view);
    then how many workloads are in each state."""
    standings = [(placement_of(obj), workloads.standing(kind, obj).state)
                 for kind, obj in managed]  # fmt: skip
    running = Counter(where for where, state in standings if state is State.RUNNING)
    rows = []
    for worker in workers:
        row = worker_row(worker)
        nodes = f"{row.schedulable_nodes or 0}/{row.nodes or 0}" if row.capacity_known else "-"
        cells = [use.text if use else "-" for use in map(row.resources.get, (CPU, MEMORY, GPU))]
        rows.append(
            (
                row.name, row.view.connected, row.state, nodes, *cells,
                _mirrors(row.view), str(running.get(row.name, 0)),
            )
        )  # fmt: skip
    lines = table(rows, TOP_COLUMNS) if rows else ["no worker clusters registered"]
    counts = Counter(state for _, state in standings)
    totals = ", ".join(f"{state.value} {counts[state]}" for state in State if counts[state])
    lines.append("")
    lines.append(f"WORKLOADS {len(standings)}" + (f": {totals}" if totals else ""))
    return lines
