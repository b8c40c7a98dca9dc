"""Which work each watch event sets going: the lane a management object's change goes
to, and what a namespace's, a RelayQueue's or a mirror's change wakes.

The handlers run on the informers' events, in the event loop, between two awaits:
they only read the caches and the relay's memory and queue keys (no I/O).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jobrelay.controller.instrument import Instruments
from jobrelay.controller.lanes import lane_of_change
from jobrelay.controller.relay.dependency_sources import DependencySources
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.queue_admission import QueueAdmission
from jobrelay.controller.relay.reconciler import KindRuntime, Reconciler
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kinds import WorkloadKey
from jobrelay.kube.queueing import Lane, WorkQueue
from jobrelay.kube.watching import InformerEvent
from jobrelay.vocabulary.meta import Meta

__all__ = ["ChangeRouting"]


@dataclass
class ChangeRouting:
    """The controller's watch-event handlers (see the module doc)."""

    kinds: Mapping[str, KindRuntime]
    queue: WorkQueue[WorkloadKey]
    pool: WorkerPool
    memory: RelayMemory
    sources: DependencySources
    queue_admission: QueueAdmission
    reconciler: Reconciler
    instruments: Instruments
    # Set to have the held workloads looked at again (leader_passes.place_held).
    capacity_changed: asyncio.Event
    may_write: Callable[[], bool]

    def workload_handler(self, kind: str) -> Callable[[InformerEvent], None]:
        """The handler of ``kind``'s management informer."""
        runtime = self.kinds[kind]

        def changed(event: InformerEvent) -> None:
            key = WorkloadKey(kind, event.key)
            self.sources.workload_changed(key, runtime.kind, event.new)
            if event.new is None:
                self.queue_admission.forget(key)
                self.memory.own_writes.forget(key)
                self.memory.workload_gone(key)
            if event.old is not None and self.queue_admission.released(
                runtime.kind, event.old, event.new
            ):
                self.capacity_changed.set()  # its queue's usage and its namespace's quota freed
            if event.new is not None and self.memory.own_writes.is_echo(
                key, Meta(event.new).resource_version
            ):
                return  # the reconcile that wrote it decided with it (relay/own_writes.py)
            lane = lane_of_change(
                runtime.kind,
                event.old,
                event.new,
                mirrored=self.pool.has_mirror(key),
                placed_here=self.memory.reservations.cluster_of(key),
            )
            if event.new is not None and self.memory.own_writes.defer(
                key, Meta(event.new).resource_version, lane
            ):
                return  # it came before the answer of the write under way, which settles it
            self.queue.add(key, lane)

        return changed

    def is_mirror_echo(self, worker: str, key: WorkloadKey, event: InformerEvent) -> bool:
        """Whether a mirror's watch event on ``worker`` echoes this process's own write,
        which the reconcile that made it acted on: its create, when the event came while
        the create was under way or shows the object just as the create was answered
        (the creator looks again when its record is due; a decision that found the
        create pending looks again shortly), and its delete of a finished (or deleted)
        workload's mirror, after which nothing is left to do. Anything else is looked
        at: a delete's during a move too (the next placement starts from it)."""
        if event.old is None and event.new is not None:
            meta = Meta(event.new)
            return self.memory.is_create_echo(worker, key, meta.uid, str(meta.resource_version))
        if event.new is not None or event.old is None:
            return False
        if not self.memory.deleted.pending(Meta(event.old).uid):
            return False
        runtime = self.kinds.get(key.kind)
        obj = runtime.objects.get(key.key) if runtime is not None else None
        return runtime is not None and (obj is None or runtime.kind.is_finished(obj))

    def mirror_changed(self, key: WorkloadKey) -> None:
        """A worker's cache of mirrors changed for ``key``: a status to copy."""
        if self.may_write():  # a standby copies nothing: its clocks would only go stale
            self.instruments.mirror_changed(key)
        self.queue.add(key, Lane.STATUS)

    def namespace_changed(self, event: InformerEvent) -> None:
        """A namespace's placement policy (annotations) or labels (queues) changed."""
        namespace = event.key.rpartition("/")[2]
        obj = event.new
        annotations = None if obj is None else Meta(obj).annotations
        self.reconciler.policy_changed(namespace, annotations)
        self.queue_admission.namespace_changed(namespace, None if obj is None else Meta(obj).labels)
        # Its held workloads may now go somewhere (or must go elsewhere than planned).
        for key in self.reconciler.held():
            if key.namespace == namespace:
                self.queue.add(key, Lane.FRESH)  # a placement

    def queues_changed(self) -> None:
        """A RelayQueue changed: a pass, and those held on a queue that did not exist or
        did not take their namespace are looked at again."""
        self.capacity_changed.set()
        for key in self.reconciler.held():
            if (self.memory.held(key) or "").startswith(("QueueNotFound|", "QueueNotAllowed|")):
                self.queue.add(key, Lane.FRESH)
