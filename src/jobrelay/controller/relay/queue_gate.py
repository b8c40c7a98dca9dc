"""Admission before placement: fleet-wide queues and the manager's ResourceQuotas.

A queued workload (its ``jobrelay.dev/queue`` label, or the queue whose namespace
selector takes its namespace) is first placed only when an admission pass admits it;
any delegated workload only when its namespace's ResourceQuotas on the manager allow
it. Admitted means placed (a placement annotation, or a live mirror) and not finished:
read from the caches at every pass, so a restart loses nothing. The one thing kept in
memory is conservative: workloads a reconcile was just told to place (``admitting``)
count as admitted until their placement shows, or for a short while, so two
reconciles at once never both take the last of a quota.

The pass runs on the runner's held-pass clock (at most once a second, when capacity
or queues change); a reconcile reads its verdict from the latest pass
(:meth:`QueueGate.hold`), and a workload no pass has seen yet waits for the next one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobrelay.controller.relay.queue_rules import (
    Priorities,
    entry_key,
    entry_named,
    limits_of,
    preempting_candidates,
    priority_of,
    slim_priority_class,
    slim_resource_quota,
)
from jobrelay.controller.relay.snapshot import Preempt, QueueHold
from jobrelay.fairshare.admission_rules import (
    AdmissionPass,
    admission_pass,
)
from jobrelay.fairshare.assignment_rules import (
    Queued,
    QueueNotAllowed,
    QueueNotFound,
    queue_for,
)
from jobrelay.fairshare.holding import Holding
from jobrelay.fairshare.model import Entry, Fleet, QueueSpec
from jobrelay.fairshare.namespace_quota import NamespaceLimits, quota_verdict, read_hard
from jobrelay.fairshare.preemption_rules import (
    plan_preemptions,
    preempted_notice,
    preempting_notice,
)
from jobrelay.fairshare.shares import fairness_error, queue_figures
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.types import JsonObj
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import PRIORITY_CLASSES, RESOURCE_QUOTAS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.placement.workload import Invalid, Workload, read_workload
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    PREEMPTED_BY_ANNOTATION,
    QUEUE_LABEL,
    REDISPATCH_ANNOTATION,
    REDISPATCH_NEVER,
)
from jobrelay.vocabulary.placement import placement_of

__all__ = [
    "ADMITTING_FOR",
    "Cache",
    "ClustersFor",
    "PreemptionRoom",
    "QueueGate",
    "QueueSource",
]

_log = logging.getLogger(__name__)

# How long a workload a reconcile was told to place counts as admitted before its
# placement shows in the cache (a placement is one write: seconds at most).
ADMITTING_FOR = 30.0


class Cache(Protocol):
    """What the gate reads of an informer's cache."""

    def values(self) -> list[dict[str, Any]]: ...


# The clusters' room after the pass, by resource, and for a waiting workload the clusters
# it could go to at all: asked only when a queue may preempt and someone waits.
ClustersFor = Callable[[WorkloadKey, Workload], Collection[str]]
PreemptionRoom = Callable[[], tuple[Mapping[str, Mapping[str, int]], ClustersFor]]


class QueueSource(Protocol):
    """The RelayQueues (fleet/relayqueues.py, ``RelayQueueCache``): their specs, and the
    figures each pass leaves for their status and the metrics."""

    figures: Mapping[str, Any]
    fairness_error: float | None

    def specs(self) -> dict[str, QueueSpec]: ...


@dataclass(frozen=True, slots=True)
class _Read:
    """A workload as the passes read it, once per resourceVersion (and priorities)."""

    version: tuple[str, int]
    workload: Workload | None
    entry: Entry | None
    # What its object says, read once: finished or being deleted, placed, suspended, and
    # the queue its label names.
    gone: bool = False
    cluster: str = ""  # where it is placed ("": not placed)
    suspended: bool = False
    named: str | None = None
    # The workload that preempted it (its mark), and whether it asks to run at most once.
    preempted_by: str = ""
    at_most_once: bool = False

    @property
    def placed(self) -> bool:
        return bool(self.cluster)


