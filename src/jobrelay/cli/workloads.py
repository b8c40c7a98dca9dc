"""What `jobrelay get`, `describe` and `top` say of a workload (pure: no I/O, no clock).

A workload's state is computed by :mod:`jobrelay.kinds.standing`, and only there,
from the management object alone, so every command (and the controller's
``jobrelay_workloads`` gauge) says the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobrelay.cli.terminal import safe
from jobrelay.kinds.base import WorkloadKind

# Re-exported: the commands and their tests read a workload's state from here.
from jobrelay.kinds.standing import Standing as Standing
from jobrelay.kinds.standing import State as State
from jobrelay.kinds.standing import completions as completions
from jobrelay.kinds.standing import standing as standing
from jobrelay.readmodel.workload_rows import workload_row
from jobrelay.vocabulary.meta import Meta


def latest_warnings(events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The latest Warning Event about each object, by its UID, as ``Reason: message``."""
    latest: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for event in events:
        if event.get("type", "Warning") != "Warning":
            continue
        uid = (event.get("involvedObject") or {}).get("uid")
        when = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        if uid and when >= latest.get(uid, ("", {}))[0]:
            latest[uid] = (when, event)
    return {
        uid: f"{event.get('reason')}: {event.get('message')}" for uid, (_, event) in latest.items()
    }


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp of the API (``2026-01-02T03:04:05Z``), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's ``duration.HumanDuration``: ``45s``, ``3m20s``, ``15m``, ``5h3m``, ``3d4h``."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def age(obj: Mapping[str, Any], now: datetime) -> str:
    created = parse_time(Meta(obj).creation_timestamp)
    return "<unknown>" if created is None else human_duration((now - created).total_seconds())


def _finished_at(obj: Mapping[str, Any]) -> datetime | None:
    status = obj.get("status") or {}
    done = parse_time(status.get("completionTime"))
    if done is not None:
        return done
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in (
            "Complete", "Completed", "Failed", "Succeeded",
        ):  # fmt: skip
            return parse_time(condition.get("lastTransitionTime"))
    return None


def duration(obj: Mapping[str, Any], now: datetime) -> str:
    """How long it ran: start to completion, or to now while it runs; ``-`` before it starts.

    A Job starts at ``status.startTime``; kinds without one (JobSet) at creation once
    they have run or finished.
    """
    status = obj.get("status") or {}
    started = parse_time(status.get("startTime"))
    finished = _finished_at(obj)
    if started is None and (finished is not None or status.get("replicatedJobsStatus")):
        started = parse_time(Meta(obj).creation_timestamp)
    if started is None:
        return "-"
    return human_duration(((finished or now) - started).total_seconds())


@dataclass(frozen=True)
class Row:
    """One workload as `jobrelay get` prints it."""

    namespace: str
    name: str
    kind: str
    cluster: str
    state: State
    reason: str
    completions: str
    age: str
    duration: str
    placements: str
    active: str
    failed: str
    # Its RelayQueue ("-" for none) and, while it waits there, its place (1 = next).
    queue: str = "-"
    position: str = "-"
    # While it waits: when it is likely to start ("in about 4m", "unknown"); "-" otherwise.
    estimated_start: str = "-"

    COLUMNS = ("NAMESPACE", "NAME", "KIND", "CLUSTER", "STATE", "COMPLETIONS", "AGE", "DURATION")
    QUEUE_COLUMNS = ("QUEUE", "POSITION")
    WIDE_COLUMNS = (*COLUMNS, *QUEUE_COLUMNS, "PLACEMENTS", "ACTIVE", "FAILED", "ESTIMATED START")

    def cells(self, *, wide: bool = False, queues: bool = False) -> tuple[str, ...]:
        """The table's cells; ``queues``: QUEUE and POSITION too (wide always has them)."""
        basic = (
            self.namespace, self.name, self.kind, self.cluster or "-", self.state.value,
            self.completions, self.age, self.duration,
        )  # fmt: skip
        if wide:
            return (
                *basic, self.queue, self.position, self.placements, self.active, self.failed,
                self.estimated_start,
            )  # fmt: skip
        return (*basic, self.queue, self.position) if queues else basic

    def identity(self, *, wide: bool = False, queues: bool = False) -> tuple[str, ...]:
        """What a watch compares to decide whether a row changed: what the table shows of
        it, its ages and its estimated start aside (they change every second)."""
        cells = self.cells(wide=wide, queues=queues)
        return (*cells[:6], *cells[8 : -1 if wide else None], self.reason)


def row(
    kind: WorkloadKind,
    obj: Mapping[str, Any],
    now: datetime,
    *,
    warning: str = "",
    place: tuple[str, int | None] | None = None,
    estimated_start: str = "-",
) -> Row:
    """``warning`` (the latest Warning Event about it) is the reason of a workload whose state
    has none of its own; ``place``: its RelayQueue and, while it waits there, its position
    (None: its label names the queue, as far as is known); ``estimated_start``: in words."""
    shared = workload_row(kind, obj, queue=None if place is None else place[0])
    position = None if place is None else place[1]
    return Row(
        namespace=shared.namespace,
        name=shared.name,
        kind=shared.kind,
        cluster=shared.worker,
        state=shared.state,
        reason=shared.reason or warning,
        completions=shared.completions,
        age=age(obj, now),
        duration=duration(obj, now),
        placements=">".join(shared.placements) or "-",
        active=shared.active,
        failed=shared.failed,
        queue=shared.queue or "-",
        position="-" if position is None else str(position),
        estimated_start=estimated_start,
    )


def column_widths(lines: Sequence[tuple[str, ...]]) -> list[int]:
    """The width of every column but the last (which is never padded)."""
    if not lines:
        return []
    return [max(len(line[i]) for line in lines) for i in range(len(lines[0]) - 1)]


def aligned(line: tuple[str, ...], widths: list[int]) -> str:
    """One line, its columns three spaces apart as kubectl's, trailing space cut; made
    safe for the terminal (its cells hold what tenants and workers wrote)."""
    cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
    return safe("   ".join([*cells, *line[len(cells) :]]).rstrip())


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    """A header and rows, aligned; the last column (a reason, a message) is not padded, so a
    long one does not widen the rest."""
    lines = [header, *rows]
    widths = column_widths(lines)
    return [aligned(line, widths) for line in lines]


def state_header(*, wide: bool, queues: bool = False) -> tuple[str, ...]:
    """The table's header; ``queues``: QUEUE and POSITION in the default table too."""
    if wide:
        return (*Row.WIDE_COLUMNS, "REASON")
    return (*Row.COLUMNS, *(Row.QUEUE_COLUMNS if queues else ()), "REASON")


def state_line(r: Row, *, wide: bool, queues: bool = False) -> tuple[str, ...]:
    """A row of `jobrelay get`'s table: its columns, then REASON."""
    return (*r.cells(wide=wide, queues=queues), r.reason)
