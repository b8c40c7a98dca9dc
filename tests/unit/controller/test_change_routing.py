"""The management informer's handler (controller/change_routing.py): the echo of this
process's own write queues nothing; any other change is queued in its lane."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from tests.unit.controller.builders import JOB, job, key_of

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


def _routing(memory: RelayMemory, queue: WorkQueue[WorkloadKey]) -> ChangeRouting:
    unused = cast(Any, None)
    return ChangeRouting(
        kinds={KEY.kind: KindRuntime(JOB, unused)},
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


async def test_a_deleted_object_forgets_its_expected_echo() -> None:
    memory = RelayMemory()
    queue: WorkQueue[WorkloadKey] = WorkQueue()
    handler = _routing(memory, queue).workload_handler(KEY.kind)
    memory.own_writes.wrote(KEY, "8")
    handler(InformerEvent(Change.DELETED, KEY.key, job(rv="7"), None))
    assert len(memory.own_writes) == 0
    queue.shutdown()
