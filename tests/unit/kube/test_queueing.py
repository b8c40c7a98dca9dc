"""WorkQueue and run_workers: dedupe, exclusivity, delays, backoff, shutdown, lanes."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.kube.queueing import (
    Done,
    Lane,
    QueueOptions,
    QueueOutcome,
    QueueShutDown,
    RequeueAfter,
    Retry,
    Terminal,
    WorkQueue,
    run_workers,
)


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

    async def handler(key: str) -> QueueOutcome:
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
        return Done()

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
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=0.005, retry_max_delay=0.08))
    delays = [queue.add_rate_limited("a") for _ in range(7)]
    assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.08, 0.08])
    assert queue.num_requeues("a") == 7
    # Backoff is per key.
    assert queue.add_rate_limited("b") == pytest.approx(0.005)
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == pytest.approx(0.005)


async def test_backoff_survives_a_very_long_failure_streak() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_max_delay=60))
    for _ in range(2000):
        delay = queue.add_rate_limited("a")
    assert delay == 60


async def test_rate_limited_key_comes_back_after_its_delay() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=0.04))
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.add_rate_limited("a")
    assert await get_soon(queue) == "a"
    assert loop.time() - started >= 0.035


async def test_the_global_token_bucket_spaces_out_retries_beyond_the_burst() -> None:
    queue: WorkQueue[str] = WorkQueue(
        QueueOptions(retry_base_delay=0.001, retry_qps=10, retry_burst=2)
    )
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


@pytest.mark.logs_exceptions
async def test_run_workers_retries_failures_with_backoff_and_logs_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=0.001))
    attempts: Counter[str] = Counter()

    async def handler(key: str) -> QueueOutcome:
        attempts[key] += 1
        if attempts[key] < 3:
            raise RuntimeError("apiserver said no")
        queue.shutdown()
        return Done()

    queue.add("ns/job-1")
    with caplog.at_level(logging.ERROR, logger="jobrelay.kube.queueing"):
        await asyncio.wait_for(run_workers(queue, 2, handler, name="jobs"), 5)
    assert attempts["ns/job-1"] == 3
    failures = [r for r in caplog.records if "ns/job-1" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].exc_info is not None
    assert "retrying in" in failures[0].getMessage()


@pytest.mark.logs_exceptions
async def test_run_workers_forgets_a_key_once_it_succeeds() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=0.001))
    calls = 0

    async def handler(key: str) -> QueueOutcome:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("once")
        queue.shutdown()
        return Done()

    queue.add("a")
    await asyncio.wait_for(run_workers(queue, 1, handler), 5)
    assert queue.num_requeues("a") == 0


async def test_run_workers_requeues_after_the_delay_a_handler_returns() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    seen: list[float] = []

    async def handler(key: str) -> QueueOutcome:
        seen.append(loop.time())
        if len(seen) == 2:
            queue.shutdown()
            return Done()
        return RequeueAfter(0.05)

    queue.add("a")
    await asyncio.wait_for(run_workers(queue, 1, handler), 5)
    assert seen[1] - seen[0] >= 0.045


async def test_run_workers_sees_a_terminal_key_again_only_after_its_retry_after() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=0.001))
    loop = asyncio.get_running_loop()
    seen: list[tuple[str, float]] = []
    answers = {
        "quota": [Terminal("MirrorRejected", "a quota", retry_after=0.05), Done()],
        "broken": [Terminal("StatusNotCopied", "a bug")],
    }

    async def handler(key: str) -> QueueOutcome:
        seen.append((key, loop.time()))
        answer = answers[key].pop(0)
        if not answers["quota"]:
            queue.shutdown()
        return answer

    queue.add("broken")
    queue.add("quota")
    await asyncio.wait_for(run_workers(queue, 1, handler), 5)
    assert [key for key, _ in seen] == ["broken", "quota", "quota"]
    assert seen[2][1] - seen[1][1] >= 0.045
    assert queue.num_requeues("quota") == 0 and queue.delayed == 0


async def test_run_workers_returns_on_shutdown_and_lets_handlers_finish() -> None:
    queue: WorkQueue[str] = WorkQueue()
    started = asyncio.Event()
    finished: list[str] = []

    async def handler(key: str) -> QueueOutcome:
        started.set()
        await asyncio.sleep(0.02)
        finished.append(key)
        return Done()

    runner = asyncio.create_task(run_workers(queue, 2, handler))
    queue.add("a")
    await asyncio.wait_for(started.wait(), 1)
    queue.shutdown()
    await asyncio.wait_for(runner, 1)
    assert finished == ["a"]


async def test_run_workers_needs_a_worker() -> None:
    async def handler(key: str) -> QueueOutcome:
        return Done()

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


# -- lanes ---------------------------------------------------------------------------------

FRESH, STATUS, BACKGROUND = Lane.FRESH, Lane.STATUS, Lane.BACKGROUND


def drain(queue: WorkQueue[str]) -> list[str]:
    """Every ready key in hand-out order, each released at once."""

    async def take() -> list[str]:
        keys = []
        while len(queue):
            key = await queue.get()
            queue.done(key)
            keys.append(key)
        return keys

    return asyncio.run(take())


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([("a", FRESH), ("b", FRESH)], ["a", "b"], id="one lane is a FIFO"),
        pytest.param(
            [("r", BACKGROUND), ("s", STATUS), ("f", FRESH), ("s2", STATUS)],
            ["f", "s", "s2", "r"],
            id="best lane first, FIFO within",
        ),
        pytest.param(
            [("a", BACKGROUND), ("b", BACKGROUND), ("b", FRESH)],
            ["b", "a"],
            id="a waiting key added at a better lane moves up",
        ),
        pytest.param(
            [("a", FRESH), ("b", FRESH), ("a", BACKGROUND)],
            ["a", "b"],
            id="never moved down",
        ),
        pytest.param(
            [("a", BACKGROUND), ("a", STATUS), ("a", FRESH), ("a", BACKGROUND)],
            ["a"],
            id="moved up twice, handed out once",
        ),
        pytest.param(
            [("s", STATUS), ("a", BACKGROUND), ("a", STATUS)],
            ["s", "a"],
            id="a moved-up key queues behind its new lane's keys",
        ),
    ],
)
def test_lane_order(adds: list[tuple[str, Lane]], expected: list[str]) -> None:
    # Strict order, without the starvation rule (tested on its own below).
    queue: WorkQueue[str] = WorkQueue(QueueOptions(starvation_limit=100))
    for key, lane in adds:
        queue.add(key, lane)
    assert len(queue) == len(expected)
    assert drain(queue) == expected
    assert [queue.waiting_in(lane) for lane in Lane] == [0, 0, 0]


@pytest.mark.parametrize(
    ("limit", "fresh", "background", "expected"),
    [
        # Every third hand-out goes to the starving lane while FRESH is flooded.
        pytest.param(2, 6, 2, "ffbffbff", id="limit 2"),
        pytest.param(1, 2, 2, "fbfb", id="limit 1 alternates"),
        pytest.param(100, 3, 2, "fffbb", id="a high limit is strict priority"),
    ],
)
def test_a_starving_lane_is_served_once_it_was_passed_over_often_enough(
    limit: int, fresh: int, background: int, expected: str
) -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(starvation_limit=limit))
    for index in range(background):
        queue.add(f"b{index}", BACKGROUND)
    for index in range(fresh):
        queue.add(f"f{index}", FRESH)
    assert "".join(key[0] for key in drain(queue)) == expected


def test_the_starvation_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="starvation_limit"):
        QueueOptions(starvation_limit=0)


def test_each_starving_lane_gets_its_turn_under_a_flood() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(starvation_limit=3))
    queue.add("s", STATUS)
    queue.add("b", BACKGROUND)
    for index in range(10):
        queue.add(f"f{index}", FRESH)
    order = drain(queue)
    assert order.index("s") <= 4 and order.index("b") <= 5


async def test_a_key_readded_while_processing_comes_back_at_the_best_lane_asked() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a", BACKGROUND)
    assert await get_soon(queue) == "a"
    assert queue.lane_of("a") is BACKGROUND
    queue.add("a", BACKGROUND)
    queue.add("a", STATUS)
    queue.add("a", BACKGROUND)
    queue.add("s", STATUS)
    assert len(queue) == 1
    queue.done("a")
    assert queue.lane_of("a") is None
    assert [queue.waiting_in(lane) for lane in Lane] == [0, 2, 0]
    assert await get_soon(queue) == "s"
    assert await get_soon(queue) == "a"
    assert queue.lane_of("a") is STATUS


async def test_a_stale_entry_never_hands_a_key_out_twice() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a", BACKGROUND)
    queue.add("a", FRESH)  # its BACKGROUND entry is stale now
    assert await get_soon(queue) == "a"
    queue.done("a")
    queue.add("b", BACKGROUND)
    assert len(queue) == 1
    assert await get_soon(queue) == "b"
    await nothing_within(queue, 0.02)


async def test_a_stale_entry_is_skipped_even_when_its_key_waits_again() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a", BACKGROUND)
    queue.add("a", FRESH)
    queue.add("b", BACKGROUND)
    assert await get_soon(queue) == "a"
    queue.done("a")
    queue.add("a", BACKGROUND)  # behind b, whatever its stale entry says
    assert [await get_soon(queue), await get_soon(queue)] == ["b", "a"]


def test_a_stale_entry_is_skipped_when_the_starving_lane_is_served() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(starvation_limit=1))
    queue.add("f", FRESH)
    queue.add("a", BACKGROUND)
    queue.add("b", BACKGROUND)
    queue.add("a", FRESH)  # a waits in FRESH; its BACKGROUND entry is stale
    queue.add("g", FRESH)
    assert drain(queue) == ["f", "b", "a", "g"]


async def test_the_oldest_age_counts_from_the_first_add_even_when_moved_up() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a", BACKGROUND)
    since = queue._waiting["a"].since
    queue.add("a", FRESH)
    assert queue.oldest_age(now=since + 5) == 5


async def test_a_delayed_key_comes_at_the_best_lane_asked() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.02, BACKGROUND)
    queue.add_after("a", 0.5, FRESH)  # later: keeps the earlier time, takes the lane
    queue.add_after("b", 0.01, BACKGROUND)
    queue.add_after("b", 0.005, STATUS)  # earlier: both
    assert queue.delayed == 2
    await asyncio.sleep(0.05)
    assert [queue.waiting_in(lane) for lane in Lane] == [1, 1, 0]
    assert await get_soon(queue) == "a"
    assert await get_soon(queue) == "b"


async def test_add_after_with_no_delay_adds_now_in_its_lane() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0, STATUS)
    assert queue.waiting_in(STATUS) == 1


async def test_shutdown_empties_every_lane() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key, lane in (("a", FRESH), ("b", STATUS), ("c", BACKGROUND), ("c", FRESH)):
        queue.add(key, lane)
    queue.shutdown()
    assert len(queue) == 0 and [queue.waiting_in(lane) for lane in Lane] == [0, 0, 0]


async def test_run_workers_retries_and_requeues_in_the_lane_the_key_came_from() -> None:
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=0.001))
    answers: dict[str, list[QueueOutcome]] = {
        "fresh": [Retry("conflict"), Done()],
        "status": [RequeueAfter(0.001), Done()],
        "held": [RequeueAfter(0.001, BACKGROUND), Done()],
    }
    lanes: list[tuple[str, Lane | None]] = []

    async def handler(key: str) -> QueueOutcome:
        lanes.append((key, queue.lane_of(key)))
        answer = answers[key].pop(0)
        if not any(answers.values()):
            queue.shutdown()
        return answer

    queue.add("fresh", FRESH)
    queue.add("status", STATUS)
    queue.add("held", FRESH)
    await asyncio.wait_for(run_workers(queue, 1, handler), 5)
    assert sorted(lanes) == sorted(
        [
            ("fresh", FRESH), ("fresh", FRESH),
            ("status", STATUS), ("status", STATUS),
            ("held", FRESH), ("held", BACKGROUND),
        ]
    )  # fmt: skip


# -- lanes against a model -------------------------------------------------------------------

LIMIT = 2
lane_operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("abcde"), st.sampled_from(Lane)),
        st.tuples(st.just("get"), st.just(""), st.just(FRESH)),
        st.tuples(st.just("done"), st.sampled_from("abcde"), st.just(FRESH)),
    ),
    max_size=80,
)


class LaneModel:
    """The lanes as the module doc says, the slow obvious way (lists, scans)."""

    def __init__(self) -> None:
        self.lanes: list[list[str]] = [[] for _ in Lane]
        self.processing: dict[str, Lane] = {}
        self.readded: dict[str, Lane] = {}
        self.passed_over = [0] * len(Lane)

    def lane_of(self, key: str) -> int | None:
        return next((i for i, keys in enumerate(self.lanes) if key in keys), None)

    def add(self, key: str, lane: Lane) -> None:
        if key in self.processing:
            self.readded[key] = min(lane, self.readded.get(key, lane))
            return
        current = self.lane_of(key)
        if current is None or lane < current:
            if current is not None:
                self.lanes[current].remove(key)
            self.lanes[lane].append(key)

    def get(self) -> str:
        waiting = [i for i, keys in enumerate(self.lanes) if keys]
        best = waiting[0]
        starving = [i for i in waiting[1:] if self.passed_over[i] >= LIMIT]
        chosen = starving[0] if starving else best
        for i in range(best + 1, len(Lane)):
            self.passed_over[i] = self.passed_over[i] + 1 if i in waiting and i != chosen else 0
        key = self.lanes[chosen].pop(0)
        self.processing[key] = Lane(chosen)
        return key

    def done(self, key: str) -> None:
        if self.processing.pop(key, None) is not None and key in self.readded:
            self.lanes[self.readded.pop(key)].append(key)


@settings(max_examples=300, deadline=None)
@given(lane_operations)
def test_lanes_match_a_simple_model(ops: list[tuple[str, str, Lane]]) -> None:
    """Whatever the interleaving: the queue hands out what the model says, a key is
    never both waiting and in process, and each waits in one lane only."""

    async def scenario() -> None:
        queue: WorkQueue[str] = WorkQueue(QueueOptions(starvation_limit=LIMIT))
        model = LaneModel()
        for op, key, lane in ops:
            if op == "add":
                queue.add(key, lane)
                model.add(key, lane)
            elif op == "get" and len(queue):
                got = await queue.get()
                assert got == model.get()
                assert queue.lane_of(got) == model.processing[got]
            elif op == "done":
                queue.done(key)
                model.done(key)
            assert [queue.waiting_in(lane) for lane in Lane] == [len(k) for k in model.lanes]
            assert len(queue) == sum(len(k) for k in model.lanes)
            assert queue.in_progress == len(model.processing)

    asyncio.run(scenario())


bursts = st.lists(
    st.tuples(st.sampled_from("abcdefgh"), st.sampled_from(Lane), st.integers(0, 3)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(bursts, st.integers(min_value=1, max_value=4), st.integers(0, 2**32))
def test_workers_hand_out_every_key_once_per_add_never_concurrently(
    adds: list[tuple[str, Lane, int]], workers: int, seed: int
) -> None:
    """Adds interleaved with processing: every add of a key that does not wait already
    hands it out exactly once (after done() if it is in process), and no key runs in
    two workers at once."""
    pauses = random.Random(seed)

    async def scenario() -> None:
        queue: WorkQueue[str] = WorkQueue(QueueOptions(starvation_limit=LIMIT))
        active: set[str] = set()
        owed: set[str] = set()  # added, not handed out yet
        owed_after_done: set[str] = set()  # added while in process
        settled = asyncio.Event()  # nothing owed, nothing in process

        async def handler(key: str) -> QueueOutcome:
            assert key not in active, f"{key} handed to two workers"
            assert key in owed, f"{key} handed out without an add"
            owed.discard(key)
            active.add(key)
            for _ in range(pauses.randint(0, 3)):
                await asyncio.sleep(0)
            active.discard(key)
            if key in owed_after_done:
                owed_after_done.discard(key)
                owed.add(key)
            if not (owed or owed_after_done or active):
                settled.set()
            return Done()

        runner = asyncio.create_task(run_workers(queue, workers, handler))
        for key, lane, pause in adds:
            queue.add(key, lane)
            (owed_after_done if key in active else owed).add(key)
            for _ in range(pause):
                await asyncio.sleep(0)
        if owed or owed_after_done or active:
            settled.clear()
            async with asyncio.timeout(5):
                await settled.wait()
        assert len(queue) == 0 and queue.in_progress == 0
        queue.shutdown()
        await asyncio.wait_for(runner, 5)

    asyncio.run(scenario())


async def test_workers_let_the_loop_run_between_keys_that_await_nothing() -> None:
    """A sweep of keys decided from caches alone must not hold the loop: a timer due
    meanwhile (a lease renewal, say) runs long before the sweep ends."""
    queue: WorkQueue[int] = WorkQueue()
    for key in range(1000):
        queue.add(key)
    handled: list[int] = []
    seen_by_timer: list[int] = []

    async def handler(key: int) -> QueueOutcome:
        handled.append(key)  # awaits nothing
        if len(handled) == 1:
            asyncio.get_running_loop().call_soon(lambda: seen_by_timer.append(len(handled)))
        if len(handled) == 1000:
            queue.shutdown()
        return Done()

    await run_workers(queue, 4, handler)
    assert len(handled) == 1000
    assert seen_by_timer and seen_by_timer[0] < 100


async def test_an_outcome_supersedes_the_delayed_look_an_earlier_one_asked_for() -> None:
    """A short Job: its first outcome asks for a look in a while (its mirror record); an
    event brings it back sooner and it ends Done: the look asked for goes. A Retry does
    not supersede it (it says nothing of what the key needs)."""
    queue: WorkQueue[str] = WorkQueue(QueueOptions(retry_base_delay=100))
    answers: dict[str, list[QueueOutcome]] = {
        "done": [RequeueAfter(100), Done()],
        "sooner": [RequeueAfter(100), RequeueAfter(50)],
        "retried": [RequeueAfter(100), Retry("conflict")],
    }
    handled: list[str] = []
    settled = asyncio.Event()

    async def handler(key: str) -> QueueOutcome:
        answer = answers[key].pop(0)
        handled.append(key)
        if len(handled) in (3, 6):
            settled.set()
        return answer

    workers = asyncio.create_task(run_workers(queue, 1, handler))
    for key in answers:
        queue.add(key)
    await asyncio.wait_for(settled.wait(), 5)
    assert queue.delayed == 3  # each asked for a look in 100 s
    settled.clear()
    for key in answers:
        queue.add(key)  # the event that brings each back before its delay
    await asyncio.wait_for(settled.wait(), 5)
    await asyncio.sleep(0)  # the last outcome acted on
    # "done": nothing more; "sooner": its new look only; "retried": its retry kept
    # beside the look (the earlier of the two comes).
    assert queue.delayed == 2
    queue.shutdown()
    await asyncio.wait_for(workers, 5)
