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
from jobrelay.fleet import maintenance_rules
from jobrelay.fleet.maintenance_rules import WorkerClusterView
from jobrelay.kinds.base import WorkloadKind
from jobrelay.placement.units import CPU, GPU, MEMORY, format_units, resources_of
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.placement import placement_of

CLUSTER_COLUMNS = ("NAME", "CONNECTED", "STATE", "VERSION", "MIRRORS", "CAPACITY", "AGE")
CLUSTER_WIDE_COLUMNS = (*CLUSTER_COLUMNS, "LABELS", "MESSAGE")


def _capacity(worker: Mapping[str, Any]) -> Mapping[str, Any]:
    capacity = (worker.get("status") or {}).get("capacity")
    return capacity if isinstance(capacity, Mapping) else {}


def _mirrors(state: WorkerClusterView) -> str:
    return "-" if state.active_mirrors is None else str(state.active_mirrors)


def cluster_line(
    worker: Mapping[str, Any], now: datetime, capacity_text: str, *, wide: bool
) -> tuple[str, ...]:
    """One row of `jobrelay clusters` (``capacity_text``: the CAPACITY cell, as `list` has it)."""
    state = WorkerClusterView.of(worker)
    status = worker.get("status") or {}
    cells: tuple[str, ...] = (
        state.name, state.connected, maintenance_rules.state_summary(state),
        str(status.get("kubernetesVersion") or "-"), _mirrors(state), capacity_text,
        workloads.age(worker, now),
    )  # fmt: skip
    if not wide:
        return cells
    labels = ",".join(f"{k}={v}" for k, v in Meta(worker).labels.items())
    notes = []
    if state.lost_time:
        notes.append(f"lost since {state.lost_time}")
    if state.connected != "True":
        notes.append(": ".join(filter(None, (state.connected_reason, state.connected_message))))
    return (*cells, labels or "-", "; ".join(filter(None, notes)))


def cluster_table(
    workers: Iterable[tuple[Mapping[str, Any], str]], now: datetime, *, wide: bool
) -> list[str]:
    header = CLUSTER_WIDE_COLUMNS if wide else CLUSTER_COLUMNS
    return table([cluster_line(w, now, text, wide=wide) for w, text in workers], header)


def usage(capacity: Mapping[str, Any], resource: str) -> str:
    """``used/allocatable (pct%)`` of one resource, used being requested plus reserved by
    jobrelay's own placements not bound yet; ``-`` when the worker has none of it or its
    capacity is not known."""
    try:
        allocatable = resources_of(capacity.get("allocatable") or {})
        requested = resources_of(capacity.get("requested") or {})
        reserved = resources_of(capacity.get("reserved") or {})
    except (TypeError, ValueError, AttributeError, ArithmeticError):  # an odd status
        return "-"
    total = allocatable.get(resource, 0)
    if not total:
        return "-"
    used = requested.get(resource, 0) + reserved.get(resource, 0)
    percent = round(100 * used / total)
    return f"{format_units(resource, used)}/{format_units(resource, total)} ({percent}%)"


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
        state = WorkerClusterView.of(worker)
        capacity = _capacity(worker)
        nodes = (
            f"{capacity.get('schedulableNodes', 0)}/{capacity.get('nodes', 0)}" if capacity else "-"
        )
        rows.append(
            (
                state.name, state.connected, maintenance_rules.state_summary(state), nodes,
                usage(capacity, CPU), usage(capacity, MEMORY), usage(capacity, GPU),
                _mirrors(state), str(running.get(state.name, 0)),
            )
        )  # fmt: skip
    lines = table(rows, TOP_COLUMNS) if rows else ["no worker clusters registered"]
    counts = Counter(state for _, state in standings)
    totals = ", ".join(f"{state.value} {counts[state]}" for state in State if counts[state])
    lines.append("")
    lines.append(f"WORKLOADS {len(standings)}" + (f": {totals}" if totals else ""))
    return lines