@dataclass(slots=True)
class _Pass:
    """What the latest pass said: who it admitted, why each other pending one waits."""

    admitted: set[str] = field(default_factory=set)
    # Why each waits, as the admission pass said it, with its position and queue: made
    # into the reconcile's QueueHold only when asked (most are never asked in a pass).
    holdings: Mapping[str, Holding] = field(default_factory=dict)
    positions: Mapping[str, int] = field(default_factory=dict)
    queue_of: Mapping[str, str] = field(default_factory=dict)
    # Holds said as they are: a namespace's quota, or preempting others.
    told: dict[str, QueueHold] = field(default_factory=dict)
    # Every entry it saw admitted (placed), by namespace: the quotas' counts.
    by_namespace: dict[str, list[Entry]] = field(default_factory=dict)

    def waits(self, key: str) -> bool:
        return key in self.told or key in self.holdings

    def holding(self, key: str) -> QueueHold:
        told = self.told.get(key)
        if told is not None:
            return told
        holding = self.holdings[key]
        position = self.positions.get(key)
        if not position:
            return QueueHold(holding.reason, holding.message)
        where = f" (position {position} in queue {self.queue_of.get(key, '')})"
        return QueueHold(holding.reason, holding.message + where)


class QueueGate:
    """See the module doc. The runner feeds it namespaces' labels, the caches of
    PriorityClasses and ResourceQuotas and the RelayQueues; the reconciler asks it."""

    def __init__(
        self,
        *,
        priority_classes: Cache,
        quotas: Cache,
        queues: QueueSource | None,
        mirrored: Callable[[WorkloadKey], bool],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._priority_classes = priority_classes
        self._quotas = quotas
        self.queues = queues
        self._mirrored = mirrored
        self._monotonic = monotonic
        self._labels: dict[str, Mapping[str, str]] = {}
        self._reads: dict[WorkloadKey, _Read] = {}
        self._priorities = Priorities()
        self._priorities_version = 0
        self._last: _Pass | None = None
        self._admitting: dict[WorkloadKey, tuple[float, Entry]] = {}
        # Each workload's entry as the last pass built it (reused while nothing changes).
        self._built: dict[WorkloadKey, Entry] = {}
        # Victims a pass chose whose reconcile has not marked them yet.
        self._preempting: dict[WorkloadKey, tuple[float, Preempt]] = {}
        # Called when a workload waits for a pass (the runner wakes its held pass).
        self.on_needed: Callable[[], None] = lambda: None

    @classmethod
    def watching(
        cls,
        manager: ApiClient,
        *,
        queues: QueueSource | None,
        mirrored: Callable[[WorkloadKey], bool],
    ) -> QueueGate:
        """A gate fed by informers of the manager's PriorityClasses and ResourceQuotas
        (slim); :meth:`start` them with the other caches."""
        priority_classes = Informer(manager, PRIORITY_CLASSES, transform=slim_priority_class)
        quotas = Informer(manager, RESOURCE_QUOTAS, transform=slim_resource_quota)
        gate = cls(priority_classes=priority_classes, quotas=quotas, queues=queues,
                   mirrored=mirrored)  # fmt: skip
        gate.informers = (priority_classes, quotas)

        def classes_changed(_event: InformerEvent) -> None:
            gate.priorities_changed()
            gate.on_needed()

        priority_classes.add_handler(classes_changed)
        quotas.add_handler(lambda _event: gate.on_needed())
        return gate

    # The caches it starts and stops with the others (none: fed by hand, as in tests).
    informers: tuple[Informer, ...] = ()

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    async def wait_synced(self) -> None:
        for informer in self.informers:
            await informer.wait_synced()

    async def stop(self) -> None:
        for informer in self.informers:
            await informer.stop()

    # -- what the runner feeds in ----------------------------------------------------

    def namespace_changed(self, namespace: str, labels: Mapping[str, str] | None) -> None:
        if labels is None:
            self._labels.pop(namespace, None)
        else:
            self._labels[namespace] = dict(labels)

    def priorities_changed(self) -> None:
        self._priorities = Priorities.of(self._priority_classes.values())
        self._priorities_version += 1

    def specs(self) -> dict[str, QueueSpec]:
        return self.queues.specs() if self.queues is not None else {}

    def queue_of(self, namespace: str, named: str) -> str:
        """The RelayQueue a workload of ``namespace`` labelled ``named`` waits in (by its
        label, else its namespace's labels); "" for none (the panel's QUEUE)."""
        choice = queue_for(named, namespace, self._labels.get(namespace, {}), self.specs())
        return choice.queue if isinstance(choice, Queued) else named

    def idle(self) -> bool:
        """No RelayQueue and no ResourceQuota on the manager: every workload is placed as
        it comes, and the held pass need not read every workload. (A verdict of a pass
        made before is forgotten: the first queue or quota starts from a fresh one.)"""
        if self.specs() or self._quotas.values():
            return False
        self._last = None
        return True

    # -- a reconcile's verdict ----------------------------------------------------------

    def hold(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj) -> QueueHold | None:
        """Why ``key`` (not placed yet, not suspended) may not be placed now; None: it may.

        Its queue must exist and take its namespace, its namespace's quotas allow it
        (counting the admitted and those being placed), and the latest pass admit it."""
        read = self._read(key, kind, obj)
        if read.entry is None:
            return None  # templates placement cannot read: it says why
        entry = read.entry
        specs = self.specs()
        choice = queue_for(Meta(obj).label(QUEUE_LABEL), key.namespace,
                           self._labels.get(key.namespace, {}), specs)  # fmt: skip
        refused = _refusal(choice)
        if refused is not None:
            return refused
        if key in self._admitting:
            return None  # admitted already: its placement is on its way
        hard = self._hard(key.namespace)
        queued = isinstance(choice, Queued)
        if not queued and not hard:
            return None
        last = self._last
        if last is None or (
            queued and entry.key not in last.admitted and not last.waits(entry.key)
        ):
            self.on_needed()
            return QueueHold("", "", settled=False)
        if queued and entry.key not in last.admitted:
            return last.holding(entry.key)
        if hard is not None:
            counted = self._counted(key.namespace, last, but=key, but_entry=entry.key)
            verdict = quota_verdict(hard, counted, entry)
            if verdict is not None:
                return QueueHold(verdict.reason, verdict.message)
        self._admitting[key] = (self._monotonic(), entry)
        return None

    def not_placed(self, key: WorkloadKey) -> None:
        """Its reconcile held it after all (no cluster takes it now): it takes no quota."""
        self._admitting.pop(key, None)

    # -- the pass -----------------------------------------------------------------------

    def run_pass(
        self,
        objects: Iterable[tuple[WorkloadKey, WorkloadKind, JsonObj]],
        held: Iterable[WorkloadKey],
        fits: Callable[[WorkloadKey, Workload], bool],
        fleet: Fleet,
        room: PreemptionRoom | None = None,
    ) -> list[WorkloadKey]:
        """One admission pass: the queued pending workloads across queues (the fair order
        of :func:`fairshare.admission_rules.admission_pass`), then the unqueued ``held``
        ones oldest first, each admitted only if its namespace's quotas allow it and
        ``fits`` (placement's check, taking room). Then, given the clusters' ``room``,
        whom the queues that allow it preempt for those that wait
        (:func:`fairshare.preemption_rules.plan_preemptions`). The keys to place, in
        order, then the victims to preempt."""
        specs = self.specs()
        self._expire_admitting()
        hard = self._hard_by_namespace()
        by_key: dict[str, tuple[WorkloadKey, Workload]] = {}
        keys: dict[str, WorkloadKey] = {}
        entries: list[Entry] = []
        unqueued: dict[WorkloadKey, Entry] = {}
        done = _Pass()
        # Namespaces' labels do not change during a pass: each (label, namespace) is
        # judged once.
        choices: dict[tuple[str | None, str], object] = {}
        built = self._built
        for key, kind, obj in objects:
            read = self._read(key, kind, obj)
            if read.entry is None or read.workload is None:
                continue
            admitted = self._admitted(key, read)
            if admitted is None:
                continue  # finished, suspended before a placement, or going
            choice = choices.get((read.named, key.namespace))
            if choice is None:
                choice = choices[(read.named, key.namespace)] = queue_for(
                    read.named, key.namespace, self._labels.get(key.namespace, {}), specs
                )
            queue = choice.queue if isinstance(choice, Queued) else ""
            leaving = admitted and (bool(read.preempted_by) or key in self._preempting)
            entry = _with(built.get(key), read, queue=queue, admitted=admitted, leaving=leaving)
            built[key] = entry
            if admitted:
                done.by_namespace.setdefault(key.namespace, []).append(entry)
            if queue:
                entries.append(entry)
                keys[entry.key] = key
                if not admitted:
                    by_key[entry.key] = (key, read.workload)
            elif not admitted and _refusal(choice) is None:
                unqueued[key] = entry
        quota_holds = done.told

        def admit(entry: Entry, key: WorkloadKey, workload: Workload) -> bool:
            limits = hard.get(entry.namespace)
            if limits is not None:
                counted = done.by_namespace.get(entry.namespace, [])
                verdict = quota_verdict(limits, counted, entry)
                if verdict is not None:
                    quota_holds[entry.key] = QueueHold(verdict.reason, verdict.message)
                    return False
            if not fits(key, workload):
                return False
            done.by_namespace.setdefault(entry.namespace, []).append(entry)
            return True

        chosen: list[WorkloadKey] = []
        if by_key:
            result = admission_pass(specs, entries, fleet, fits=lambda e: admit(e, *by_key[e.key]))
            for admitted_key in result.admitted:
                done.admitted.add(admitted_key)
                chosen.append(by_key[admitted_key][0])
            done.holdings, done.positions = result.holding, result.positions
            done.queue_of = {e.key: e.queue for e in entries}
            if room is not None:
                chosen.extend(self._preempt(specs, entries, result, fleet, room, keys, done))
        for held_key in held:
            waiting_entry = unqueued.get(held_key)
            held_read = self._reads.get(held_key)
            if waiting_entry is None or held_read is None or held_read.workload is None:
                continue
            if admit(waiting_entry, held_key, held_read.workload):
                chosen.append(held_key)
        self._last = done
        if self.queues is not None and specs:
            # Restart-safe figures: the entries as the caches show them (admitted: placed).
            figures = queue_figures(specs, entries, fleet)
            self.queues.figures = figures
            self.queues.fairness_error = fairness_error(figures)
        return chosen

    def _preempt(
        self,
        specs: Mapping[str, QueueSpec],
        entries: list[Entry],
        result: AdmissionPass,
        fleet: Fleet,
        room: PreemptionRoom,
        keys: Mapping[str, WorkloadKey],
        done: _Pass,
    ) -> list[WorkloadKey]:
        """Whom to preempt now, told to the victims' reconciles (:meth:`preemption`);
        the winners, their own victims leaving, are held as ``Preempting``."""
        self._expire_preempting()
        by_winner: dict[str, list[str]] = {}
        for entry in entries:
            if entry.leaving:
                read = self._reads.get(keys[entry.key])
                told = self._preempting.get(keys[entry.key])
                winner = (read.preempted_by if read else "") or (told[1].by if told else "")
                by_winner.setdefault(winner, []).append(entry.key)
        waiting = preempting_candidates(specs, entries, result)
        victims: list[WorkloadKey] = []
        if waiting:
            # Planned for those that wait now, after those this pass admitted took room.
            free, could_take = room()

            def clusters_for(entry: Entry) -> Collection[str]:
                read = self._reads.get(keys[entry.key])
                workload = read.workload if read is not None else None
                return () if workload is None else could_take(keys[entry.key], workload)

            for found in plan_preemptions(waiting, specs, entries, fleet, free=free,
                                          clusters_for=clusters_for):  # fmt: skip
                for victim in found.victims:
                    notice = preempted_notice(victim, found.winner)
                    preempt = Preempt(found.winner.key, notice.message)
                    self._preempting[keys[victim.key]] = (self._monotonic(), preempt)
                    victims.append(keys[victim.key])
                    by_winner.setdefault(found.winner.key, []).append(victim.key)
        for winner, its_victims in by_winner.items():
            if done.waits(winner):
                notice = preempting_notice(entry_named(entries, winner), its_victims)
                done.told[winner] = QueueHold(notice.reason, notice.message, event_type="Normal")
        return victims

    def preemption(self, key: WorkloadKey) -> Preempt | None:
        """Whether an admission pass chose ``key`` (placed) as a victim and its mark is not
        written yet: by whom and why."""
        told = self._preempting.get(key)
        return told[1] if told is not None else None

    def _expire_preempting(self) -> None:
        now = self._monotonic()
        for key, (since, _told) in list(self._preempting.items()):
            read = self._reads.get(key)
            if now - since > ADMITTING_FOR or read is None or read.preempted_by or not read.placed:
                del self._preempting[key]  # marked (the object says it now), or gone

    # -- reading ---------------------------------------------------------------------------

    def _read(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj) -> _Read:
        meta = Meta(obj)
        version = (str(meta.resource_version), self._priorities_version)
        cached = self._reads.get(key)
        if cached is not None and cached.version == version:
            return cached
        workload = read_workload(kind, obj)
        said = _Read(
            version, None, None,
            gone=bool(meta.deletion_timestamp) or kind.is_finished(obj),
            cluster=placement_of(obj), suspended=kind.is_suspended(obj),
            named=meta.label(QUEUE_LABEL),
            preempted_by=(meta.annotation(PREEMPTED_BY_ANNOTATION) or "").strip(),
            at_most_once=(meta.annotation(REDISPATCH_ANNOTATION) or "").strip() == REDISPATCH_NEVER,
        )  # fmt: skip
        if isinstance(workload, Invalid):
            read = said
        else:
            try:
                priority = priority_of(kind.pod_templates(obj), self._priorities)
            except (AttributeError, TypeError, ValueError, KeyError, IndexError):
                priority = 0
            try:
                limits = limits_of(kind, obj)
            except (AttributeError, TypeError, ValueError, KeyError, IndexError):
                limits = {}  # its requests were read: placement says what else is wrong
            entry = Entry(
                key=entry_key(key, kind),
                queue="",
                namespace=key.namespace,
                priority=priority,
                created=str(meta.creation_timestamp or ""),
                requests=workload.demand,
                limits=limits,
            )
            read = dataclasses.replace(said, workload=workload, entry=entry)
        self._reads[key] = read
        return read

    @staticmethod
    def released(kind: WorkloadKind, old: JsonObj, new: JsonObj | None) -> bool:
        """Whether a watch event frees what a workload took of its queue and quota (it
        finished, or went): a pass may admit others (no worker's capacity need change,
        the Job's own status comes last)."""
        if new is None:
            return True
        return kind.is_finished(new) and not kind.is_finished(old)

    def forget(self, key: WorkloadKey) -> None:
        """Its management object is gone."""
        self._reads.pop(key, None)
        self._built.pop(key, None)
        self._admitting.pop(key, None)

    def _admitted(self, key: WorkloadKey, read: _Read) -> bool | None:
        """Admitted (placed, or a live mirror, and not finished); pending (False); or
        neither (None: finished, suspended before its first placement, being deleted)."""
        if read.gone:
            self._admitting.pop(key, None)  # it takes nothing any more
            return None
        if read.placed or self._mirrored(key):
            self._admitting.pop(key, None)  # the cache shows it: counted as placed
            return True
        if read.suspended:
            return None
        return key in self._admitting

    def _hard(self, namespace: str) -> NamespaceLimits | None:
        """What the ResourceQuotas of ``namespace`` on the manager allow (the lowest of
        each value), or None when it has none."""
        return self._hard_by_namespace().get(namespace)

    def _hard_by_namespace(self) -> dict[str, NamespaceLimits]:
        hards: dict[str, list[Mapping[str, Any]]] = {}
        for quota in self._quotas.values():
            namespace = str((quota.get("metadata") or {}).get("namespace"))
            hards.setdefault(namespace, []).append((quota.get("spec") or {}).get("hard") or {})
        return {namespace: read_hard(*found) for namespace, found in hards.items()}

    def _counted(
        self, namespace: str, last: _Pass, *, but: WorkloadKey, but_entry: str
    ) -> list[Entry]:
        counted = [e for e in last.by_namespace.get(namespace, []) if e.key != but_entry]
        seen = {e.key for e in counted}
        for key, (_since, entry) in self._admitting.items():
            if key.namespace == namespace and key != but and entry.key not in seen:
                counted.append(entry)
        return counted

    def _expire_admitting(self) -> None:
        now = self._monotonic()
        for key in [k for k, (since, _e) in self._admitting.items() if now - since > ADMITTING_FOR]:
            del self._admitting[key]


def _with(before: Entry | None, read: _Read, *, queue: str, admitted: bool, leaving: bool) -> Entry:
    """``read``'s entry in ``queue``, as the pass sees it: the one the pass before built
    when nothing of it changed (most passes change nothing of most entries: no copy)."""
    entry = read.entry
    assert entry is not None
    preemptible = not read.at_most_once
    if before is not None and (
        before.priority, before.created, before.requests, before.limits,
        before.queue, before.admitted, before.cluster, before.preemptible, before.leaving,
    ) == (
        entry.priority, entry.created, entry.requests, entry.limits,
        queue, admitted, read.cluster, preemptible, leaving,
    ):  # fmt: skip
        return before
    return Entry(
        key=entry.key, queue=queue, namespace=entry.namespace, priority=entry.priority,
        created=entry.created, requests=entry.requests, limits=entry.limits, admitted=admitted,
        cluster=read.cluster, preemptible=preemptible, leaving=leaving,
    )  # fmt: skip


def _refusal(choice: object) -> QueueHold | None:
    """A queue that does not exist, or does not take the workload's namespace."""
    if isinstance(choice, QueueNotFound):
        return QueueHold("QueueNotFound", choice.message)
    if isinstance(choice, QueueNotAllowed):
        return QueueHold("QueueNotAllowed", choice.message)
    return None
