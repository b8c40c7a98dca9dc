"""Worker-side Events relayed onto the management objects they concern (pure: no I/O).

A worker's Warning Events (``FailedCreate``, ``FailedScheduling``,
``BackoffLimitExceeded``, ``BackOff``, image pull failures, ``Evicted``...) about a
mirror, one of its pods, or a Job a JobSet mirror made, are copied onto the
management object, so ``kubectl describe`` on the manager explains what happened
remotely:

* :mod:`jobrelay.fleet.workerevents_targets` maps a worker Event to the workload it
  concerns (its ``target_of``), and only the management object whose UID the mirror
  names hears of it (its ``speaks_for``);
* :class:`WorkerEventRelay` decides what to relay: only occurrences newer than the
  mirror and not relayed yet (a relist or a reconnection replays nothing; the first
  list after start-up is history), the same type and reason as on the worker (the
  reason cut to letters and digits), the message marked as the worker's (``worker
  <name>: ...``: worker text is never read as jobrelay's own), stripped of control
  characters and bounded (:func:`worker_text`); per workload, a token bucket lets
  through a handful of *distinct* messages a minute (repeats of one already relayed
  pass, since the recorder folds them into one Event's count) and the rest is told
  by one summary Event per interval;
* :class:`BlockedTracker` says when a mirror cannot create its pods (a
  ``FailedCreate`` on it while its kind's adapter shows no pod of it at work:
  ``pods_at_work``), for the ``jobrelay.dev/blocked`` annotation.

Normal Events are not watched (the field selector ``type=Warning``): a mirror's
``SuccessfulCreate``, ``Scheduled``, ``Pulled``, ``Started``, ``Completed`` add
nothing to what the copied status and jobrelay's own ``Dispatched`` and
``Completed`` say, and they are most of a busy worker's Events.
"""

from __future__ import annotations

import collections
import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobrelay.fleet.workerevents_targets import Target, last_seen, occurrences
from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.meta import Meta

__all__ = [
    "FAILED_CREATE",
    "MAX_RELAYED_MESSAGE",
    "SUMMARY_REASON",
    "BlockedTracker",
    "Outgoing",
    "RelayLimits",
    "WorkerEventRelay",
    "blocked_value",
    "worker_reason",
    "worker_text",
]

FAILED_CREATE = "FailedCreate"
# The reason of the summary told instead of what the rate limit held back.
SUMMARY_REASON = "WorkerEventsSuppressed"
# Annotations are small; a worker's message can be long (a quota's full refusal).
_MAX_BLOCKED = 512
# A relayed message's characters at most (Kubernetes' own recorder cuts at 1 KiB too).
MAX_RELAYED_MESSAGE = 1024
# A relayed reason's characters at most (Kubernetes' are short CamelCase words).
_MAX_REASON = 64
# Characters a worker's text brings along only as a space: Unicode's "other" (controls:
# a terminal's escapes, line breaks that fake a second line; format characters: bidi
# overrides that reorder what is shown; surrogates, private and unassigned ones) and
# separators (any space, line or paragraph break).
_AS_SPACE = ("C", "Z")


def worker_text(text: str, limit: int = MAX_RELAYED_MESSAGE) -> str:
    """Text a worker wrote, fit to show on the manager: unsafe characters as spaces,
    whitespace runs as one space, at most ``limit`` characters (``...`` when cut)."""
    safe = "".join(" " if unicodedata.category(ch).startswith(_AS_SPACE) else ch for ch in text)
    joined = " ".join(safe.split())
    return joined if len(joined) <= limit else joined[: max(limit - 3, 0)] + "..."


def worker_reason(text: str) -> str:
    """A worker Event's reason as relayed: its ASCII letters and digits (a CamelCase
    word, as Kubernetes' are), bounded; ``Unknown`` when none is left."""
    kept = "".join(ch for ch in text if ch.isascii() and ch.isalnum())[:_MAX_REASON]
    return kept or "Unknown"


def _from_worker(worker: str, text: str) -> str:
    """``text`` marked as the worker's: never read as jobrelay's own words."""
    return worker_text(f"worker {worker}: {text}")


