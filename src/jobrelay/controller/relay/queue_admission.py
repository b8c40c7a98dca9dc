"""Admission before placement, run: fleet-wide queues and the manager's ResourceQuotas.

The rules are :mod:`jobrelay.admission`'s (pure); this is the thin I/O around them. It
reads the caches (PriorityClasses and ResourceQuotas, by informers of its own; the
RelayQueues; the namespaces' labels the runner feeds), builds the
:class:`~jobrelay.admission.planner.AdmissionView`, runs
:func:`~jobrelay.admission.planner.plan` and keeps the plan in the relay's memory
(``RelayMemory.queues``), where the RelayQueues' status writer and the metrics read its
figures. The pass runs on the runner's held-pass clock (at most once a second, when
capacity, queues or quotas change).

A reconcile reads its verdict from the last plan (:meth:`verdict`, changing nothing); a
workload no plan has judged yet waits for the next (the reconciler wakes the pass:
:meth:`needed`). When a reconcile decides to place a workload, :meth:`admit` checks the
verdict again and marks it being placed, in one step, so two reconciles at once never
both take the last of a quota. Admitted means placed (a placement annotation, or a live
mirror) and not finished, read from the caches at every pass: a restart loses nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any, Protocol

from jobrelay.admission.namespace_quota import NamespaceLimits, read_hard
from jobrelay.admission.planner import AdmissionView, Fits, Judged, PreemptionRoom, plan
from jobrelay.admission.priority_classes import priority_class_refusal, stated_priority_classes
from jobrelay.admission.queue_choice import Queued, queue_for, queue_name, refusal
from jobrelay.admission.queue_model import Fleet, Preempt, QueueHold, QueueSpec
from jobrelay.admission.shares import QueueFigures
from jobrelay.admission.verdicts import bound, queue_verdict
from jobrelay.admission.workload_reads import (
    Priorities,
    WorkloadRead,
    read_for_admission,
    released,
    slim_priority_class,
    slim_resource_quota,
)
from jobrelay.controller.relay.memory import QueueMemory
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import PRIORITY_CLASSES, RESOURCE_QUOTAS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.vocabulary.collection_pause import collection_paused
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import QUEUE_LABEL

__all__ = ["Cache", "QueueAdmission", "QueueSource"]


class Cache(Protocol):
    """What admission reads of an informer's cache."""

    def values(self) -> list[dict[str, Any]]: ...


class KindCache(Protocol):
    """One kind's cached objects as a pass reads them: each by ``namespace/name``."""

    def items(self) -> Iterable[tuple[str, JsonObj]]: ...


class QueueSource(Protocol):
    """The RelayQueues (fleet/relayqueues.py, ``RelayQueueCache``): the valid ones."""

    def specs(self) -> dict[str, QueueSpec]: ...


