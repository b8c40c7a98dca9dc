"""What the leader runs beside its reconcile workers: the start-up sweep's keys, the
held pass and the resync. Each only queues keys (in the lane their work needs); the
reconciles decide."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from jobrelay.controller.lanes import resync_keys
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.fleet.workers import WorkerPool
from jobrelay.kinds import WorkloadKey
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.queueing import Lane, WorkQueue
from jobrelay.vocabulary.json_types import JsonObj

__all__ = [
    "HELD_PASS_INTERVAL", "HeldWork", "known_keys", "place_held", "provisioning_keys", "resync",
]  # fmt: skip

# The least time between two passes over the held workloads.
HELD_PASS_INTERVAL = 1.0


class HeldWork(Protocol):
    """What the reconciler says of the workloads it holds (controller/relay/reconciler.py)."""

    def placeable_held(self) -> list[WorkloadKey]: ...

    def unschedulable(self) -> list[WorkloadKey]: ...


def known_keys(kinds: Mapping[str, KindRuntime], pool: WorkerPool) -> set[WorkloadKey]:
    """Every key a cache holds: each kind's management objects and every worker's mirrors."""
    keys = {
        WorkloadKey(name, key)
        for name, runtime in kinds.items()
        for key in runtime.objects.keys()  # noqa: SIM118 (an Informer, not a dict)
    }
    keys.update(pool.mirror_keys())
    keys.update(provisioning_keys(pool, kinds))
    return keys


# A workload key's longest "namespace/name": a namespace's 63 characters, a name's 253.
_MAX_KEY = 63 + 1 + 253


def provisioning_keys(pool: WorkerPool, kinds: Collection[str]) -> set[WorkloadKey]:
    """The workloads some worker holds one of jobrelay's ProvisioningRequests for: the
    sweep of leftovers (a request whose workload is gone, finished or placed elsewhere is
    deleted by that workload's decision, steps/claiming_capacity.py). The key is the
    request's annotation, which the worker can write: only a configured kind's key of a
    namespace and a name, within their lengths, is queued."""
    keys: set[WorkloadKey] = set()
    for worker in pool.workers():
        for tag in worker.provisioning_feed.workload_keys():
            kind, _, key = tag.partition(":")
            namespace, _, name = key.partition("/")
            if kind in kinds and namespace and name and "/" not in name and len(key) <= _MAX_KEY:
                keys.add(WorkloadKey(kind, key))
    return keys


async def place_held(
    capacity_changed: asyncio.Event, held: HeldWork, queue: WorkQueue[WorkloadKey]
) -> None:
    """When a worker's capacity changes, queue the held workloads that would now be
    placed (oldest first, each taking its room before the next is judged) and those
    whose mirror has a pod its worker will not schedule (pending timeout); at most
    once per ``HELD_PASS_INTERVAL``, so a busy fleet's churn costs one pass a second."""
    while True:
        await capacity_changed.wait()
        capacity_changed.clear()
        for key in held.placeable_held():
            queue.add(key, Lane.FRESH)  # a placement
        # Placed already: a look at their pending timeout, not a placement (yet).
        for key in held.unschedulable():
            queue.add(key, Lane.STATUS)
        await asyncio.sleep(HELD_PASS_INTERVAL)


async def resync(
    interval: float,
    kinds: Mapping[str, KindRuntime],
    pool: WorkerPool,
    queue: WorkQueue[WorkloadKey],
    kept: Callable[[WorkloadKind, JsonObj], bool] = lambda _kind, _obj: False,
) -> None:
    """Reconcile, every ``interval`` seconds and in the BACKGROUND lane, every key that
    could need work without a watch event (see :func:`lanes.resync_keys`), from the
    caches alone (unused dependency copies are the copy janitor's, copy_sweep.py).

    Events drive everything; this bounds what a lost event could cost,
    e.g. how long an orphaned mirror can outlive its management object.
    """
    while True:
        await asyncio.sleep(interval)
        objects = (
            (WorkloadKey(name, key), runtime.kind, obj)
            for name, runtime in kinds.items()
            for key in runtime.objects.keys()  # noqa: SIM118 (an Informer, not a dict)
            if (obj := runtime.objects.get(key)) is not None
        )
        for key in resync_keys(objects, pool.mirror_keys(), kept) | provisioning_keys(pool, kinds):
            queue.add(key, Lane.BACKGROUND)