# -- what to relay ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One Event to record on the management object ``key`` (``count`` occurrences)."""

    key: WorkloadKey
    type: str
    reason: str
    message: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class RelayLimits:
    """How much of a worker's Events reaches one management object."""

    # Distinct messages relayed at once per workload, and refilled per minute.
    burst: int = 5
    per_minute: float = 5.0
    # A message relayed this recently passes again (the recorder counts it on its
    # Event); the recorder's own dedupe window.
    repeat_window: float = 600.0
    # At most one summary of what was held back, per workload, this often (seconds).
    summary_interval: float = 60.0
    # Bounds of what is remembered: Events seen (per worker and UID), workloads.
    max_events: int = 65536
    max_workloads: int = 16384


@dataclass(slots=True)
class _Workload:
    tokens: float
    refilled_at: float
    # Messages relayed, when last: a repeat within the window passes without a token.
    relayed: collections.OrderedDict[tuple[str, str, bytes], float] = field(
        default_factory=collections.OrderedDict
    )
    # Held back since the last summary: by worker, occurrences by reason.
    held: dict[str, collections.Counter[str]] = field(default_factory=dict)
    summary_due: float | None = None


# Distinct messages remembered per workload (the oldest are forgotten first).
_RELAYED_KEPT = 256


class WorkerEventRelay:
    """Which worker Event occurrences become manager Events, deduplicated and rate-limited.

    Deterministic: the caller passes the time (``now``, any monotonic clock, in seconds).
    """

    def __init__(self, limits: RelayLimits | None = None) -> None:
        self.limits = limits or RelayLimits()
        # Occurrences accounted for (relayed, or history), by (worker, Event UID).
        self._seen: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        self._workloads: collections.OrderedDict[WorkloadKey, _Workload] = collections.OrderedDict()
        # Occurrences the rate limit held back, by worker, since start (for metrics).
        self.suppressed: collections.Counter[str] = collections.Counter()

    def observe(
        self,
        worker: str,
        event: Mapping[str, Any],
        target: Target | None,
        *,
        history: bool,
        now: float,
    ) -> list[Outgoing]:
        """What to record for this added or changed worker Event.

        ``target``: what :func:`target_of` found (None: nothing of ours, or not cached
        yet; nothing is remembered, so a later change counts every occurrence).
        ``history``: it comes from the first list of this worker's Events since
        start-up: remembered, never relayed (the replica before us did).
        """
        if target is None:
            return []
        uid = Meta(event).uid
        if not uid:
            return []
        count = occurrences(event)
        seen_key = (worker, uid)
        before = self._seen.get(seen_key)
        self._remember(seen_key, max(count, before or 0))
        if before is None and history:
            return []
        happened = last_seen(event)
        if (
            happened is not None
            and target.mirror_created is not None
            and happened < target.mirror_created
        ):
            return []  # about an earlier object of that name, or before this run began
        new = count - (before or 0)
        if new <= 0:
            return []
        message = str(event.get("message") or "")
        subject = f"{target.subject}: " if target.subject else ""
        outgoing = Outgoing(
            target.key,
            "Warning" if event.get("type") != "Normal" else "Normal",
            worker_reason(str(event.get("reason") or "")),
            _from_worker(worker, subject + message),
            new,
        )
        return [outgoing] if self._admit(worker, outgoing, now) else []

    def due(self, now: float) -> list[Outgoing]:
        """The summaries due by ``now``: what the rate limit held back, per workload and worker."""
        summaries: list[Outgoing] = []
        for key, state in self._workloads.items():
            if state.summary_due is None or state.summary_due > now:
                continue
            for worker, reasons in sorted(state.held.items()):
                total = sum(reasons.values())
                detail = ", ".join(f"{r} {n}" for r, n in reasons.most_common())
                summaries.append(
                    Outgoing(
                        key,
                        "Warning",
                        SUMMARY_REASON,
                        _from_worker(
                            worker, f"{total} more events not shown (rate limit): {detail}"
                        ),
                    )
                )
            state.held.clear()
            state.summary_due = None
        return summaries

    def next_due(self) -> float | None:
        """When the next summary is due, if one is."""
        times = [s.summary_due for s in self._workloads.values() if s.summary_due is not None]
        return min(times) if times else None

    def _admit(self, worker: str, outgoing: Outgoing, now: float) -> bool:
        limits = self.limits
        state = self._workloads.get(outgoing.key)
        if state is None:
            state = self._workloads[outgoing.key] = _Workload(float(limits.burst), now)
            while len(self._workloads) > limits.max_workloads:
                self._workloads.popitem(last=False)
        self._workloads.move_to_end(outgoing.key)
        # A worker's message may be long and is its tenants' text: remembered by digest.
        digest = hashlib.sha256(outgoing.message.encode()).digest()
        signature = (outgoing.type, outgoing.reason, digest)
        relayed_at = state.relayed.get(signature)
        if relayed_at is not None and now - relayed_at < limits.repeat_window:
            state.relayed[signature] = now
            state.relayed.move_to_end(signature)
            return True
        state.tokens = min(
            float(limits.burst),
            state.tokens + (now - state.refilled_at) * limits.per_minute / 60.0,
        )
        state.refilled_at = now
        if state.tokens >= 1.0:
            state.tokens -= 1.0
            state.relayed[signature] = now
            state.relayed.move_to_end(signature)
            while len(state.relayed) > _RELAYED_KEPT:
                state.relayed.popitem(last=False)
            return True
        state.held.setdefault(worker, collections.Counter())[outgoing.reason] += outgoing.count
        self.suppressed[worker] += outgoing.count
        if state.summary_due is None:
            state.summary_due = now + limits.summary_interval
        return False

    def _remember(self, key: tuple[str, str], count: int) -> None:
        self._seen[key] = count
        self._seen.move_to_end(key)
        while len(self._seen) > self.limits.max_events:
            self._seen.popitem(last=False)


