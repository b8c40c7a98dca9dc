"""Worker-side Events relayed onto the management objects they concern (pure: no I/O).

A worker's Warning Events (``FailedCreate``, ``FailedScheduling``,
``BackoffLimitExceeded``, ``BackOff``, image pull failures, ``Evicted``...) about a
mirror, one of its pods, or a Job a JobSet mirror made, are copied onto the
management object, so ``kubectl describe`` on the manager explains what happened
remotely:

* :func:`target_of` maps a worker Event to the workload it concerns, from the
  worker's mirror caches and its pod cache: a pod speaks for a mirror only when its
  controller owner reference or its owner UID label names that mirror's UID (never by
  its name or a label's name alone); a Job a JobSet mirror made, by its name;
* :func:`speaks_for` then asks the management object itself: only the one whose UID
  the mirror's ``jobrelay.dev/origin-uid`` names hears of it (a worker that lists a
  made-up "mirror" named like another workload reaches nobody);
* :class:`WorkerEventRelay` decides what to relay: only occurrences newer than the
  mirror and not relayed yet (a relist or a reconnection replays nothing; the first
  list after start-up is history), the same reason and type as on the worker, the
  message prefixed with the worker's name; per workload, a token bucket lets
  through a handful of *distinct* messages a minute (repeats of one already relayed
  pass, since the recorder folds them into one Event's count) and the rest is told
  by one summary Event per interval;
* :class:`BlockedTracker` says when a mirror cannot create its pods (a
  ``FailedCreate`` on it while no pod of it is active), for the
  ``jobrelay.dev/blocked`` annotation.

Normal Events are not watched (the field selector ``type=Warning``): a mirror's
``SuccessfulCreate``, ``Scheduled``, ``Pulled``, ``Started``, ``Completed`` add
nothing to what the copied status and jobrelay's own ``Dispatched`` and
``Completed`` say, and they are most of a busy worker's Events.
"""

from __future__ import annotations

import collections
import datetime
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "FAILED_CREATE",
    "SUMMARY_REASON",
    "WORKER_EVENT_FIELD_SELECTOR",
    "BlockedTracker",
    "Outgoing",
    "RelayLimits",
    "Target",
    "WorkerEventRelay",
    "blocked_value",
    "has_active_pods",
    "last_seen",
    "occurrences",
    "slim_event",
    "speaks_for",
    "target_of",
]

# What the worker's Event informer asks for (see the module's docstring).
WORKER_EVENT_FIELD_SELECTOR = "type=Warning"
FAILED_CREATE = "FailedCreate"
# The reason of the summary told instead of what the rate limit held back.
SUMMARY_REASON = "WorkerEventsSuppressed"
# Annotations are small; a worker's message can be long (a quota's full refusal).
_MAX_BLOCKED = 512

_POD = ("", "Pod")
_JOB = ("batch", "Job")

# Looks up a cached mirror: (kind name, "namespace/name") -> the slim mirror or None.
MirrorLookup = Callable[[tuple[str, str]], Mapping[str, Any] | None]
# A pod by namespace and name: its UID and the (name, UID) of each owner it speaks for
# (placement.tracker.pod_owners), or None when the pod is not known.
PodOwners = Callable[[str, str], tuple[str, frozenset[tuple[str, str]]] | None]


# -- reading Events ------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a worker may send anything."""
    return value if isinstance(value, Mapping) else {}


