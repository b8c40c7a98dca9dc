"""A runnable group: start-up declared as two lists, run in controller-runtime's order.

Each part of a running controller is a :class:`Runnable`: it starts, says when it
has synced (its caches hold their first lists), and stops. A
:class:`RunnableGroup` is given two stages: the caches every replica runs, and
the leader-gated work (reconcile workers, resync, ...). It starts the caches in
order, waits for each to sync, then (after the campaign, if any) starts the
leader-gated ones; it stops everything it started in reverse order, also when
a start fails half-way or the stage is cancelled (a lost lease).

A stop is *graceful* when its stage ended because it was asked to (``until``
set): reconcile workers drain, pending Events are written, the APIService goes.
Otherwise (a failure, a cancellation) each part ends at once and writes nothing
more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "CacheRunnable",
    "Campaign",
    "ListingRunnable",
    "LoopRunnable",
    "Runnable",
    "RunnableGroup",
    "StepsRunnable",
    "SyncState",
    "SyncedCache",
]

_log = logging.getLogger(__name__)

# Runs the leader's work (its argument) once this replica leads; returns when that ends.
Campaign = Callable[[Callable[[], Coroutine[Any, Any, None]]], Awaitable[None]]


class Runnable(Protocol):
    """One part of a running controller, started and stopped by a :class:`RunnableGroup`."""

    @property
    def name(self) -> str: ...

    async def start(self) -> None:
        """Begin its work; returns once it runs (not once it has synced)."""

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until it is ready (its first lists are in), at most ``timeout`` seconds
        beyond its own bound, if it has one; False when the wait ended before."""

    async def stop(self, *, graceful: bool) -> None:
        """End its work; ``graceful``: its stage was asked to stop (drain, say goodbye),
        else it failed or was cancelled (end at once, write nothing more)."""


def _bound(own: float | None, given: float | None) -> float | None:
    """The shorter of two optional bounds (None: none)."""
    if own is None or given is None:
        return own if given is None else given
    return min(own, given)


async def _within(timeout: float | None, wait: Callable[[], Awaitable[None]]) -> bool:
    try:
        async with asyncio.timeout(timeout):
            await wait()
    except TimeoutError:
        return False
    return True


class SyncedCache(Protocol):
    """What an informer, the queue gate and the RelayQueue cache have in common."""

    def start(self) -> None: ...

    async def wait_synced(self) -> None: ...

    async def stop(self) -> None: ...


class SyncState(Protocol):
    """What readiness reads of one informer: whether it has listed, and what failed last."""

    @property
    def name(self) -> str: ...

    @property
    def has_synced(self) -> bool: ...

    @property
    def last_error(self) -> Exception | None: ...


@dataclass
class CacheRunnable:
    """A cache: started, synced when its first list is in, stopped. ``watched`` are its
    informers, for readiness to say which one has not synced and why."""

    name: str
    cache: SyncedCache
    # None: the group waits until it has synced.
    sync_timeout: float | None = None
    watched: Sequence[SyncState] = ()
    started_at: float | None = field(default=None, init=False)

    async def start(self) -> None:
        self.started_at = asyncio.get_running_loop().time()
        self.cache.start()

    def waiting(self, now: float) -> str | None:
        """Why it is not synced yet (None: synced, or not started); ``now`` is the loop's
        time. Its informers' last errors say why: a list that keeps failing, say."""
        if self.started_at is None:
            return None
        behind = [informer for informer in self.watched if not informer.has_synced]
        if not behind:
            return None
        said = "; ".join(
            f"{informer.name}: {informer.last_error or 'listing'}" for informer in behind
        )
        return f"not synced after {now - self.started_at:.0f}s: {said}"

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return await _within(_bound(self.sync_timeout, timeout), self.cache.wait_synced)

    async def stop(self, *, graceful: bool) -> None:
        await self.cache.stop()


@dataclass
class StepsRunnable:
    """A runnable made of its steps (each optional); ``stop_graceful_only``: its stop is a
    goodbye (a write) made only when the stage ends as asked."""

    name: str
    # Plain or async: what begins its work.
    on_start: Callable[[], Awaitable[None] | None] | None = None
    until_synced: Callable[[], Awaitable[None]] | None = None
    on_stop: Callable[[], Awaitable[None]] | None = None
    stop_graceful_only: bool = False

    async def start(self) -> None:
        if self.on_start is not None and (begun := self.on_start()) is not None:
            await begun

    async def wait_synced(self, timeout: float | None = None) -> bool:
        if self.until_synced is None:
            return True
        return await _within(timeout, self.until_synced)

    async def stop(self, *, graceful: bool) -> None:
        if self.on_stop is not None and (graceful or not self.stop_graceful_only):
            await self.on_stop()


