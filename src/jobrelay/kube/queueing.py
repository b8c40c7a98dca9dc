"""A work queue of keys with client-go's guarantees, for asyncio, in priority lanes.

- A key waits at most once: adding it again while it waits is a no-op, so a
  burst of watch events for one Job costs one reconcile.
- A key is never handed to two workers at once: re-added while processing, it
  is queued again only when the worker calls :meth:`WorkQueue.done`.
- Failures back off per key (exponentially) and, optionally, through a
  global token bucket, so a broken apiserver is not hammered by retries.
- Keys wait in lanes (:class:`Lane`): a new placement does not queue behind status
  copies, nor those behind a resync. A key added again at a better lane than
  the one it waits in moves up (its old entry is skipped when reached, so
  every operation stays O(1)); re-added while processing, it comes back at
  the best lane it was asked for.
- Strict priority could starve a lower lane forever under a flood, so it is
  bounded: once a waiting lane has been passed over
  ``QueueOptions.starvation_limit`` times in a row, it is served once. A count
  rather than an age: no clock, the same answer in every test, and a
  saturated queue still gives the higher lanes all but 1 in
  ``starvation_limit + 1`` of its hand-outs per starving lane.

Everything runs on one event loop: ``add`` is synchronous so informer
handlers can call it directly, and delayed keys wait on a single loop timer
(no polling).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.outcome import Done, Lane, QueueOutcome, RequeueAfter, Retry, Terminal

__all__ = [
    "Done",
    "Lane",
    "QueueOptions",
    "QueueOutcome",
    "QueueShutDown",
    "RequeueAfter",
    "Retry",
    "Terminal",
    "WorkQueue",
    "run_workers",
]

_log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down."""


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Retry pacing for :meth:`WorkQueue.add_rate_limited`, named like the controller's
    flags (``--retry-base-delay`` ...). Delays are in seconds. These defaults are a bare
    queue's (the fleet's own); the controller's are in controller/options.py."""

    retry_base_delay: float = 0.005  # first retry; doubles on each further failure of the key
    retry_max_delay: float = 60.0
    # Global token bucket over all rate-limited adds (None: no global limit):
    # sustained retries per second, and how many may go at once.
    retry_qps: float | None = None
    retry_burst: int = 100
    # Hand-outs from higher lanes in a row before a waiting lower lane gets one. Two:
    # under a saturated 20 Jobs/s a larger one let status copies back up for seconds.
    starvation_limit: int = 2

    def __post_init__(self) -> None:
        if self.starvation_limit < 1:  # 0 would serve the lower lanes first
            raise ValueError(f"starvation_limit must be at least 1, not {self.starvation_limit}")


class _TokenBucket:
    """Reservations on a token bucket: how long until the next token is ours."""

    def __init__(self, qps: float, burst: int) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last: float | None = None

    def reserve(self, now: float) -> float:
        if self._last is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        # Going negative books future tokens, like golang.org/x/time/rate's Reserve.
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps


class _Waiting(NamedTuple):
    """A ready key's live entry: which lane entry is it, and since when it waits."""

    entry: int  # the number of its live lane entry; others for the key are stale
    lane: Lane
    since: float  # monotonic


class _Delayed(NamedTuple):
    due: float  # loop time
    lane: Lane


_LANES = tuple(Lane)