def slim_event(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """An Event with only what the relay reads; None for one about a cluster-scoped object
    (Nodes: no mirror is one), or one that is not shaped like an Event."""
    involved = _mapping(obj.get("involvedObject"))
    if not isinstance(involved.get("namespace"), str) or not isinstance(involved.get("name"), str):
        return None
    if not involved["namespace"] or not involved["name"]:
        return None
    metadata = _mapping(obj.get("metadata"))
    slim: dict[str, Any] = {
        "metadata": {
            k: metadata[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in metadata
        },
        "involvedObject": {
            k: involved[k]
            for k in ("apiVersion", "kind", "name", "namespace", "uid")
            if k in involved
        },
    }
    for key in (
        "type",
        "reason",
        "message",
        "count",
        "firstTimestamp",
        "lastTimestamp",
        "eventTime",
    ):
        if obj.get(key) is not None:
            slim[key] = obj[key]
    series = obj.get("series")
    if isinstance(series, Mapping):
        slim["series"] = {k: series[k] for k in ("count", "lastObservedTime") if k in series}
    return slim


def occurrences(event: Mapping[str, Any]) -> int:
    """How many times it happened: the core/v1 ``count``, or an events.k8s.io series'."""
    series = _mapping(event.get("series"))
    for value in (series.get("count"), event.get("count")):
        if isinstance(value, int) and value > 0:
            return value
    return 1


def _moment(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def last_seen(event: Mapping[str, Any]) -> datetime.datetime | None:
    """When it last happened, by the worker's clock: ``lastTimestamp`` (core/v1
    recorders), ``series.lastObservedTime`` or ``eventTime`` (events.k8s.io recorders,
    e.g. the scheduler), else when the Event was stored."""
    series = _mapping(event.get("series"))
    candidates = (
        event.get("lastTimestamp"),
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        Meta(event).creation_timestamp,
    )
    moments = [m for m in map(_moment, candidates) if m is not None]
    return max(moments) if moments else None


# -- which workload it concerns ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """The management workload a worker Event concerns, through which of its objects."""

    key: WorkloadKey
    mirror_uid: str
    mirror_created: datetime.datetime | None
    # "" for the mirror itself, else what it is about: "pod NAME", "job NAME".
    subject: str = ""
    # Whether a FailedCreate on it means the mirror's pods cannot be made (the mirror
    # itself, or a Job its JobSet made): not so for a pod's own Events.
    makes_pods: bool = True
    # The management object's UID the mirror names (its jobrelay.dev/origin-uid).
    origin_uid: str = ""


def speaks_for(target: Target, management: Mapping[str, Any] | None) -> bool:
    """Whether the management object ``management`` (as cached under ``target.key``) is
    the one the mirror was made for: its UID is the mirror's origin-uid. Not so for a
    namesake, a recreated object, or a "mirror" a worker made up."""
    if management is None or not target.origin_uid:
        return False
    return Meta(management).uid == target.origin_uid


def _target(
    kind_name: str, key: str, found: Mapping[str, Any], subject: str = "", makes_pods: bool = True
) -> Target:
    meta = Meta(found)
    return Target(
        WorkloadKey(kind_name, key),
        meta.uid,
        _moment(meta.creation_timestamp),
        subject,
        makes_pods,
        meta.label(ORIGIN_UID_LABEL) or "",
    )


def _group(api_version: Any) -> str:
    text = str(api_version or "")
    return text.partition("/")[0] if "/" in text else ""


def _prefixes(name: str) -> Iterator[str]:
    """``a-b-c`` -> ``a-b``, ``a``: the names an object called ``name`` may be made for
    (pods are ``<job>-<random>``, ``<job>-<index>-<random>``; a JobSet's Jobs
    ``<jobset>-<replicated job>-<index>``), longest first."""
    while "-" in name:
        name = name.rpartition("-")[0]
        if name:
            yield name


def _mirror_target(
    kinds: Mapping[str, Resource],
    mirror: MirrorLookup,
    namespace: str,
    names: Sequence[str] | Iterator[str],
    *,
    subject: str,
    makes_pods: bool,
    skip_kind: str | None = None,
) -> Target | None:
    for name in names:
        key = f"{namespace}/{name}"
        for kind_name in kinds:
            if kind_name == skip_kind:
                continue
            found = mirror((kind_name, key))
            if found is not None:
                return _target(kind_name, key, found, subject, makes_pods)
    return None


def _owning_mirror(
    kinds: Mapping[str, Resource],
    mirror: MirrorLookup,
    namespace: str,
    owners: frozenset[tuple[str, str]],
    subject: str,
) -> Target | None:
    """The mirror one of ``owners`` (name, UID) is: same name *and* same UID."""
    for name, uid in sorted(owners):
        key = f"{namespace}/{name}"
        for kind_name in kinds:
            found = mirror((kind_name, key))
            if found is not None and uid and Meta(found).uid == uid:
                return _target(kind_name, key, found, subject, makes_pods=False)
    return None


def target_of(
    event: Mapping[str, Any],
    kinds: Mapping[str, Resource],
    mirror: MirrorLookup,
    pod_owners: PodOwners,
) -> Target | None:
    """The workload ``event`` concerns (``kinds``: the configured kinds by name), or None.

    About a mirror: its kind and name, and its UID when the Event names one (an
    Event about an earlier namesake is not this mirror's). About a Pod: the mirror
    whose UID owns it (``pod_owners``); an unknown pod, or one owned by nothing of
    ours, concerns nobody. About a Job that is no mirror: a mirror of another kind
    (a JobSet) its name starts with. Whom it may reach is :func:`speaks_for`'s call.
    """
    involved = _mapping(event.get("involvedObject"))
    namespace, name = str(involved.get("namespace") or ""), str(involved.get("name") or "")
    if not namespace or not name:
        return None
    what = (_group(involved.get("apiVersion")), str(involved.get("kind") or ""))
    if what == _POD:
        pod = pod_owners(namespace, name)
        if pod is None:
            return None
        pod_uid, owners = pod
        involved_uid = str(involved.get("uid") or "")
        if involved_uid and pod_uid and involved_uid != pod_uid:
            return None  # about an earlier pod of that name
        return _owning_mirror(kinds, mirror, namespace, owners, f"pod {name}")
    uid = str(involved.get("uid") or "")
    for kind_name, ref in kinds.items():
        if (ref.group, ref.kind) != what:
            continue
        found = mirror((kind_name, f"{namespace}/{name}"))
        if found is None:
            continue
        meta = Meta(found)
        if uid and meta.uid and uid != meta.uid:
            return None
        return _target(kind_name, f"{namespace}/{name}", found)
    if what == _JOB:
        job_kinds = [k for k, ref in kinds.items() if (ref.group, ref.kind) == _JOB]
        return _mirror_target(
            kinds, mirror, namespace, _prefixes(name), subject=f"job {name}", makes_pods=True,
            skip_kind=job_kinds[0] if job_kinds else None,
        )  # fmt: skip
    return None


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
    relayed: collections.OrderedDict[tuple[str, str, str], float] = field(
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
        message = str(event.get("message") or "").strip()
        prefix = f"{worker}: {target.subject}: " if target.subject else f"{worker}: "
        outgoing = Outgoing(
            target.key,
            "Warning" if event.get("type") != "Normal" else "Normal",
            str(event.get("reason") or "Unknown"),
            prefix + message,
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
                        f"{worker}: {total} more events not shown (rate limit): {detail}",
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
        signature = (outgoing.type, outgoing.reason, outgoing.message)
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
    text = " ".join(message.split())
    value = f"{worker}: {reason}: {text}"
    return value if len(value) <= _MAX_BLOCKED else value[: _MAX_BLOCKED - 3] + "..."


def has_active_pods(mirror: Mapping[str, Any]) -> bool:
    """Whether the mirror's status shows pods at work: a Job's ``active``, ``ready`` or
    ``succeeded``, a JobSet's replicated Jobs' ``active`` or ``ready``."""
    status = mirror.get("status") or {}
    if any(_positive(status.get(k)) for k in ("active", "ready", "succeeded")):
        return True
    return any(
        _positive(r.get("active")) or _positive(r.get("ready"))
        for r in status.get("replicatedJobsStatus") or ()
        if isinstance(r, Mapping)
    )


def _positive(value: Any) -> bool:
    return isinstance(value, int) and value > 0


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
