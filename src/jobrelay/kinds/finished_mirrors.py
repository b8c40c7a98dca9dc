"""How long a finished workload's mirror (and its pods, with their logs) stays on its
worker. Pure: seconds in, seconds out (no clock; the caller measures).

A finished mirror is kept ``--finished-mirror-ttl`` seconds after its workload finished
(0: deleted at once; ``--keep-finished-mirrors``: for ever), and never longer than the
management object's own ``ttlSecondsAfterFinished`` asks. The finish time is the one
the management object's status gives (its kind's :attr:`~jobrelay.kinds.base.Finish.at`),
so a restarted controller keeps the same deadline. The relay deletes the mirror when
the time is up (controller/relay/steps/deletion_step.py); the aggregated API tells a
user asking for logs afterwards when they went (relayapi/finished_logs_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobrelay.kinds.base import WorkloadKind
from jobrelay.vocabulary.go_durations import go_duration_text
from jobrelay.vocabulary.json_types import JsonObj

__all__ = ["FinishedMirrorTtl", "kept_for", "time_left"]


@dataclass(frozen=True, slots=True)
class FinishedMirrorTtl:
    """The controller's setting: seconds a finished mirror is kept (``--finished-mirror-ttl``),
    or for ever (``forever``: ``--keep-finished-mirrors``), and the flag's text as the
    user reads it back."""

    seconds: float
    forever: bool = False

    @property
    def flag(self) -> str:
        """The setting as a flag, to tell the user which one to change."""
        if self.forever:
            return "--keep-finished-mirrors"
        return f"--finished-mirror-ttl {go_duration_text(self.seconds)}"


def kept_for(kind: WorkloadKind, obj: JsonObj, ttl: FinishedMirrorTtl) -> float | None:
    """Seconds after ``obj`` finished its mirror is kept: the setting, shortened by the
    object's own ``ttlSecondsAfterFinished``; None: for ever."""
    own = kind.ttl_after_finished(obj)
    limits = [limit for limit in (None if ttl.forever else ttl.seconds, own) if limit is not None]
    return max(0.0, float(min(limits))) if limits else None


def time_left(kept: float | None, finished_for: float | None) -> float | None:
    """Seconds a finished mirror stays from now, given :func:`kept_for` and the seconds
    since its workload finished: 0 deletes it now, None keeps it for ever.

    A workload whose status gives no finish time (``finished_for`` None) has no deadline
    a restart would find again: its mirror goes at once, as with a ttl of 0. A finish
    time ahead of the controller's clock (a worker's clock ahead) keeps it no longer than
    ``kept`` from now.
    """
    if kept is None:
        return None
    if kept <= 0 or finished_for is None:
        return 0.0
    return max(0.0, min(kept, kept - finished_for))
