"""WorkQueue and run_workers: dedupe, exclusivity, delays, backoff, shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.kube.queueing import QueueOptions, QueueShutDown, WorkQueue, run_workers


async def get_soon(queue: WorkQueue[str], within: float = 1.0) -> str:
    async with asyncio.timeout(within):
        return await queue.get()


async def nothing_within(queue: WorkQueue[str], seconds: float) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(seconds):
            await queue.get()


# -- dedupe and exclusivity ----------------------------------------------------


async def test_a_waiting_key_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for _ in range(3):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert await get_soon(queue) == "a"
    assert await get_soon(queue) == "b"
    assert len(queue) == 0


async def test_a_key_re_added_while_processing_waits_for_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await get_soon(queue)
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0, "must not be handed to a second worker while processing"
    await nothing_within(queue, 0.02)
    queue.done(key)
    assert len(queue) == 1
    assert await get_soon(queue) == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_done_without_re_add_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.done(await get_soon(queue))
    await nothing_within(queue, 0.02)


async def test_a_blocked_getter_is_woken_by_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_a_cancelled_getter_does_not_swallow_a_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")  # wakes `first` …
    first.cancel()  # … which is cancelled before it runs: the wake-up must pass on
    assert await asyncio.wait_for(second, 1) == "a"
    assert first.cancelled()


async def test_workers_never_process_one_key_concurrently() -> None:
    queue: WorkQueue[str] = WorkQueue()
    active: Counter[str] = Counter()
    processed: Counter[str] = Counter()
    overlap: list[str] = []

    async def handler(key: str) -> None:
        active[key] += 1
        if active[key] > 1:
            overlap.append(key)
        await asyncio.sleep(0.002)
        # Keep re-adding while processing, as watch events would.
        queue.add(key)
        processed[key] += 1
        active[key] -= 1
        if sum(processed.values()) >= 200:
            queue.shutdown()

    for key in "abc":
        queue.add(key)
    await asyncio.wait_for(run_workers(queue, 8, handler), 10)
    assert not overlap
    assert set(processed) == {"a", "b", "c"}


# -- delays ----------------------------------------------------------------------


async def test_add_after_releases_keys_in_due_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("late", 0.06)
    queue.add_after("early", 0.01)
    queue.add_after("middle", 0.03)
    assert len(queue) == 0
    order = [await get_soon(queue) for _ in range(3)]
    assert order == ["early", "middle", "late"]


async def test_add_after_keeps_the_earliest_due_time() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.add_after("a", 0.03)
    queue.add_after("a", 5.0)  # later: ignored
    assert await get_soon(queue) == "a"
    assert loop.time() - started < 1.0
    queue.done("a")
    await nothing_within(queue, 0.05)  # and only once

    queue.add_after("b", 5.0)
    queue.add_after("b", 0.01)  # earlier: wins
    assert await get_soon(queue, within=1.0) == "b"


async def test_add_after_with_no_delay_adds_now() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0)
    assert len(queue) == 1


async def test_a_delayed_key_that_is_already_waiting_is_not_duplicated() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add_after("a", 0.01)
    await asyncio.sleep(0.03)
    assert len(queue) == 1


# -- rate limiting -----------------------------------------------------------------


async def test_rate_limited_backoff_doubles_per_failure_up_to_the_cap() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(base_delay=0.005, max_delay=0.08))
    delays = [queue.add_rate_limited("a") for _ in range(7)]
    assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.08, 0.08])
    assert queue.num_requeues("a") == 7
    # Backoff is per key.
    assert queue.add_rate_limited("b") == pytest.approx(0.005)
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == pytest.approx(0.005)


async def test_backoff_survives_a_very_long_failure_streak() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(max_delay=60))
    for _ in range(2000):
        delay = queue.add_rate_limited("a")
    assert delay == 60


async def test_rate_limited_key_comes_back_after_its_delay() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(base_delay=0.04))
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.add_rate_limited("a")
    assert await get_soon(queue) == "a"
    assert loop.time() - started >= 0.035


async def test_the_global_token_bucket_spaces_out_retries_beyond_the_burst() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(base_delay=0.001, qps=10, burst=2))
    delays = [queue.add_rate_limited(f"k{i}") for i in range(4)]
    assert delays[0] == pytest.approx(0.001)
    assert delays[1] == pytest.approx(0.001)
    # Beyond the burst, each retry books the next token: 0.1 s apart at 10 qps.
    assert delays[2] == pytest.approx(0.1, abs=0.01)
    assert delays[3] == pytest.approx(0.2, abs=0.01)


# -- shutdown ------------------------------------------------------------------------


async def test_shutdown_wakes_getters_and_ignores_further_adds() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.shutdown()
    for getter in getters:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(getter, 1)
    queue.add("a")
    queue.add_after("b", 0.01)
    assert queue.add_rate_limited("c") > 0
    assert len(queue) == 0
    assert queue.is_shut_down
    with pytest.raises(QueueShutDown):
        await queue.get()


async def test_shutdown_drops_waiting_and_delayed_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add_after("b", 0.01)
    queue.shutdown()
    await asyncio.sleep(0.03)
    assert len(queue) == 0


async def test_a_key_in_process_at_shutdown_is_not_requeued() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await get_soon(queue)
    queue.add("a")
    queue.shutdown()
    queue.done(key)
    assert len(queue) == 0


# -- run_workers -----------------------------------------------------------------------


async def test_run_workers_retries_failures_with_backoff_and_logs_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(base_delay=0.001))
    attempts: Counter[str] = Counter()

    async def handler(key: str) -> None:
        attempts[key] += 1
        if attempts[key] < 3:
            raise RuntimeError("apiserver said no")
        queue.shutdown()

    queue.add("ns/job-1")
    with caplog.at_level(logging.ERROR, logger="jobrelay.kube.queueing"):
        await asyncio.wait_for(run_workers(queue, 2, handler, name="jobs"), 5)
    assert attempts["ns/job-1"] == 3
    failures = [r for r in caplog.records if "ns/job-1" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].exc_info is not None
    assert "retrying in" in failures[0].getMessage()


async def test_run_workers_forgets_a_key_once_it_succeeds() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(base_delay=0.001))
    calls = 0

    async def handler(key: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("once")
        queue.shutdown()

    queue.add("a")
    await asyncio.wait_for(run_workers(queue, 1, handler), 5)
    assert queue.num_requeues("a") == 0


async def test_run_workers_requeues_after_the_delay_a_handler_returns() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    seen: list[float] = []

    async def handler(key: str) -> float | None:
        seen.append(loop.time())
        if len(seen) == 2:
            queue.shutdown()
            return None
        return 0.05

    queue.add("a")
    await asyncio.wait_for(run_workers(queue, 1, handler), 5)
    assert seen[1] - seen[0] >= 0.045


async def test_run_workers_returns_on_shutdown_and_lets_handlers_finish() -> None:
    queue: WorkQueue[str] = WorkQueue()
    started = asyncio.Event()
    finished: list[str] = []

    async def handler(key: str) -> None:
        started.set()
        await asyncio.sleep(0.02)
        finished.append(key)

    runner = asyncio.create_task(run_workers(queue, 2, handler))
    queue.add("a")
    await asyncio.wait_for(started.wait(), 1)
    queue.shutdown()
    await asyncio.wait_for(runner, 1)
    assert finished == ["a"]


async def test_run_workers_needs_a_worker() -> None:
    async def handler(key: str) -> None:
        return None

    with pytest.raises(ValueError):
        await run_workers(WorkQueue[str](), 0, handler)


# -- a random walk against a model ---------------------------------------------------------

operations = st.lists(
    st.tuples(st.sampled_from(["add", "get", "done"]), st.sampled_from("abcd")), max_size=60
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_queue_matches_a_simple_model(ops: list[tuple[str, str]]) -> None:
    """Whatever the interleaving: no duplicates, no key both waiting and in process,
    and a key added while in process comes back after done()."""

    async def scenario() -> None:
        queue: WorkQueue[str] = WorkQueue()
        ready: list[str] = []  # model of the FIFO
        processing: set[str] = set()
        readd: set[str] = set()
        for op, key in ops:
            if op == "add":
                queue.add(key)
                if key in processing:
                    readd.add(key)
                elif key not in ready:
                    ready.append(key)
            elif op == "get" and ready:
                got = await queue.get()
                assert got == ready.pop(0)
                processing.add(got)
            elif op == "done" and key in processing:
                queue.done(key)
                processing.discard(key)
                if key in readd:
                    readd.discard(key)
                    ready.append(key)
            assert len(queue) == len(ready)
            assert not processing & set(ready)

    asyncio.run(scenario())


async def test_the_queue_says_how_long_its_oldest_ready_key_waited() -> None:
    queue: WorkQueue[str] = WorkQueue()
    assert queue.oldest_age() == 0.0
    queue.add("a")
    queue.add("b")
    queue.add_after("c", 60)
    assert queue.delayed == 1 and len(queue) == 2
    later = asyncio.get_running_loop().time() + 1e6  # any clock far enough ahead
    assert queue.oldest_age(now=later) > 0
    assert await queue.get() == "a"
    assert queue.in_progress == 1
    queue.add("a")  # re-added while processing: waits from done()
    assert await queue.get() == "b"
    queue.done("b")
    assert len(queue) == 0 and queue.oldest_age() == 0.0
    queue.done("a")
    assert len(queue) == 1 and queue.in_progress == 0
    queue.shutdown()
    assert queue.oldest_age() == 0.0
