"""Issue 33: a cache that cannot list holds start-up for a bounded time only; /readyz says
which cache waits and why, and nothing is reconciled until every cache has synced."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from tests.unit.controller.builders import job
from tests.unit.controller.fakes import FakeCluster, FakeInformer
from tests.unit.controller.test_runner import OPTIONS, RunningInformer, manager, stub_pool

from jobrelay.controller import readiness, runner
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.controller.runnables import CacheRunnable
from jobrelay.fleet.relayqueues import RelayQueueCache
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ResponseTooLarge

JOB = JobKind()
__all__ = ["manager"]  # the fixture, used by name


class StuckInformer(RunningInformer):
    """A management cache whose list fails until the test lets it sync."""

    def __init__(self, objects: dict[str, Any]) -> None:
        super().__init__(objects)
        self.name = "manager/jobs"
        self.has_synced = False
        self.last_error = ResponseTooLarge(200, "one Job on its own", 64 * 1024 * 1024)
        self.synced = asyncio.Event()

    def let_sync(self) -> None:
        self.has_synced, self.last_error = True, None
        self.synced.set()

    async def wait_synced(self) -> None:
        await self.synced.wait()


async def test_start_up_goes_on_past_a_stuck_cache_and_readyz_says_why(
    manager: tuple[FakeCluster, ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client = manager

    async def ensure_namespace(c: ApiClient, namespace: str) -> None:
        pass

    monkeypatch.setattr(runner.workerclusters, "ensure_namespace", ensure_namespace)
    monkeypatch.setattr(runner, "CACHE_SYNC_BOUND", 0.05)
    controller = runner.Controller(client, dataclasses.replace(OPTIONS, gc_interval=3600.0), [JOB])
    stuck = StuckInformer({"team-a/train": job()})
    controller.kinds[JOB.name] = KindRuntime(JOB, stuck)  # type: ignore[arg-type]
    controller.namespaces = RunningInformer({})  # type: ignore[assignment]
    controller.queue_admission.informers = ()
    controller.queues = RelayQueueCache(client, informer=RunningInformer({}))  # type: ignore[arg-type]
    sources: Any = controller.sources.informers
    for dependency_kind in list(sources):
        sources[dependency_kind] = RunningInformer({})
    pool_calls: list[str] = []
    stub_pool(controller, pool_calls)
    reconciled: list[WorkloadKey] = []
    done = asyncio.Event()
    reconcile = controller.reconciler.reconcile

    async def spy(key: WorkloadKey) -> Any:
        reconciled.append(key)
        done.set()
        return await reconcile(key)

    monkeypatch.setattr(controller.reconciler, "reconcile", spy)
    went_on = asyncio.Event()  # the caches' stage ended: the start-up went on
    synced = controller._synced
    monkeypatch.setattr(controller, "_synced", lambda: (synced(), went_on.set()))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    async with asyncio.timeout(10):
        await went_on.wait()
        health = controller.health()
        assert not health.ready
        assert list(health.waiting) == [f"{JOB.name} cache"]
        why = health.waiting[f"{JOB.name} cache"]
        assert why.startswith("not synced after 0s: manager/jobs: 200 ResponseTooLarge: one Job")
        assert b'"waiting"' in health.body()
        await asyncio.sleep(0.1)
        assert reconciled == [], "nothing is reconciled on an incomplete cache"
        stuck.let_sync()
        await done.wait()
        assert controller.health().ready and not controller.health().waiting
        assert b'"waiting"' not in controller.health().body()
        stop.set()
        await task
    assert reconciled[0] == WorkloadKey(JOB.name, "team-a/train")


async def test_a_stop_while_waiting_for_caches_ends_the_run(
    manager: tuple[FakeCluster, ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    caches = readiness.StartupCaches(
        [CacheRunnable("jobs cache", StuckInformer({}), 0.01, (StuckInformer({}),))]
    )
    for cache in caches.caches:
        await cache.start()
    stop = asyncio.Event()
    waiter = asyncio.create_task(caches.synced_or(stop))
    await asyncio.sleep(0.02)
    stop.set()
    async with asyncio.timeout(5):
        assert await waiter is False


def test_a_synced_cache_or_one_not_started_waits_for_nothing() -> None:
    listed = FakeInformer({})
    cache = CacheRunnable("x", listed, 1.0, (listed,))  # type: ignore[arg-type]
    assert cache.waiting(100.0) is None
    cache.started_at = 0.0
    assert cache.waiting(100.0) is None
    listed.has_synced = False
    assert cache.waiting(100.0) == "not synced after 100s: fake: listing"
