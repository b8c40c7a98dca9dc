"""The management informer's handler (controller/change_routing.py): the echo of this
process's own write queues nothing, even when it comes before the write's answer; any
other change is queued in its lane."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from tests.unit.controller.builders import COMPLETE, JOB, job, key_of, mirror

from jobrelay.controller.change_routing import ChangeRouting
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kube.queueing import WorkQueue
from jobrelay.kube.watching import Change, InformerEvent
from jobrelay.vocabulary.json_types import JsonObj

KEY = key_of(JOB)


class _NoMirrors:
    def has_mirror(self, key: WorkloadKey) -> bool:
        del key
        return False


class _Sources:
    def workload_changed(self, key: WorkloadKey, kind: object, obj: object) -> None:
        del key, kind, obj


class _QueueAdmission:
    def forget(self, key: WorkloadKey) -> None:
        del key

    def released(self, kind: object, old: object, new: object) -> bool:
        del kind, old, new
        return False


class _Objects:
    def __init__(self, obj: JsonObj | None = None) -> None:
        self.obj = obj

    def get(self, key: str) -> JsonObj | None:
        del key
        return self.obj


def _routing(
    memory: RelayMemory, queue: WorkQueue[WorkloadKey], objects: _Objects | None = None
) -> ChangeRouting:
    unused = cast(Any, None)
    return ChangeRouting(
        kinds={KEY.kind: KindRuntime(JOB, cast(Any, objects or _Objects()))},
        queue=queue,
        pool=cast(Any, _NoMirrors()),
        memory=memory,
        sources=cast(Any, _Sources()),
        queue_admission=cast(Any, _QueueAdmission()),
        reconciler=unused,
        instruments=unused,
        capacity_changed=asyncio.Event(),
        may_write=lambda: True,
    )


def _modified(old: JsonObj, new: JsonObj) -> InformerEvent:
    return InformerEvent(Change.UPDATED, KEY.key, old, new)


async def test_the_echo_of_our_own_write_queues_nothing_and_other_changes_do() -> None:
    memory = RelayMemory()
    queue: WorkQueue[WorkloadKey] = WorkQueue()
    handler = _routing(memory, queue).workload_handler(KEY.kind)
    placed = job(placed="w1", rv="7")
    memory.own_writes.wrote(KEY, "8")
    handler(_modified(placed, job(placed="w1", rv="8", status={"active": 1})))
    assert len(queue) == 0
    # The same version again (a relist) or any other version is an event as usual.
    handler(_modified(placed, job(placed="w1", rv="8", status={"active": 1})))
    assert len(queue) == 1
    queue.shutdown()


async def test_events_during_a_write_wait_for_its_answer_and_only_its_echo_is_dropped() -> None:
    queue: WorkQueue[WorkloadKey] = WorkQueue()
    memory = RelayMemory(requeue=queue.add)
    handler = _routing(memory, queue).workload_handler(KEY.kind)
    placed = job(placed="w1", rv="7")
    with memory.own_writes.writing(KEY) as write:
        handler(_modified(placed, job(placed="w1", rv="8", status={"active": 1})))
        assert len(queue) == 0
        write.answered("8")
    assert len(queue) == 0  # it was the write's echo
    with memory.own_writes.writing(KEY) as write:
        # A change someone else made, seen before this write's answer: queued after it.
        handler(_modified(placed, job(placed="w1", rv="9", status={"active": 2})))
        assert len(queue) == 0
        write.answered("10")
    assert len(queue) == 1
    queue.shutdown()


async def test_a_deleted_object_forgets_its_expected_echo() -> None:
    memory = RelayMemory()
    queue: WorkQueue[WorkloadKey] = WorkQueue()
    handler = _routing(memory, queue).workload_handler(KEY.kind)
    memory.own_writes.wrote(KEY, "8")
    handler(InformerEvent(Change.DELETED, KEY.key, job(rv="7"), None))
    assert len(memory.own_writes) == 0
    queue.shutdown()


def _added(obj: JsonObj) -> InformerEvent:
    return InformerEvent(Change.ADDED, KEY.key, None, obj)


def _deleted(obj: JsonObj) -> InformerEvent:
    return InformerEvent(Change.DELETED, KEY.key, obj, None)


def test_the_create_of_a_mirror_echoes_only_as_it_was_answered_and_once() -> None:
    memory = RelayMemory()
    routing = _routing(memory, WorkQueue())
    created = mirror(job(), uid="m-1")
    created["metadata"]["resourceVersion"] = "41"
    memory.mirror_created("w1", KEY, 1, "m-1", "41")
    assert routing.is_mirror_echo("w1", KEY, _added(created))
    assert not routing.is_mirror_echo("w1", KEY, _added(created))  # a relist: looked at
    # Changed by the time its event came (its controller began it): looked at.
    memory.mirror_created("w1", KEY, 1, "m-2", "50")
    later = mirror(job(), uid="m-2")
    later["metadata"]["resourceVersion"] = "52"
    assert not routing.is_mirror_echo("w1", KEY, _added(later))
    # Its event came while the create was under way: the create's (a namesake would fail
    # it, and its reconcile reads afresh); once the create has ended, not any more.
    memory.create_started("w1", KEY)
    assert not routing.is_mirror_echo("w2", KEY, _added(mirror(job(), uid="m-3")))
    assert routing.is_mirror_echo("w1", KEY, _added(mirror(job(), uid="m-3")))
    memory.create_ended("w1", KEY)
    assert not routing.is_mirror_echo("w1", KEY, _added(mirror(job(), uid="m-3")))


def test_the_delete_of_a_finished_workloads_mirror_is_an_echo_and_of_a_running_ones_not() -> None:
    memory = RelayMemory()
    gone = mirror(job(), uid="m-1", status=COMPLETE)
    objects = _Objects(job(placed="w1", status=COMPLETE))
    routing = _routing(memory, WorkQueue(), objects)
    assert not routing.is_mirror_echo("w1", KEY, _deleted(gone))  # someone else deleted it
    memory.deleted.expect("m-1")
    assert routing.is_mirror_echo("w1", KEY, _deleted(gone))
    objects.obj = None  # the workload is gone too
    assert routing.is_mirror_echo("w1", KEY, _deleted(gone))
    # A running workload's mirror deleted by us (a move): the next placement needs a look.
    objects.obj = job(placed="w1", status={"active": 1})
    assert not routing.is_mirror_echo("w1", KEY, _deleted(gone))
