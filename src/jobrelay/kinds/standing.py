"""Where a workload stands, from the management object alone (pure: no I/O, no clock).

Computed here, and only here, from its status, conditions and jobrelay's
annotations (read through :mod:`jobrelay.vocabulary.placement`), so `jobrelay get`,
`describe`, `top` and the controller's ``jobrelay_workloads`` gauge say the same
thing, and every case is a table row in the unit tests.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.catalog import dedicated_by_kind
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import RESTORED_HELD_ANNOTATION
from jobrelay.vocabulary.placement import blocked_reason, not_placed_reason, placement_of

__all__ = ["Standing", "State", "completions", "standing"]


class State(enum.StrEnum):
    """Where a workload stands, as `jobrelay get` shows it (first match wins, top down)."""

    COMPLETE = "Complete"  # its kind's finish says succeeded
    FAILED = "Failed"  # its kind's finish says failed
    SUSPENDED = "Suspended"  # spec.suspend
    # The worker cannot create its mirror's pods (BLOCKED_ANNOTATION), or a restored
    # workload waits for its admin to adopt or stop its mirror (RESTORED_HELD_ANNOTATION).
    BLOCKED = "Blocked"
    HELD = "Held"  # not placed: no cluster can take it now (NOT_PLACED_ANNOTATION)
    PENDING = "Pending"  # not placed, and the controller has not said why yet
    RUNNING = "Running"  # placed, and pods are active or have run
    DISPATCHED = "Dispatched"  # placed; its mirror shows no progress yet


@dataclass(frozen=True)
class Standing:
    state: State
    reason: str = ""


def standing(kind: WorkloadKind, obj: Mapping[str, Any]) -> Standing:
    """The state of a management object and, where there is one, its reason."""
    body = dict(obj)
    finish = kind.finish(body)
    if finish is not None:
        reason = ": ".join(filter(None, (finish.reason, finish.message)))
        return Standing(State.COMPLETE if finish.succeeded else State.FAILED, reason)
    if kind.is_suspended(body):
        return Standing(State.SUSPENDED)
    blocked = Meta(obj).annotation(RESTORED_HELD_ANNOTATION) or blocked_reason(obj)
    if blocked:
        return Standing(State.BLOCKED, blocked)
    if not placement_of(obj):
        held = not_placed_reason(obj)
        return Standing(State.HELD, held) if held else Standing(State.PENDING)
    if kind.pods_at_work(body) or kind.has_run(body):
        return Standing(State.RUNNING)
    return Standing(State.DISPATCHED)


def completions(obj: Mapping[str, Any], kind: WorkloadKind | None = None) -> str:
    """``done/wanted`` as its kind's adapter says it (``kind``; else the dedicated adapter
    of the object's ``kind`` field); ``-`` for a kind that cannot tell."""
    adapter = kind or dedicated_by_kind(obj.get("kind"), obj.get("apiVersion"))
    return adapter.completions(dict(obj)) if adapter is not None else "-"