# -- Blocked ---------------------------------------------------------------------------------


def blocked_value(worker: str, reason: str, message: str) -> str:
    """The ``jobrelay.dev/blocked`` annotation: ``worker-1: FailedCreate: <message>``."""
    return worker_text(f"{worker}: {reason}: {message}", _MAX_BLOCKED)


@dataclass(frozen=True, slots=True)
class _Blocked:
    worker: str
    mirror_uid: str
    value: str
    # The management object's UID the mirror names: only that object gets the annotation.
    origin_uid: str = ""


class BlockedTracker:
    """Which workloads' mirrors cannot create their pods, and the worker's words for it.

    A ``FailedCreate`` on the mirror (or a Job its JobSet made) while the mirror has
    no active pod blocks it; the mirror showing active pods, finishing, or going
    (deleted, replaced by another run) unblocks it.
    """

    def __init__(self) -> None:
        self._blocked: dict[WorkloadKey, _Blocked] = {}

    def wanted(self, key: WorkloadKey, uid: str | None = None) -> str | None:
        """The annotation's value for ``key``; None: it should have none. With ``uid``
        (the management object's as cached): None unless the mirror names that UID."""
        blocked = self._blocked.get(key)
        if blocked is None or (uid is not None and uid != blocked.origin_uid):
            return None
        return blocked.value

    def origin_uid(self, key: WorkloadKey) -> str | None:
        """The management object's UID the blocked mirror of ``key`` names, if blocked."""
        blocked = self._blocked.get(key)
        return blocked.origin_uid if blocked is not None else None

    def event(
        self,
        worker: str,
        event: Mapping[str, Any],
        target: Target | None,
        *,
        mirror_running: bool,
    ) -> bool:
        """Take in a worker Event (its target as :func:`target_of` found it); returns
        whether :meth:`wanted` changed for the target."""
        if (
            target is None
            or not target.makes_pods
            or event.get("reason") != FAILED_CREATE
            or mirror_running
        ):
            return False
        happened = last_seen(event)
        if (
            happened is not None
            and target.mirror_created is not None
            and happened < target.mirror_created
        ):
            return False
        before = self.wanted(target.key)
        value = blocked_value(worker, FAILED_CREATE, str(event.get("message") or ""))
        self._blocked[target.key] = _Blocked(worker, target.mirror_uid, value, target.origin_uid)
        return before != value

    def mirror(
        self,
        worker: str,
        key: WorkloadKey,
        mirror_uid: str | None,
        *,
        running_or_finished: bool,
    ) -> bool:
        """Take in a mirror's change on ``worker`` (``mirror_uid`` None: it was deleted);
        returns whether :meth:`wanted` changed for ``key``."""
        blocked = self._blocked.get(key)
        if blocked is None or blocked.worker != worker:
            return False
        if mirror_uid is None or mirror_uid != blocked.mirror_uid or running_or_finished:
            del self._blocked[key]
            return True
        return False