@dataclass
class ListingRunnable:
    """A start that lists and waits (bounded) for its own first lists, run in the
    background so that the next runnables start meanwhile; synced when it returns."""

    name: str
    listing: Callable[[], Coroutine[Any, Any, None]]
    on_stop: Callable[[], Awaitable[None]]
    task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.listing(), name=self.name)

    async def wait_synced(self, timeout: float | None = None) -> bool:
        task = self.task
        if task is None:
            return False
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if task in done:
            task.result()  # its failure is the start's
            return True
        return False

    async def stop(self, *, graceful: bool) -> None:
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        await self.on_stop()


@dataclass
class LoopRunnable:
    """Work that runs until stopped, as a task: cancelled at a stop, or (``drain`` given
    and the stop graceful) told to finish and awaited. A failure ends its stage."""

    name: str
    work: Callable[[], Coroutine[Any, Any, None]]
    # Asks the work to finish what it holds and return (e.g. a work queue's shutdown).
    drain: Callable[[], None] | None = None
    task: asyncio.Task[None] | None = field(default=None, init=False)
    _failure_told: bool = field(default=False, init=False)

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.work(), name=self.name)

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    def failure(self) -> BaseException | None:
        """Its task's error, once it ended with one (said once: a stop does not repeat it)."""
        task = self.task
        if self._failure_told or task is None or not task.done() or task.cancelled():
            return None
        error = task.exception()
        if error is not None:
            self._failure_told = True
        return error

    async def stop(self, *, graceful: bool) -> None:
        task = self.task
        if task is None:
            return
        if graceful and self.drain is not None:
            self.drain()
        else:
            task.cancel()
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:  # stopped at once while draining: no longer drained
            task.cancel()
            await asyncio.wait({task})
            raise
        if (error := self.failure()) is not None:
            raise error


@dataclass
class RunnableGroup:
    """The caches every replica runs and the work only a leader does, in that order."""

    caches: Sequence[Runnable]
    leader_gated: Sequence[Runnable]

    async def run(
        self,
        until: asyncio.Event,
        *,
        on_synced: Callable[[], None] = lambda: None,
        campaign: Campaign | None = None,
    ) -> None:
        """Start the caches in order and wait for each to sync, call ``on_synced``, then
        lead (at once, or through ``campaign``) until ``until`` is set; everything
        started is stopped in reverse order."""
        async with self._running(self.caches, sync=True):
            on_synced()
            if campaign is None:
                await self.lead(until)
            else:
                await campaign(lambda: self.lead(until))

    async def lead(self, until: asyncio.Event) -> None:
        """Start the leader-gated runnables in order; stop them in reverse once ``until``
        is set (graceful), a loop of theirs fails, or this is cancelled."""
        async with self._running(self.leader_gated, sync=False):
            loops = [r for r in self.leader_gated if isinstance(r, LoopRunnable)]
            await _until_set_or_failed(until, loops)
            _log.info("stopping")

    @contextlib.asynccontextmanager
    async def _running(self, stage: Sequence[Runnable], *, sync: bool) -> AsyncIterator[None]:
        started: list[Runnable] = []
        try:
            for runnable in stage:
                # One whose start fails may have begun: it is stopped too.
                started.append(runnable)
                _log.debug("starting %s", runnable.name)
                await runnable.start()
            if sync:
                for runnable in stage:
                    if not await runnable.wait_synced():
                        _log.debug("%s: not synced within its bound; going on", runnable.name)
            yield
        except BaseException:
            # What ended the stage is what the caller hears of; a stop's error is logged.
            await _stop(started, graceful=False, raising=False)
            raise
        if (error := await _stop(started, graceful=True, raising=True)) is not None:
            raise error


async def _until_set_or_failed(until: asyncio.Event, loops: Sequence[LoopRunnable]) -> None:
    waiting: asyncio.Future[Any] = asyncio.ensure_future(until.wait())
    running: dict[asyncio.Future[Any], LoopRunnable] = {
        loop.task: loop for loop in loops if loop.task is not None
    }
    try:
        while not waiting.done():
            done, _ = await asyncio.wait({waiting, *running}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                loop = running.pop(task, None)
                if loop is not None and (error := loop.failure()) is not None:
                    raise error
    finally:
        waiting.cancel()


async def _stop(
    started: Sequence[Runnable], *, graceful: bool, raising: bool
) -> BaseException | None:
    """Stop each in reverse order; after one fails (or a cancellation comes) the rest end
    at once. Each error is logged; with ``raising``, returns what the caller raises: a
    cancellation that came meanwhile, else the first error."""
    first: BaseException | None = None
    cancelled: asyncio.CancelledError | None = None
    for runnable in reversed(started):
        try:
            _log.debug("stopping %s", runnable.name)
            await runnable.stop(graceful=graceful)
        except asyncio.CancelledError as error:  # honoured once all have stopped
            graceful, cancelled = False, error
        except Exception as error:
            graceful = False
            if raising and first is None:
                first = error
            _log.error("stopping %s failed: %r", runnable.name, error)
    if not raising:
        return None
    return cancelled if cancelled is not None else first
