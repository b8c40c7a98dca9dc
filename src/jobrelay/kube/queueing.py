"""A work queue of keys with client-go's guarantees, for asyncio.

- A key waits at most once: adding it again while it waits is a no-op, so a
  burst of watch events for one Job costs one reconcile.
- A key is never handed to two workers at once: re-added while processing, it
  is queued again only when the worker calls :meth:`WorkQueue.done`.
- Failures back off per key (exponentially) and, optionally, through a
  global token bucket, so a broken apiserver is not hammered by retries.

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
from typing import Generic, TypeVar

from jobrelay.kube.api import ApiError

__all__ = ["Backoff", "QueueOptions", "QueueShutDown", "WorkQueue", "run_workers"]

_log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """A handler's answer: look at the key again soon, backing off per key.

    For races that the next watch event usually resolves (a conflict, a cache
    that has not caught up): retried at once at first, then ever more slowly,
    never at a fixed pace forever; and not an error, so not logged as one.
    """

    why: str


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Retry pacing for :meth:`WorkQueue.add_rate_limited`. Delays are in seconds."""

    base_delay: float = 0.005  # first retry; doubles on each further failure of the key
    max_delay: float = 60.0
    # Global token bucket over all rate-limited adds (None: no global limit):
    # sustained retries per second, and how many may go at once.
    qps: float | None = None
    burst: int = 100


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


class WorkQueue(Generic[K]):
    """A deduplicating, delay-capable, rate-limited queue of keys (see module doc)."""

    def __init__(self, options: QueueOptions | None = None) -> None:
        self._options = options or QueueOptions()
        self._ready: deque[K] = deque()
        # Keys that need processing: waiting in _ready, or to requeue at done().
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        # When each key in _ready was added (monotonic), oldest first: for metrics.
        self._waiting_since: dict[K, float] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        # Delayed keys: a heap ordered by due time, plus each key's earliest due
        # time; heap entries that no longer match it are stale and skipped.
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._failures: dict[K, int] = {}
        self._bucket = (
            _TokenBucket(self._options.qps, self._options.burst) if self._options.qps else None
        )

    def __len__(self) -> int:
        """Keys ready to be handed out now (not counting delayed or in-process keys)."""
        return len(self._ready)

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
        for since in self._waiting_since.values():
            return max(0.0, (time.monotonic() if now is None else now) - since)
        return 0.0

    @property
    def is_shut_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # done() will queue it again
        self._ready.append(key)
        self._waiting_since[key] = time.monotonic()
        self._wake_one_getter()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed (at the earliest requested time)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if (current := self._due.get(key)) is not None and current <= due:
            return
        self._due[key] = due
        heapq.heappush(self._delayed, (due, next(self._sequence), key))
        if self._timer is None or due < self._timer_due:
            self._arm_timer(loop, due)

    def add_rate_limited(self, key: K) -> float:
        """Add ``key`` after its backoff (and the global bucket) allow; returns the delay.

        Each call counts a failure of ``key``: delays go base, 2*base, 4*base …
        up to max_delay, until :meth:`forget`.
        """
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        opts = self._options
        # min() before the power would overflow float for a key failing for days.
        delay = opts.base_delay * 2.0 ** min(failures, 64)
        delay = min(delay, opts.max_delay)
        if self._bucket is not None:
            delay = max(delay, self._bucket.reserve(asyncio.get_running_loop().time()))
        self.add_after(key, delay)
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
            if self._ready:
                key = self._ready.popleft()
                self._waiting_since.pop(key, None)
                self._processing.add(key)
                self._dirty.discard(key)
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
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._ready.append(key)
            self._waiting_since[key] = time.monotonic()
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
        self._ready.clear()
        self._waiting_since.clear()
        self._dirty.clear()
        self._delayed.clear()
        self._due.clear()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)

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
            if self._due.get(key) == due:  # else: stale, superseded by an earlier due
                del self._due[key]
                self.add(key)
        if self._delayed:
            self._arm_timer(loop, self._delayed[0][0])


async def run_workers(
    queue: WorkQueue[K],
    workers: int,
    handler: Callable[[K], Awaitable[float | Backoff | None]],
    *,
    name: str = "worker",
) -> None:
    """Process keys with ``workers`` concurrent loops until the queue shuts down.

    Each loop takes a key, awaits ``handler(key)`` and releases the key. An
    exception is logged with the key and the key retried with backoff (an
    apiserver's refusal or silence in one line, anything else with its
    traceback); :class:`Backoff` retries with backoff quietly; a number asks
    to see the key again after that many seconds (like controller-runtime's
    RequeueAfter); None means done.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")

    async def work() -> None:
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            try:
                requeue_after = await handler(key)
            except ApiError as error:
                delay = queue.add_rate_limited(key)
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
                delay = queue.add_rate_limited(key)
                _log.exception(
                    "%s: processing %r failed (attempt %d), retrying in %.3fs",
                    name,
                    key,
                    queue.num_requeues(key),
                    delay,
                )
            else:
                if isinstance(requeue_after, Backoff):
                    delay = queue.add_rate_limited(key)
                    _log.debug("%s: %s again in %.3fs: %s", name, key, delay, requeue_after.why)
                    continue
                queue.forget(key)
                if requeue_after is not None:
                    queue.add_after(key, requeue_after)
            finally:
                queue.done(key)

    async with asyncio.TaskGroup() as group:
        for index in range(workers):
            group.create_task(work(), name=f"{name}-{index}")