class QueueAdmission:
    """See the module doc. The runner feeds it namespaces' labels; the reconciler asks it."""

    def __init__(
        self,
        *,
        priority_classes: Cache,
        quotas: Cache,
        queues: QueueSource | None,
        mirror_keys: Callable[[], Container[WorkloadKey]],
        memory: QueueMemory,
    ) -> None:
        self._priority_classes = priority_classes
        self._quotas = quotas
        self.queues = queues
        # The key of every mirror some worker's cache holds: asked once a pass (a lookup
        # per held workload per worker would grow with both).
        self._mirror_keys = mirror_keys
        self.memory = memory
        self._labels: dict[str, Mapping[str, str]] = {}
        self._priorities = Priorities()
        self._priorities_version = 0
        # Called when a workload waits for a pass (the runner wakes its held pass).
        self.on_needed: Callable[[], None] = lambda: None

    @classmethod
    def watching(
        cls,
        manager: ApiClient,
        *,
        queues: QueueSource | None,
        mirror_keys: Callable[[], Container[WorkloadKey]],
        memory: QueueMemory,
    ) -> QueueAdmission:
        """Fed by informers of the manager's PriorityClasses and ResourceQuotas (slim);
        :meth:`start` them with the other caches."""
        priority_classes = Informer(manager, PRIORITY_CLASSES, transform=slim_priority_class)
        quotas = Informer(manager, RESOURCE_QUOTAS, transform=slim_resource_quota)
        made = cls(priority_classes=priority_classes, quotas=quotas, queues=queues,
                   mirror_keys=mirror_keys, memory=memory)  # fmt: skip
        made.informers = (priority_classes, quotas)

        def classes_changed(_event: InformerEvent) -> None:
            made.priorities_changed()
            made.needed()

        priority_classes.add_handler(classes_changed)
        quotas.add_handler(lambda _event: made.needed())
        return made

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

    def needed(self) -> None:
        """A workload waits for a pass, or what passes read changed: a pass, soon."""
        self.on_needed()

    released = staticmethod(released)

    def forget(self, key: WorkloadKey) -> None:
        """Its management object is gone."""
        self.memory.forget(key)

    # -- what others read ----------------------------------------------------------------

    def specs(self) -> dict[str, QueueSpec]:
        return self.queues.specs() if self.queues is not None else {}

    def queue_of(self, namespace: str, named: str) -> str:
        """The RelayQueue a workload of ``namespace`` labelled ``named`` waits in; "" for
        none (the panel's QUEUE, as `jobrelay get` says it)."""
        return queue_name(named, namespace, self._labels.get(namespace, {}), self.specs())

    def figures(self) -> Mapping[str, QueueFigures]:
        """Each queue's figures as the last plan says them ({} before one)."""
        last = self.memory.last
        return last.figures if last is not None else {}

    def idle(self) -> bool:
        """No RelayQueue and no ResourceQuota on the manager: every workload is placed as
        it comes, and the held pass need not read every workload. (The last plan is
        forgotten: the first queue or quota starts from a fresh one.)"""
        if self.specs() or self._quotas.values():
            return False
        self.memory.last = None
        return True

    # -- a reconcile's verdict ----------------------------------------------------------

    def verdict(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj) -> QueueHold | None:
        """Why ``key`` (not placed yet, not suspended) may not be placed now, from the
        last plan (None: it may); changes nothing."""
        return self._judge(key, kind, obj, keep=False)[0]

    def preemption(self, key: WorkloadKey) -> Preempt | None:
        """Whether a plan chose ``key`` (placed) as a victim and its mark is not written
        yet: by whom and why."""
        return self.memory.preemption(key)

    def admit(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj) -> QueueHold | None:
        """Its reconcile decided to place ``key``: the verdict again (None: it may), and,
        when admission bounds it, it is marked being placed (one step, no wait between)."""
        hold, read = self._judge(key, kind, obj, keep=True)
        if hold is None and read is not None and read.entry is not None:
            self.memory.admit(key, read.entry)
        return hold

    def not_placed(self, key: WorkloadKey) -> None:
        """Its reconcile held it after all (no cluster takes it now): it takes no quota."""
        self.memory.not_placed(key)

    def _judge(
        self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj, *, keep: bool
    ) -> tuple[QueueHold | None, WorkloadRead | None]:
        """The verdict, and the workload as read when admission bounds it (None: it
        does not: no queue takes it and its namespace has no quota, nothing is read)."""
        labels = self._labels.get(key.namespace, {})
        specs = self.specs()
        choice = queue_for(Meta(obj).label(QUEUE_LABEL), key.namespace, labels, specs)
        refused = refusal(choice)
        if refused is None:
            queue = specs.get(choice.queue) if isinstance(choice, Queued) else None
            refused = self._class_refusal(kind, obj, queue)
            if refused is not None:
                return refused, None  # whatever its queue or quota: never placed
        limits = self._hard_by_namespace().get(key.namespace)
        if refused is None and not bound(choice, limits):
            return None, None  # placed as it comes: not worth reading its templates
        read = self._read(key, kind, obj, keep=keep)
        memory = self.memory
        hold = queue_verdict(key, read, choice, last=memory.last, limits=limits,
                             admitting=memory.admitting)  # fmt: skip
        return hold, read

    @staticmethod
    def _class_refusal(kind: WorkloadKind, obj: JsonObj, queue: QueueSpec | None
                       ) -> QueueHold | None:  # fmt: skip
        """Its PriorityClasses refused (system ones, or not in its queue's list)."""
        try:
            classes = stated_priority_classes(kind.pod_templates(obj))
        except (AttributeError, TypeError, ValueError, KeyError, IndexError):
            return None  # templates placement cannot read: it says why
        return priority_class_refusal(classes, queue)

    # -- the pass -----------------------------------------------------------------------

    def run_pass(
        self,
        caches: Iterable[tuple[str, WorkloadKind, KindCache]],
        held: Iterable[WorkloadKey],
        fits: Fits,
        fleet: Fleet,
        room: PreemptionRoom | None,
        still_held: Callable[[WorkloadKey], bool],
    ) -> list[WorkloadKey]:
        """One admission pass (:func:`jobrelay.admission.planner.plan`) over the caches
        (each kind's name, adapter, and cached objects by ``namespace/name``); the plan
        kept. The keys to look at now: those to place, in order, and the victims to
        preempt. ``still_held(key)``: whether pods of a run of ``key`` are still counted
        on some worker (a requeued victim's room not free yet)."""
        with collection_paused():  # its garbage is freed by reference counts as it ends
            memory = self.memory
            mirrored = self._mirror_keys()
            workloads: list[Judged] = []
            requeued: dict[WorkloadKey, str] = {}
            version = self._priorities_version
            for name, kind, cache in caches:
                reads = memory.reads_of(name)
                for at, obj in cache.items():
                    read = reads.get(at)  # inline, the common case: nothing of it changed
                    if read is None or read.source is not obj or read.version[1] != version:
                        read = self._read(WorkloadKey(name, at), kind, obj)
                    if read.entry is None or read.workload is None:
                        continue
                    key = read.key
                    admitted = self._admitted(key, read, mirrored)
                    if admitted is not None:
                        workloads.append((key, read, admitted))
                        if not admitted and read.preempted_by:
                            requeued[key] = read.preempted_by  # a victim back in its queue
            memory.expire()
            last = memory.last
            view = AdmissionView(
                specs=self.specs(),
                namespace_labels=self._labels,
                quotas=self._hard_by_namespace(),
                fleet=fleet,
                workloads=workloads,
                held=list(held),
                fits=fits,
                room=room,
                preempting={key: told for key, (_since, told) in memory.preempting.items()},
                built=last.entries if last is not None else {},
                settling=memory.settling(requeued, still_held),
                nominated=last.nominated if last is not None else frozenset(),
                sorted_before=last.sorting if last is not None else None,
            )
            made = memory.last = plan(view)
            memory.chose(made.victims)
            return list(made.wake)

    def _admitted(
        self, key: WorkloadKey, read: WorkloadRead, mirrored: Container[WorkloadKey]
    ) -> bool | None:
        """Admitted (placed, or a live mirror, and not finished, or being placed);
        pending (False); or neither (None: finished, suspended before its first
        placement, being deleted). What the caches now show is no longer being placed."""
        if read.gone:
            self.memory.not_placed(key)  # it takes nothing any more
            return None
        if key in mirrored or (read.placed and not read.preset):
            self.memory.not_placed(key)  # the cache shows it: counted as placed
            return True
        if read.suspended:
            return None
        # A preset placement (no mirror yet) is pending: admission judges it as unplaced.
        return key in self.memory.admitting

    # -- reading ---------------------------------------------------------------------------

    def _read(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj, *, keep: bool = True
              ) -> WorkloadRead:  # fmt: skip
        """``obj`` as admission reads it, once per resourceVersion (and priorities);
        ``keep``: remembered for the next (a snapshot's read is not)."""
        cached = self.memory.read(key)
        if cached is not None and cached.version[1] == self._priorities_version:
            if cached.source is obj:  # the cache's very object: nothing of it changed
                return cached
            if cached.version[0] == str(Meta(obj).resource_version):  # a relist's copy
                cached = dataclasses.replace(cached, source=obj)
                if keep:
                    self.memory.keep(cached)
                return cached
        read = read_for_admission(key, kind, obj, self._priorities, self._priorities_version)
        if keep:
            self.memory.keep(read)
        return read

    def _hard_by_namespace(self) -> dict[str, NamespaceLimits]:
        """What each namespace's ResourceQuotas on the manager allow (the lowest of each
        value); a namespace without one is not there."""
        hards: dict[str, list[Mapping[str, Any]]] = {}
        for quota in self._quotas.values():
            namespace = str((quota.get("metadata") or {}).get("namespace"))
            hards.setdefault(namespace, []).append((quota.get("spec") or {}).get("hard") or {})
        return {namespace: read_hard(*found) for namespace, found in hards.items()}
