"""What the apiservers' watch streams say about each benchmark Job, stamped on arrival.

Every timestamp is ``time.monotonic()`` in this (the bench) process when the
event was received: the manager Job's ADDED, the mirror's ADDED on a worker,
every change of either's status, the mirror's DELETED. Second-granular
``creationTimestamp``s play no part.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import JOBS
from jobrelay.kube.watching import Change, Informer, InformerEvent, InformerOptions

# (active, succeeded, failed, types of the conditions that are True): what a
# status change is matched on between a mirror and its management Job.
Summary = tuple[int, int, int, tuple[str, ...]]

# The Job's own Suspended condition follows its own spec, never the mirror's.
_NOT_COPIED_CONDITIONS = frozenset({"Suspended"})
_FINISHED = frozenset({"Complete", "Failed"})


def summary(status: Mapping[str, Any]) -> Summary:
    types = tuple(
        sorted(
            str(c.get("type"))
            for c in status.get("conditions") or ()
            if c.get("status") == "True" and c.get("type") not in _NOT_COPIED_CONDITIONS
        )
    )
    return (
        int(status.get("active") or 0),
        int(status.get("succeeded") or 0),
        int(status.get("failed") or 0),
        types,
    )


def copied_status(status: Mapping[str, Any]) -> str:
    """The part of a mirror status jobrelay copies, canonical: one write per distinct value."""
    kept: dict[str, Any] = {}
    for key in ("active", "ready", "terminating", "succeeded", "failed"):
        if status.get(key):
            kept[key] = status[key]
    uncounted = {k: v for k, v in (status.get("uncountedTerminatedPods") or {}).items() if v}
    if uncounted:
        kept["uncountedTerminatedPods"] = uncounted
    for key in ("startTime", "completionTime", "completedIndexes", "failedIndexes"):
        if status.get(key):
            kept[key] = status[key]
    conditions = sorted(
        (str(c.get("type")), str(c.get("status")), str(c.get("reason", "")))
        for c in status.get("conditions") or ()
        if c.get("type") not in _NOT_COPIED_CONDITIONS
    )
    if conditions:
        kept["conditions"] = conditions
    return json.dumps(kept, sort_keys=True)


def outcome_of(status: Mapping[str, Any]) -> str | None:
    for c in status.get("conditions") or ():
        if c.get("type") in _FINISHED and c.get("status") == "True":
            return str(c.get("type"))
    return None


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """Informer transform: identity, suspend and status are all the bench reads."""
    metadata = obj.get("metadata") or {}
    return {
        "metadata": {
            key: metadata[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
            if key in metadata
        },
        "spec": {"suspend": bool((obj.get("spec") or {}).get("suspend"))},
        "status": obj.get("status") or {},
    }


@dataclass(slots=True)
class Trace:
    """One benchmark Job, as seen by the bench (all times ``time.monotonic()``)."""

    key: str
    submitted: float = math.nan  # create (or resume) request sent
    accepted: float = math.nan  # its response received
    added: float = math.nan  # ADDED of the Job itself (manager; worker for the baseline)
    cluster: str = ""  # where it ran: the mirror's worker (or, for the baseline, the Job's)
    mirror_added: float = math.nan
    mirror_deleted: float = math.nan
    finished: float = math.nan  # first version of the Job itself showing Complete/Failed
    outcome: str = ""
    # Status summary changes of the Job itself and of its mirror, with arrival times;
    # the first entry of each is its state when it appeared.
    states: list[tuple[float, Summary]] = field(default_factory=list)
    mirror_states: list[tuple[float, Summary]] = field(default_factory=list)
    # Distinct values of what jobrelay copies from the mirror (the empty one excluded).
    mirror_copied: set[str] = field(default_factory=set)
    suspended_seen: float = math.nan  # first version showing Suspended=True (scale scenario)

    @property
    def dispatch_latency(self) -> float:
        return self.mirror_added - self.added


class Recorder:
    """Watches one namespace: the Jobs themselves on one cluster, mirrors on the workers.

    ``mirror_selector`` is the mirrors' label selector; None for a baseline
    run, where the Jobs themselves live on the workers and there are no mirrors.
    """

    def __init__(
        self,
        namespace: str,
        sources: Mapping[str, ApiClient],
        mirrors: Mapping[str, ApiClient],
        mirror_selector: str | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.namespace = namespace
        self.traces: dict[str, Trace] = {}
        self._clock = clock
        self.informers: list[Informer] = []
        options = InformerOptions(watch_timeout_seconds=1800, inactivity_timeout=150.0)
        for cluster, client in sources.items():
            informer = Informer(client, JOBS, namespace=namespace, transform=slim, options=options)
            informer.add_handler(self._source_handler(cluster))
            self.informers.append(informer)
        for cluster, client in mirrors.items():
            informer = Informer(
                client,
                JOBS,
                namespace=namespace,
                label_selector=mirror_selector,
                transform=slim,
                options=options,
            )
            informer.add_handler(self._mirror_handler(cluster))
            self.informers.append(informer)
        self.finished_count = 0
        self.suspended_count = 0

    def trace(self, key: str) -> Trace:
        found = self.traces.get(key)
        if found is None:
            found = self.traces[key] = Trace(key)
        return found

    async def start(self) -> None:
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            await informer.wait_synced()

    async def stop(self) -> None:
        for informer in self.informers:
            await informer.stop()

    # -- handlers -----------------------------------------------------------------

    def _source_handler(self, cluster: str) -> Callable[[InformerEvent], None]:
        def handle(event: InformerEvent) -> None:
            now = self._clock()
            trace = self.trace(event.key)
            if event.change is Change.ADDED and math.isnan(trace.added):
                trace.added = now
                if not trace.cluster:
                    trace.cluster = cluster
            if event.new is None:
                return
            status = event.new.get("status") or {}
            state = summary(status)
            if not trace.states or trace.states[-1][1] != state:
                trace.states.append((now, state))
            if math.isnan(trace.finished):
                outcome = outcome_of(status)
                if outcome is not None:
                    trace.finished, trace.outcome = now, outcome
                    self.finished_count += 1
            if math.isnan(trace.suspended_seen) and any(
                c.get("type") == "Suspended" and c.get("status") == "True"
                for c in status.get("conditions") or ()
            ):
                trace.suspended_seen = now
                self.suspended_count += 1

        return handle

    def _mirror_handler(self, cluster: str) -> Callable[[InformerEvent], None]:
        def handle(event: InformerEvent) -> None:
            now = self._clock()
            trace = self.trace(event.key)
            if event.change is Change.ADDED and math.isnan(trace.mirror_added):
                trace.mirror_added = now
                trace.cluster = cluster
            if event.change is Change.DELETED:
                trace.mirror_deleted = now
            status = event.obj.get("status") or {}
            state = summary(status)
            if not trace.mirror_states or trace.mirror_states[-1][1] != state:
                trace.mirror_states.append((now, state))
            copied = copied_status(status)
            if copied != "{}":
                trace.mirror_copied.add(copied)

        return handle


def status_latencies(trace: Trace) -> tuple[list[float], int, int]:
    """How long each change of the mirror's status took to show on the management Job.

    For each change of the mirror's summary (after its first state), the wait
    until the management Job first shows that summary, or a later one of the
    mirror (jobrelay may skip a state that the mirror left before it was
    copied: the user then sees the newer one). Returns (latencies, how many
    were superseded that way, how many never showed at all).
    """
    changes = trace.mirror_states[1:]
    manager = trace.states
    latencies: list[float] = []
    superseded = missing = 0
    position = 0
    for index, (seen, state) in enumerate(changes):
        later = {s for _, s in changes[index:]}
        found = next((k for k in range(position, len(manager)) if manager[k][1] in later), None)
        if found is None:
            missing += 1
            continue
        exact = manager[found][1] == state
        latencies.append(manager[found][0] - seen)
        if exact:
            position = found + 1
        else:
            superseded += 1
            position = found
    return latencies, superseded, missing


def completion_latency(trace: Trace) -> float:
    """From the mirror first seen finished (Complete or Failed) to the Job itself seen
    finished: the status half of what a user waits for. NaN when either is missing."""
    finished_at = next(
        (at for at, state in trace.mirror_states if _FINISHED.intersection(state[3])), math.nan
    )
    return trace.finished - finished_at
