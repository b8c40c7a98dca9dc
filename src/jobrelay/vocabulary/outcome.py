"""What a handler of the work queue answers about a key: one set of types from the
decision (controller/relay/decide.py) to the queue (kube/queueing.py). Pure.

- :class:`Done`: nothing more until something changes (a watch event brings the
  key back);
- :class:`RequeueAfter`: look again after some seconds (time, not an event, will
  change things), in the lane it names or the one the key was handed out at;
- :class:`Retry`: look again soon, backing off per key (a race, a cache that has
  not caught up): not an error, so not logged as one;
- :class:`Terminal`: a problem only the user can fix; no retry until the object
  changes, or after ``retry_after`` seconds when time may fix it (a quota).

The queue counts each by its :func:`result` (the ``result`` label of
``jobrelay_reconcile_duration_seconds``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Done",
    "Lane",
    "QueueOutcome",
    "RequeueAfter",
    "Result",
    "Retry",
    "Terminal",
    "result",
]


class Lane(enum.IntEnum):
    """How soon a key is wanted; a lower value is served first."""

    FRESH = 0  # new or changed work: a placement, a first action
    STATUS = 1  # a mirror's status to copy
    BACKGROUND = 2  # the start-up sweep, the periodic resync, slow retries


@dataclass(frozen=True, slots=True)
class Done:
    """Nothing more until something changes (a watch event brings the key back)."""


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    """Look again after ``seconds``: time, not an event, will change things. In ``lane``
    (None: the lane the key was handed out at)."""

    seconds: float
    lane: Lane | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Look again soon, backing off per key: a race or a cache that has not caught up.

    Retried at once at first, then ever more slowly, never at a fixed pace forever.
    """

    why: str


@dataclass(frozen=True, slots=True)
class Terminal:
    """A problem only the user can fix: a Warning Event says what. No retry until the
    object changes, or after ``retry_after`` seconds when time may fix it (a quota)."""

    reason: str
    message: str
    retry_after: float | None = None
    # For the controller's log only: what a worker answered, word for word. The Event's
    # ``message`` is read by the workload's tenant and never quotes a worker.
    detail: str = ""


QueueOutcome = Done | RequeueAfter | Retry | Terminal

Result = Literal["done", "requeue", "retry", "terminal"]


def result(outcome: QueueOutcome) -> Result:
    """The name an outcome is counted by."""
    match outcome:
        case Done():
            return "done"
        case RequeueAfter():
            return "requeue"
        case Retry():
            return "retry"
        case Terminal():
            return "terminal"
