"""Informers: one list+watch cache of one kind of object on one apiserver.

The loop is client-go's reflector, minus what we do not need:

1. list (paginated) and replace the cache, emitting adds, updates and the
   deletes of objects that vanished while we were not watching;
2. watch from the list's resourceVersion with bookmarks, so the version we
   resume from stays fresh even when nothing we select changes;
3. when the server ends the watch (timeoutSeconds), watch again from the last
   version; on 410 Gone (refused watch or ERROR event) go back to 1;
4. when nothing at all arrives for ``inactivity_timeout`` (the apiserver sends
   a bookmark about every minute) the connection is presumed dead: watch again;
5. any other failure retries after an exponential backoff with jitter; an answer
   too long to read (a watch line or a LIST page past ApiOptions' caps) relists, and
   the backoff keeps growing until a watch ends cleanly: a worker that replays a
   huge event after a few small ones does not get a re-read every half second.

Nothing polls: between events the informer only awaits the stream.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, ResponseTooLarge
from jobrelay.kube.requesting import WatchRestart
from jobrelay.kube.streams import WatchEvent
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.resource import Resource

__all__ = ["Change", "Informer", "InformerEvent", "InformerOptions", "object_key"]

_log = logging.getLogger(__name__)


def object_key(obj: Mapping[str, Any]) -> str:
    """The cache and work-queue key of an object: ``namespace/name``, or ``name``."""
    return Meta(obj).key


class Change(enum.StrEnum):
    ADDED = "ADDED"
    UPDATED = "UPDATED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class InformerEvent:
    """A change to the cache. ``old`` is None for ADDED, ``new`` is None for DELETED."""

    change: Change
    key: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None

    @property
    def obj(self) -> dict[str, Any]:
        """The newest state known: ``new``, or for a deletion the last one."""
        obj = self.new if self.new is not None else self.old
        assert obj is not None
        return obj


@dataclass(frozen=True, slots=True)
class InformerOptions:
    """Timings of an Informer, in seconds."""

    page_size: int = 500
    # Server-side lifetime of one watch; each watch draws from [t, 2t) so that
    # many informers do not re-arm in lockstep (client-go draws from 5-10 min).
    watch_timeout_seconds: int = 300
    # Must exceed the apiserver's bookmark period (1 minute); two periods
    # tolerate one late bookmark before the connection is declared dead.
    inactivity_timeout: float = 120.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0


class _Backoff:
    def __init__(self, initial: float, maximum: float) -> None:
        self._initial = initial
        self._maximum = maximum
        self._current = initial

    def reset(self) -> None:
        self._current = self._initial

    def next_delay(self) -> float:
        delay = self._current
        self._current = min(self._current * 2, self._maximum)
        # Jitter in [delay/2, delay] spreads out informers that failed together.
        return delay * random.uniform(0.5, 1.0)


class _WatchEnded(Exception):
    """The server closed a watch that never delivered anything (not even a bookmark)."""


Handler = Callable[[InformerEvent], None]
# Returns the object to cache, or None to ignore it (as if it did not exist).
Transform = Callable[[dict[str, Any]], dict[str, Any] | None]


class Informer:
    """A list+watch cache of ``resource`` on one apiserver, optionally narrowed by
    namespace and selectors.

    ``transform`` slims every object before it is cached (keep
    ``metadata.name``, ``namespace`` and ``resourceVersion``), or returns None
    to leave it out, which makes it a filter the apiserver cannot apply (an
    object that stops matching is reported as deleted). Handlers are
    quick synchronous callables (typically: enqueue a key); they run after the
    cache has been updated, so a reconcile that reads the cache sees at least
    the state that triggered it. Cached objects are shared: treat as read-only.
    """

    def __init__(
        self,
        client: ApiClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        options: InformerOptions | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._transform = transform
        self._options = options or InformerOptions()
        self._cache: dict[str, dict[str, Any]] = {}
        self._resource_version = ""
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self._last_error: Exception | None = None
        self._task: asyncio.Task[None] | None = None
        self._backoff = _Backoff(self._options.backoff_initial, self._options.backoff_max)
        # Set by an answer too long to read: events delivered since do not reset the
        # backoff, only a watch that ends cleanly does.
        self._backoff_held = False
        where = f" in {namespace}" if namespace else ""
        selectors = ",".join(s for s in (label_selector, field_selector) if s)
        self.name = f"{client.cluster}/{resource.plural}{where}" + (
            f" [{selectors}]" if selectors else ""
        )

    # -- reading the cache ---------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        return self._cache.get(key)

    def keys(self) -> list[str]:
        return list(self._cache)

    def values(self) -> list[dict[str, Any]]:
        return list(self._cache.values())

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self._cache.items())

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def resource_version(self) -> str:
        """The version the cache reflects (advanced by events and bookmarks)."""
        return self._resource_version

    @property
    def has_synced(self) -> bool:
        """Whether the first list has been cached and handed to the handlers."""
        return self._synced.is_set()

    @property
    def last_error(self) -> Exception | None:
        """Why the last list or watch failed; None once a list or a watch event succeeds."""
        return self._last_error

    # -- lifecycle -------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Register ``handler``; once synced, it first gets an ADDED for every cached object."""
        self._handlers.append(handler)
        if self.has_synced:
            for key, obj in list(self._cache.items()):
                self._call(handler, InformerEvent(Change.ADDED, key, None, obj))

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"informer {self.name} already started")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Stop watching; no handler runs after this returns. The cache stays readable."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            # Re-raise only if it is *our* caller being cancelled, not the task we ended.
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    async def __aenter__(self) -> Informer:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def wait_synced(self) -> None:
        """Wait for the first list to be cached; bound it with ``asyncio.timeout``.

        Raises RuntimeError if the informer is stopped before it synced.
        """
        if self.has_synced:
            return
        task = self._task
        if task is None:
            raise RuntimeError(f"informer {self.name} is not running")
        waiter = asyncio.ensure_future(self._synced.wait())
        try:
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not self.has_synced:
            raise RuntimeError(f"informer {self.name} stopped before it synced")

    # -- the list+watch loop ---------------------------------------------------

    async def _run(self) -> None:
        need_list = True
        while True:
            level = logging.WARNING
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch()
                self._backoff_held = False
                continue  # the server ended the watch after timeoutSeconds: re-arm
            except ApiError as exc:
                self._last_error = exc
                if isinstance(exc, ResponseTooLarge):
                    # The event cannot be skipped: start again past it, from a list.
                    need_list = True
                    self._backoff_held = True
                    problem = str(exc)
                elif exc.is_gone:
                    need_list = True
                    level = logging.INFO  # routine: compaction, an apiserver restart
                    problem = f"resourceVersion {self._resource_version} expired ({exc.message})"
                else:
                    problem = str(exc)
                    if exc.is_unreachable:
                        level = logging.DEBUG  # its client logs the outage once
            except TimeoutError as exc:
                self._last_error = exc
                # Also routine on a quiet resource: an apiserver whose etcd sends no
                # progress notifications (etcd < 3.4.31) sends no bookmarks either.
                level = logging.INFO
                problem = f"no event or bookmark for {self._options.inactivity_timeout:g}s"
            except _WatchEnded:
                problem = "watch ended without any event"
            except Exception as exc:
                self._last_error = exc
                # A bug (in a transform, say): the cache may be half-updated, so
                # start over from a list rather than let the informer die.
                _log.exception("informer %s failed", self.name)
                need_list = True
                problem = "unexpected error"
            self._restarted("relist" if need_list else "rewatch")
            delay = self._backoff.next_delay()
            _log.log(
                level,
                "informer %s: %s; %s in %.2fs",
                self.name,
                problem,
                "relisting" if need_list else "watching again",
                delay,
            )
            await asyncio.sleep(delay)

    def _restarted(self, reason: str) -> None:
        hook = self._client.on_watch_restart
        if hook is None:
            return
        try:
            hook(WatchRestart(self._client.cluster, self._resource.kind, reason))
        except Exception:
            # Metrics must never stop an informer.
            _log.exception("on_watch_restart hook failed")

    async def _relist(self) -> None:
        result = await self._client.list(
            self._resource,
            namespace=self._namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            limit=self._options.page_size,
            # Per page: a relist of many large objects never holds them all unslimmed.
            transform=self._transform,
        )
        old_cache = self._cache
        new_cache: dict[str, dict[str, Any]] = {}
        events: list[InformerEvent] = []
        for new in result.items:
            key = object_key(new)
            old = old_cache.get(key)
            new_cache[key] = new
            if old is None:
                events.append(InformerEvent(Change.ADDED, key, None, new))
            elif _version_of(old) is None or _version_of(old) != _version_of(new):
                events.append(InformerEvent(Change.UPDATED, key, old, new))
        events.extend(
            InformerEvent(Change.DELETED, key, old, None)
            for key, old in old_cache.items()
            if key not in new_cache
        )
        self._cache = new_cache
        self._resource_version = result.resource_version
        _log.debug(
            "informer %s: listed %d objects at %s",
            self.name,
            len(new_cache),
            result.resource_version,
        )
        self._last_error = None
        for event in events:
            self._dispatch(event)
        self._synced.set()

    async def _watch(self) -> None:
        opts = self._options
        timeout_seconds = random.randrange(
            opts.watch_timeout_seconds, 2 * opts.watch_timeout_seconds
        )
        loop = asyncio.get_running_loop()
        delivered = False
        # One deadline pushed forward on every event: cheaper than a timeout per read.
        async with asyncio.timeout(opts.inactivity_timeout) as deadline:
            async with self._client.watch(
                self._resource,
                namespace=self._namespace,
                label_selector=self._label_selector,
                field_selector=self._field_selector,
                resource_version=self._resource_version,
                timeout_seconds=timeout_seconds,
            ) as events:
                async for event in events:
                    deadline.reschedule(loop.time() + opts.inactivity_timeout)
                    self._apply(event)
                    if not delivered:
                        delivered = True
                        self._last_error = None
                        if not self._backoff_held:
                            # The watch works: the next failure starts afresh.
                            self._backoff.reset()
        if not delivered:
            # A healthy watch sends at least one bookmark before it times out; one
            # that closes empty-handed, over and over, must not become a busy loop.
            raise _WatchEnded

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        if event.type == "ERROR":
            raise ApiError.from_status(obj)
        version = _version_of(obj)
        if event.type == "BOOKMARK":
            if version:
                self._resource_version = version
            return
        key = object_key(obj)
        new = self._transform(obj) if self._transform else obj
        if new is None:
            # Filtered out: an object that stops matching leaves the cache as if deleted.
            old = self._cache.pop(key, None)
            if old is not None:
                self._dispatch(InformerEvent(Change.DELETED, key, old, None))
        elif event.type in ("ADDED", "MODIFIED"):
            # After a re-watch an ADDED may concern a known object, and vice versa.
            old = self._cache.get(key)
            self._cache[key] = new
            change = Change.ADDED if old is None else Change.UPDATED
            self._dispatch(InformerEvent(change, key, old, new))
        elif event.type == "DELETED":
            self._cache.pop(key, None)
            # The deleted object's final state is fresher than what we cached.
            self._dispatch(InformerEvent(Change.DELETED, key, new, None))
        else:
            _log.warning("informer %s: ignoring watch event of type %r", self.name, event.type)
        if version:
            self._resource_version = version

    def _dispatch(self, event: InformerEvent) -> None:
        for handler in self._handlers:
            self._call(handler, event)

    def _call(self, handler: Handler, event: InformerEvent) -> None:
        try:
            handler(event)
        except Exception:
            # One broken handler must not starve the others or stop the informer.
            _log.exception(
                "informer %s: handler failed on %s %s", self.name, event.change, event.key
            )


def _version_of(obj: Mapping[str, Any]) -> str | None:
    return Meta(obj).resource_version or None
