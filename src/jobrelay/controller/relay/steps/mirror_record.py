"""When a mirror this process created is recorded on its object. Pure.

The record (``jobrelay.dev/mirrors``: which UID is each run's mirror) is what a
restarted controller trusts; until it is written, the create's own answer, kept in
the relay's memory, names the mirror followed (mirror_standing.py), so nothing is
lost by writing it later. Writing it inside the dispatch cost every Job a third
manager write on the path from create to Running (the placement, the mirror, the
record): under a burst the placements queued behind it, and the status copies
behind those. So it is written off that path: once the mirror has run for
:data:`RECORD_AFTER` seconds, in a decision that writes nothing else to the object
(its status writes compare against the version the record would change). A
workload that finishes sooner needs no record at all: its mirror goes with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jobrelay.controller.relay.plan import (
    Annotate,
    Done,
    Place,
    Plan,
    RequeueAfter,
    WriteStatus,
)
from jobrelay.kinds.base import WorkloadKind
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.outcome import Lane
from jobrelay.vocabulary.placement import mirror_records

__all__ = ["RECORD_AFTER", "awaiting_record", "with_mirror_record"]

# Seconds a created mirror runs unrecorded: longer than a short Job's whole life in a
# burst, queueing included (it never needs one: a 500-Job burst wrote 0.25 records per Job
# at 5 s, each a version its next status write could conflict with), short enough that a
# restart rarely finds a long-running mirror unrecorded (it then adopts the one of the
# current run on the worker it is placed on, after a fresh read).
RECORD_AFTER = 30.0


def with_mirror_record(plan: Plan, record: Annotate, age: float) -> Plan:
    """``plan`` with the mirror's ``record`` written last when it is due and nothing else
    is written to the object; else ``plan`` brought back in the background lane when it
    is due (a decision that ends Done would not look again by itself)."""
    writes_object = any(isinstance(a, (WriteStatus, Place, Annotate)) for a in plan.actions)
    due = age >= RECORD_AFTER and not writes_object and not plan.batching
    if due and isinstance(plan.outcome, Done | RequeueAfter):
        return dataclasses.replace(plan, actions=(*plan.actions, record))
    if isinstance(plan.outcome, Done):
        later = RequeueAfter(max(1.0, RECORD_AFTER - age), Lane.BACKGROUND)
        return dataclasses.replace(plan, outcome=later)
    return plan


def awaiting_record(kind: WorkloadKind, obj: JsonObj | None) -> Callable[[int], bool]:
    """Whether a mirror created of ``obj`` for a run still waits for its record: the
    object is there, unfinished, and records nothing for that run."""
    if obj is None or kind.is_finished(obj):
        return lambda _run: False
    recorded = mirror_records(obj)
    return lambda run: run not in recorded
