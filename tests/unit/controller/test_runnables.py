"""The runnable group (controller/runnables.py): start order, caches synced before the
leader's work, stops in reverse (also after a failed start, a failed loop, a lost lease),
and the adapters the runner declares its parts with. Fakes say what was done to them in
one shared log; nothing waits on the clock but the looptime tests of bounds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobrelay.controller.runnables import (
    CacheRunnable,
    ListingRunnable,
    LoopRunnable,
    Runnable,
    RunnableGroup,
    StepsRunnable,
)


class Broken(Exception):
    pass


@dataclass
class Part:
    """A fake runnable: what is done to it goes in ``log``."""

    name: str
    log: list[str]
    # Set when it has synced (None: at once).
    synced: asyncio.Event | None = None
    start_fails: bool = False
    stop_fails: bool = False

    async def start(self) -> None:
        self.log.append(f"start {self.name}")
        if self.start_fails:
            raise Broken(self.name)

    async def wait_synced(self, timeout: float | None = None) -> bool:
        self.log.append(f"synced? {self.name}")
        if self.synced is not None:
            await self.synced.wait()
        return True

    async def stop(self, *, graceful: bool) -> None:
        self.log.append(f"stop {self.name}" + ("" if graceful else " at once"))
        if self.stop_fails:
            raise Broken(f"stopping {self.name}")


def parts(log: list[str], *names: str, **settings: Any) -> list[Runnable]:
    return [Part(name, log, **settings) for name in names]


async def run_until_set(group: RunnableGroup, until: asyncio.Event, **kwargs: Any) -> None:
    task = asyncio.create_task(group.run(until, **kwargs))
    await asyncio.sleep(0)
    until.set()
    await task


async def test_caches_start_in_order_sync_then_the_leaders_work_and_all_stop_in_reverse() -> None:
    log: list[str] = []
    until = asyncio.Event()
    group = RunnableGroup(parts(log, "a", "b"), parts(log, "x", "y"))
    await run_until_set(group, until, on_synced=lambda: log.append("synced"))
    assert log == [
        "start a", "start b", "synced? a", "synced? b", "synced",
        "start x", "start y",
        "stop y", "stop x", "stop b", "stop a",
    ]  # fmt: skip


async def test_the_leaders_work_starts_only_once_every_cache_has_synced() -> None:
    log: list[str] = []
    second_synced, until = asyncio.Event(), asyncio.Event()
    caches = [Part("a", log), Part("b", log, synced=second_synced)]
    task = asyncio.create_task(RunnableGroup(caches, parts(log, "x")).run(until))
    for _ in range(5):
        await asyncio.sleep(0)
    assert log == ["start a", "start b", "synced? a", "synced? b"]
    second_synced.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert log[-1] == "start x"
    until.set()
    await task


async def test_the_leaders_work_runs_inside_the_campaign() -> None:
    log: list[str] = []
    until = asyncio.Event()

    async def campaign(lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        log.append("won")
        await lead()
        log.append("released")

    await run_until_set(RunnableGroup(parts(log, "a"), parts(log, "x")), until, campaign=campaign)
    assert log == ["start a", "synced? a", "won", "start x", "stop x", "released", "stop a"]


async def test_asked_to_stop_the_leader_drains_its_workers_then_says_goodbye() -> None:
    log: list[str] = []
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    until = asyncio.Event()

    async def workers() -> None:
        while (item := await queue.get()) is not None:
            log.append(f"did {item}")

    async def goodbye() -> None:
        log.append("goodbye")

    leader: list[Runnable] = [
        StepsRunnable("deregistration", on_stop=goodbye, stop_graceful_only=True),
        LoopRunnable("workers", workers, drain=lambda: queue.put_nowait(None)),
    ]
    queue.put_nowait("key")
    await run_until_set(RunnableGroup([], leader), until)
    assert log == ["did key", "goodbye"]


async def test_a_start_that_fails_half_way_stops_what_started_in_reverse() -> None:
    log: list[str] = []
    caches = [Part("a", log), Part("b", log, start_fails=True), Part("c", log)]
    with pytest.raises(Broken, match="b"):
        await RunnableGroup(caches, parts(log, "x")).run(asyncio.Event())
    # The one that failed may have begun: it is stopped too; "c" never started.
    assert log == ["start a", "start b", "stop b at once", "stop a at once"]


async def test_a_stop_that_fails_leaves_none_running_and_is_raised() -> None:
    log: list[str] = []
    until = asyncio.Event()
    caches = [Part("a", log), Part("b", log, stop_fails=True), Part("c", log)]
    with pytest.raises(Broken, match="stopping b"):
        await run_until_set(RunnableGroup(caches, []), until)
    assert log[-3:] == ["stop c", "stop b", "stop a at once"]


async def test_a_lost_lease_stops_the_leaders_work_at_once_and_keeps_the_caches_going() -> None:
    log: list[str] = []
    until = asyncio.Event()
    group = RunnableGroup([], parts(log, "x", "y"))
    leading = asyncio.create_task(group.lead(until))
    await asyncio.sleep(0)
    leading.cancel()  # as the elector does at the renew deadline
    with pytest.raises(asyncio.CancelledError):
        await leading
    assert log == ["start x", "start y", "stop y at once", "stop x at once"]


async def test_a_failing_loop_ends_the_leaders_work_and_its_error_is_raised() -> None:
    log: list[str] = []

    async def failing() -> None:
        await asyncio.sleep(0)
        raise Broken("resync")

    loop = LoopRunnable("resync", failing)
    group = RunnableGroup(parts(log, "a"), [Part("x", log), loop, Part("y", log)])
    with pytest.raises(Broken, match="resync"):
        await group.run(asyncio.Event())
    assert log == ["start a", "synced? a", "start x", "start y", "stop y at once",
                   "stop x at once", "stop a at once"]  # fmt: skip


async def test_what_ended_the_stage_is_raised_and_a_failed_stop_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    caches = [Part("a", log, stop_fails=True), Part("b", log, start_fails=True)]
    with pytest.raises(Broken, match=r"^b$"):
        await RunnableGroup(caches, []).run(asyncio.Event())
    assert log == ["start a", "start b", "stop b at once", "stop a at once"]
    assert [r.getMessage() for r in caplog.records] == ["stopping a failed: Broken('stopping a')"]


# -- the adapters ----------------------------------------------------------------------


async def test_a_loop_drains_at_a_graceful_stop_and_is_cancelled_otherwise() -> None:
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    done: list[str] = []

    async def work() -> None:
        while (item := await queue.get()) is not None:
            done.append(item)

    draining = LoopRunnable("workers", work, drain=lambda: queue.put_nowait(None))
    await draining.start()
    queue.put_nowait("one")
    await draining.stop(graceful=True)
    assert done == ["one"] and draining.task is not None and draining.task.done()

    cancelled = LoopRunnable("workers", work, drain=lambda: queue.put_nowait(None))
    await cancelled.start()
    await cancelled.stop(graceful=False)
    assert cancelled.task is not None and cancelled.task.cancelled()


async def test_a_loop_stopped_while_its_stop_is_cancelled_does_not_run_on() -> None:
    stuck = asyncio.Event()

    async def work() -> None:
        await stuck.wait()  # a drain that never ends (a reconcile stuck on a silent worker)

    loop = LoopRunnable("workers", work, drain=lambda: None)
    await loop.start()
    stopping = asyncio.create_task(loop.stop(graceful=True))
    await asyncio.sleep(0)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert loop.task is not None and loop.task.cancelled()


async def test_a_goodbye_is_said_only_at_a_graceful_stop() -> None:
    said: list[str] = []

    async def goodbye() -> None:
        said.append("bye")

    steps = StepsRunnable("API deregistration", on_stop=goodbye, stop_graceful_only=True)
    await steps.start()
    assert await steps.wait_synced()
    await steps.stop(graceful=False)
    assert said == []
    await steps.stop(graceful=True)
    assert said == ["bye"]


async def test_steps_take_plain_and_async_starts() -> None:
    begun: list[str] = []

    async def begin() -> None:
        begun.append("async")

    await StepsRunnable("plain", on_start=lambda: begun.append("plain")).start()  # type: ignore[func-returns-value]
    await StepsRunnable("async", on_start=begin).start()
    assert begun == ["plain", "async"]


@dataclass
class StandInCache:
    calls: list[str] = field(default_factory=list)
    synced: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> None:
        self.calls.append("start")

    async def wait_synced(self) -> None:
        self.calls.append("wait_synced")
        await self.synced.wait()

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_a_cache_is_started_waited_on_and_stopped() -> None:
    cache = StandInCache()
    cache.synced.set()
    runnable = CacheRunnable("jobs", cache)
    await runnable.start()
    assert await runnable.wait_synced()
    await runnable.stop(graceful=True)
    assert cache.calls == ["start", "wait_synced", "stop"]


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time from 0, on a loop of its own
async def test_a_bounded_wait_gives_up_at_the_shorter_bound() -> None:
    loop = asyncio.get_running_loop()
    bounded = CacheRunnable("sources", StandInCache(), sync_timeout=20.0)
    began = loop.time()
    assert not await bounded.wait_synced()
    assert loop.time() - began == pytest.approx(20.0)
    began = loop.time()
    assert not await bounded.wait_synced(5.0)
    assert loop.time() - began == pytest.approx(5.0)


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time from 0, on a loop of its own
async def test_a_listing_start_runs_in_the_background_and_is_synced_when_it_returns() -> None:
    listed, stopped = asyncio.Event(), []

    async def listing() -> None:
        await listed.wait()

    async def stop() -> None:
        stopped.append("stop")

    runnable = ListingRunnable("dependency sources", listing, stop)
    assert not await runnable.wait_synced()  # not started: not synced
    await runnable.start()  # returns at once
    assert not await runnable.wait_synced(1.0)
    listed.set()
    assert await runnable.wait_synced()
    await runnable.stop(graceful=True)
    assert stopped == ["stop"]
