"""The start-up caches, waited on for a bounded time, and readiness said from them.

A cache of tenants' objects that cannot list (a page or an object too long, a
refused list) must not hold the whole start-up: each cache gets
:data:`CACHE_SYNC_BOUND` seconds, then the start-up goes on (the probes, the worker
pool, the aggregated API). Leading waits for every cache instead
(:meth:`StartupCaches.synced_or`): a replica campaigns for the Lease only then, so a
replica whose caches do list can lead meanwhile, and nothing reconciles on an
incomplete cache (an unsynced management cache would make every mirror look
orphaned, a queue's usage would be counted without a kind). Meanwhile ``/readyz``
answers 503 and says which cache has not synced and why (:meth:`StartupCaches.waiting`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from jobrelay.controller.runnables import CacheRunnable

__all__ = ["CACHE_SYNC_BOUND", "StartupCaches"]

_log = logging.getLogger(__name__)

# How long the start-up waits for one cache before it goes on without it (seconds).
CACHE_SYNC_BOUND = 30.0


class StartupCaches:
    """The caches of :meth:`Controller._every_replica`, and what waits for them."""

    def __init__(self, caches: Sequence[CacheRunnable] = ()) -> None:
        self.caches = tuple(caches)

    def waiting(self) -> dict[str, str]:
        """Each started cache that has not synced, and why (empty: all synced)."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # read outside the loop (a test): nothing started there
            return {}
        said = {cache.name: cache.waiting(now) for cache in self.caches}
        return {name: why for name, why in said.items() if why is not None}

    def went_on_without(self) -> bool:
        """Whether the start-up went on without a cache (bound passed): logged, saying why."""
        if waiting := self.waiting():
            _log.warning(
                "start-up goes on without caches not synced within %gs: %s",
                CACHE_SYNC_BOUND,
                "; ".join(f"{cache}: {why}" for cache, why in waiting.items()),
                extra={"event": "caches-waiting"},
            )
        return bool(waiting)

    async def all_synced(self) -> None:
        """Return once every cache has synced (each informer's own wait: no polling)."""
        for cache in self.caches:
            if cache.waiting(0.0) is not None:
                await cache.cache.wait_synced()

    async def synced_or(self, stop: asyncio.Event) -> bool:
        """Wait until every cache has synced (True) or ``stop`` is set first (False); what
        is still missing is logged once when the wait begins."""
        if waiting := self.waiting():
            _log.warning(
                "leading waits for caches not synced: %s",
                "; ".join(f"{cache}: {why}" for cache, why in waiting.items()),
                extra={"event": "caches-waiting"},
            )
        synced = asyncio.ensure_future(self.all_synced())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (synced, stopped):
                task.cancel()
        if synced.done() and not synced.cancelled():
            synced.result()  # a cache stopped before it synced: the start's failure
            if waiting:
                _log.info("every cache synced", extra={"event": "caches-synced"})
            return True
        return False