class WorkQueue(Generic[K]):
    """A deduplicating, delay-capable, rate-limited queue of keys in lanes (see module doc)."""

    def __init__(self, options: QueueOptions | None = None) -> None:
        self._options = options or QueueOptions()
        # Per lane, (entry number, key) in order of arrival; an entry whose number is
        # not the key's live one in _waiting is stale (the key moved up, or left).
        self._lanes: tuple[deque[tuple[int, K]], ...] = tuple(deque() for _ in _LANES)
        # Live entries per lane, and how many hand-outs in a row passed each waiting lane.
        self._counts = [0] * len(_LANES)
        self._passed_over = [0] * len(_LANES)
        # Ready keys, oldest first (dict order: for oldest_age).
        self._waiting: dict[K, _Waiting] = {}
        # Keys handed out, with the lane each was handed out at.
        self._processing: dict[K, Lane] = {}
        # Keys added while processing: queued at done(), at the best lane asked for.
        self._readded: dict[K, Lane] = {}
        self._entries = itertools.count()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        # Delayed keys: a heap ordered by due time, plus each key's earliest due
        # time (and best lane); heap entries that no longer match it are stale.
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, _Delayed] = {}
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._failures: dict[K, int] = {}
        self._bucket = (
            _TokenBucket(self._options.retry_qps, self._options.retry_burst)
            if self._options.retry_qps
            else None
        )

    def __len__(self) -> int:
        """Keys ready to be handed out now (not counting delayed or in-process keys)."""
        return len(self._waiting)

    def waiting_in(self, lane: Lane) -> int:
        """Keys ready to be handed out now in ``lane``."""
        return self._counts[lane]

    @property
    def delayed(self) -> int:
        """Keys waiting out a delay (backoff or requeue-after)."""
        return len(self._due)

    @property
    def in_progress(self) -> int:
        """Keys handed out and not done yet."""
        return len(self._processing)

    def oldest_age(self, now: float | None = None) -> float:
        """Seconds the longest-waiting ready key has waited (0 when none waits)."""
        for waiting in self._waiting.values():
            return max(0.0, (time.monotonic() if now is None else now) - waiting.since)
        return 0.0

    def lane_of(self, key: K) -> Lane | None:
        """The lane ``key`` was handed out at, while it is processed (None otherwise)."""
        return self._processing.get(key)

    @property
    def is_shut_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K, lane: Lane = Lane.FRESH) -> None:
        """Queue ``key`` in ``lane``, unless it already waits there or higher."""
        if self._shutting_down:
            return
        if key in self._processing:
            readded = self._readded.get(key)
            if readded is None or lane < readded:
                self._readded[key] = lane  # done() queues it again
            return
        waiting = self._waiting.get(key)
        if waiting is None:
            self._push(key, lane, time.monotonic())
            self._wake_one_getter()
        elif lane < waiting.lane:
            # Moves up; its entry in the lower lane goes stale (skipped when reached).
            self._counts[waiting.lane] -= 1
            self._push(key, lane, waiting.since)

    def add_after(self, key: K, delay: float, lane: Lane = Lane.FRESH) -> None:
        """Add ``key`` in ``lane`` once ``delay`` seconds have passed (at the earliest
        requested time, in the best lane requested)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key, lane)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if (current := self._due.get(key)) is not None and current.due <= due:
            if lane < current.lane:
                self._due[key] = current._replace(lane=lane)
            return
        self._due[key] = _Delayed(due, lane if current is None else min(lane, current.lane))
        heapq.heappush(self._delayed, (due, next(self._sequence), key))
        if self._timer is None or due < self._timer_due:
            self._arm_timer(loop, due)

    def cancel_delayed(self, key: K) -> None:
        """Drop ``key``'s delayed add, if any (its heap entry is skipped when reached)."""
        self._due.pop(key, None)

    def add_rate_limited(self, key: K, lane: Lane = Lane.FRESH) -> float:
        """Add ``key`` in ``lane`` after its backoff (and the global bucket) allow; returns
        the delay.

        Each call counts a failure of ``key``: delays go base, 2*base, 4*base …
        up to retry_max_delay, until :meth:`forget`.
        """
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        opts = self._options
        # min() before the power would overflow float for a key failing for days.
        delay = opts.retry_base_delay * 2.0 ** min(failures, 64)
        delay = min(delay, opts.retry_max_delay)
        if self._bucket is not None:
            delay = max(delay, self._bucket.reserve(asyncio.get_running_loop().time()))
        self.add_after(key, delay, lane)
        return delay

    def forget(self, key: K) -> None:
        """Reset the failure count of ``key`` (call it once the key succeeded)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """Failures of ``key`` since it was last forgotten."""
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key, which the caller now owns until :meth:`done`.

        Raises QueueShutDown once the queue is shut down.
        """
        while True:
            if self._shutting_down:
                raise QueueShutDown
            if self._waiting:
                key, lane = self._pop(self._next_lane())
                self._processing[key] = lane
                return key
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                # If we were woken and cancelled at once, pass the wake-up on.
                if getter.done() and not getter.cancelled():
                    self._wake_one_getter()
                raise
            finally:
                if getter in self._getters:
                    self._getters.remove(getter)

    def done(self, key: K) -> None:
        """Release ``key``; if it was added meanwhile, it is queued again now."""
        if self._processing.pop(key, None) is None:
            return
        lane = self._readded.pop(key, None)
        if lane is not None and not self._shutting_down:
            self._push(key, lane, time.monotonic())
            self._wake_one_getter()

    def shutdown(self) -> None:
        """Stop: drop waiting and delayed keys, make every get() raise QueueShutDown.

        Nothing is drained: reconciles are level-triggered, so whoever runs
        next rebuilds the queue from the informers' caches.
        """
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for entries in self._lanes:
            entries.clear()
        self._counts = [0] * len(_LANES)
        self._waiting.clear()
        self._readded.clear()
        self._delayed.clear()
        self._due.clear()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)

    def _push(self, key: K, lane: Lane, since: float) -> None:
        entry = next(self._entries)
        self._waiting[key] = _Waiting(entry, lane, since)
        self._lanes[lane].append((entry, key))
        self._counts[lane] += 1

    def _next_lane(self) -> Lane:
        """The best lane with a key waiting, unless a lower one has been passed over
        ``starvation_limit`` times in a row: then the best such one. Needs a key waiting."""
        counts, passed_over = self._counts, self._passed_over
        best = next(lane for lane in _LANES if counts[lane])
        chosen = best
        for lane in _LANES[best + 1 :]:
            if counts[lane] and passed_over[lane] >= self._options.starvation_limit:
                chosen = lane
                break
        for lane in _LANES[best + 1 :]:
            passed_over[lane] = passed_over[lane] + 1 if counts[lane] and lane != chosen else 0
        return chosen

    def _pop(self, lane: Lane) -> tuple[K, Lane]:
        """The oldest live key of ``lane`` (which has one), now no longer waiting."""
        entries = self._lanes[lane]
        while True:
            entry, key = entries.popleft()
            waiting = self._waiting.get(key)
            if waiting is not None and waiting.entry == entry:
                del self._waiting[key]
                self._counts[lane] -= 1
                return key, lane

    def _wake_one_getter(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _arm_timer(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = loop.call_at(due, self._release_due_keys)

    def _release_due_keys(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            delayed = self._due.get(key)
            if delayed is not None and delayed.due == due:  # else: stale, superseded
                del self._due[key]
                self.add(key, delayed.lane)
        if self._delayed:
            self._arm_timer(loop, self._delayed[0][0])


async def run_workers(
    queue: WorkQueue[K],
    workers: int,
    handler: Callable[[K], Awaitable[QueueOutcome]],
    *,
    name: str = "worker",
) -> None:
    """Process keys with ``workers`` concurrent loops until the queue shuts down.

    Each loop takes a key, awaits ``handler(key)`` and releases the key, acting
    on the outcome it answers (jobrelay.vocabulary.outcome): :class:`Done` forgets
    the key; :class:`RequeueAfter` sees it again after that many seconds (like
    controller-runtime's RequeueAfter), in the lane it names; :class:`Retry`
    retries it with backoff, quietly; :class:`Terminal` sees it again only after
    its ``retry_after``, if any. Each of these three states all the key needs from
    then on, so a delayed look an earlier outcome asked for is dropped (unlike
    controller-runtime, where it still fires). An exception is logged with the key and the key
    retried with backoff (an apiserver's refusal or silence in one line, anything
    else with its traceback). Retries and requeues keep the lane the key was
    handed out at unless told otherwise: a placement that hit a conflict stays
    ahead of status copies.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")

    async def work() -> None:
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            handed_out_at = queue.lane_of(key)
            lane = Lane.FRESH if handed_out_at is None else handed_out_at
            try:
                outcome = await handler(key)
            except ApiError as error:
                delay = queue.add_rate_limited(key, lane)
                # A silent apiserver is logged by its client once per outage, not per key.
                _log.log(
                    logging.DEBUG if error.is_unreachable else logging.WARNING,
                    "%s: processing %s failed (attempt %d), retrying in %.3fs: %s",
                    name,
                    key,
                    queue.num_requeues(key),
                    delay,
                    error,
                )
            except Exception:
                delay = queue.add_rate_limited(key, lane)
                _log.exception(
                    "%s: processing %r failed (attempt %d), retrying in %.3fs",
                    name,
                    key,
                    queue.num_requeues(key),
                    delay,
                )
            else:
                if not isinstance(outcome, Retry):
                    # The outcome says all the key needs from now on (a look at a time,
                    # or none): a look an earlier outcome asked for is superseded (a short
                    # Job's look at its mirror record, due after it finished, cost a
                    # reconcile each).
                    queue.cancel_delayed(key)
                match outcome:
                    case Retry(why=why):
                        delay = queue.add_rate_limited(key, lane)
                        _log.debug("%s: %s again in %.3fs: %s", name, key, delay, why)
                    case RequeueAfter(seconds=seconds, lane=wanted):
                        queue.forget(key)
                        queue.add_after(key, seconds, lane if wanted is None else wanted)
                    case Terminal(retry_after=retry_after):
                        queue.forget(key)
                        if retry_after is not None:
                            queue.add_after(key, retry_after, lane)
                    case Done():
                        queue.forget(key)
            finally:
                queue.done(key)
            # A key decided from the caches alone awaits nothing real, and get() does
            # not wait while keys are ready: without this, a sweep of 50,000 such keys
            # would hold the loop for seconds (lease renewals, watches, probes).
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as group:
        for index in range(workers):
            group.create_task(work(), name=f"{name}-{index}")
