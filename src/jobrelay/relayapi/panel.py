"""The panel's feed: its views built from the controller's caches, pushed to watchers.

Every view (``panel_rules``: fleet, queues, workloads) is built from what the
controller already caches (WorkerClusters, RelayQueues, the managed workloads),
never from one apiserver read per viewer. A workload's row is rebuilt only when its
object's resourceVersion changed. While anyone watches, one pass a second
(``interval``) finds what changed since the last one and encodes each change once,
whatever the number of viewers: for workloads, only the keys the informers said
changed are looked at (the fleet and the queues are a few rows, compared whole).
Each watcher gets the lines its access lets it see. A watcher that falls too far
behind is ended (its client reconnects and starts over), so a slow viewer costs
memory only up to its bound.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.watching import InformerEvent
from jobrelay.relayapi import panel_rules
from jobrelay.relayapi.panel_estimates import PanelEstimates
from jobrelay.relayapi.panel_rules import FLEET, QUEUES, WORKLOADS, Row, WatchChange
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import QUEUE_LABEL

__all__ = ["Access", "PanelFeed", "TooManyWatches", "WatchStream", "WorkloadCache"]

_log = logging.getLogger(__name__)

# A watcher more than this many bytes behind is ended.
MAX_BEHIND_BYTES = 16 * 1024 * 1024
# A watcher's lines are written in pieces of about this size, each waiting for the
# client to take the last (a new viewer's thousands of rows never sit in memory twice).
CHUNK_BYTES = 64 * 1024
# A quiet watch gets a BOOKMARK this often, so a viewer gone away is noticed.
HEARTBEAT = 30.0
# SubjectAccessReviews one viewer's request has in flight at once (a tenant's list over
# a thousand namespaces asks them a few at a time, not all at once).
REVIEWS_AT_ONCE = 8
# A watch ends after this long (the client reconnects), as the apiserver's own do.
WATCH_LIFETIME = 1800.0
# The scopes (kind, namespace) that have workloads are counted again at most this often.
SCOPES_MAX_AGE = 1.0


class WorkloadCache(Protocol):
    """A kind's management objects (the runner's informer)."""

    def items(self) -> list[tuple[str, dict[str, Any]]]: ...

    def get(self, key: str) -> dict[str, Any] | None: ...

    def add_handler(self, handler: Callable[[InformerEvent], None]) -> None: ...


class PanelKind(Protocol):
    @property
    def kind(self) -> WorkloadKind: ...

    @property
    def objects(self) -> WorkloadCache: ...


class TooManyWatches(Exception):
    """More watches than the API allows (429)."""


def scope_of(row_id: str) -> str:
    """A workload row's scope, ``plural/namespace`` (what access is decided for)."""
    plural, _, rest = row_id.partition("/")
    return f"{plural}/{rest.partition('/')[0]}"


class Access:
    """Which workload scopes (``plural/namespace``) one viewer may see.

    ``everywhere``: the plurals it may list in every namespace. Any other scope is
    asked once (``check(plural, namespace)``, a SubjectAccessReview) and remembered
    for the viewer's request or watch; ``on_granted`` hears of a scope found visible
    after the viewer started (its rows are sent then).
    """

    def __init__(
        self,
        everywhere: Iterable[str],
        check: Callable[[str, str], Awaitable[bool]],
        known: Callable[[str, str], bool | None],
        *,
        only_namespace: str = "",
    ) -> None:
        self._everywhere = frozenset(everywhere)
        self._check = check
        self._known = known
        self._only_namespace = only_namespace
        # The scopes whose rows this viewer was shown (not answers: those are the one
        # review cache's, access_reviews.py, and expire there).
        self._shown: set[str] = set()
        self._asking: dict[str, asyncio.Task[None]] = {}
        # Scopes whose review could not be made (the manager did not answer it).
        self._unanswered: set[str] = set()
        self._reviews = asyncio.Semaphore(REVIEWS_AT_ONCE)
        self.on_granted: Callable[[str], None] | None = None

    def visible(self, scope: str) -> bool:
        """Whether rows of ``scope`` may be shown now; an undecided scope is asked (and
        shown once granted)."""
        plural, _, namespace = scope.partition("/")
        if self._only_namespace and namespace != self._only_namespace:
            return False
        if plural in self._everywhere:
            return True
        answer = self._known(plural, namespace)
        if answer is None:  # not asked yet, or its answer expired: shown as it was meanwhile
            self._ask_soon(scope)
            return scope in self._shown
        if not answer:
            self._shown.discard(scope)
            return False
        if scope not in self._shown:  # granted, answered for someone else's question
            self._ask_soon(scope)  # its rows are sent together when the answer is taken
            return False
        return True

    def _ask_soon(self, scope: str) -> None:
        if scope not in self._asking:
            self._asking[scope] = asyncio.get_running_loop().create_task(self._ask(scope))

    async def _ask(self, scope: str) -> None:
        plural, _, namespace = scope.partition("/")
        try:
            async with self._reviews:
                granted = await self._check(plural, namespace)
        except Exception as error:  # the review could not be made: asked again next time
            _log.info("panel: cannot tell whether rows of %s may be shown: %s", scope, error)
            self._unanswered.add(scope)
            return
        finally:
            self._asking.pop(scope, None)
        self._unanswered.discard(scope)
        if not granted:
            self._shown.discard(scope)
        elif scope not in self._shown:
            self._shown.add(scope)
            if self.on_granted is not None:
                self.on_granted(scope)

    async def settle(self, scopes: Iterable[str]) -> None:
        """Decide every scope of ``scopes`` before answering a list."""
        for scope in scopes:
            self.visible(scope)
        if self._asking:
            await asyncio.gather(*self._asking.values(), return_exceptions=True)

    async def any_visible(self, scopes: Iterable[str]) -> bool | None:
        """Whether rows of any of ``scopes`` may be shown (each decided first); None when
        none may as far as the manager answered, but some review could not be made."""
        wanted = set(scopes)
        if self._everywhere and not self._only_namespace:
            return True
        await self.settle(wanted)
        if any(self.visible(scope) for scope in wanted):
            return True
        return None if self._unanswered & wanted else False

    def close(self) -> None:
        for task in self._asking.values():
            task.cancel()


class Watcher:
    """One viewer's watch: the lines it has not taken yet, bounded."""

    def __init__(self, view: str, access: Access | None, user: str = "") -> None:
        self.view = view
        self.access = access
        self.user = user
        self.ended = False
        self._lines: collections.deque[bytes] = collections.deque()
        self._behind = 0
        self._ready = asyncio.Event()
        self.overflowed = False

    def visible(self, row_id: str) -> bool:
        return self.access is None or self.access.visible(scope_of(row_id))

    def send(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            if self.overflowed:
                return
            self._lines.append(line)
            self._behind += len(line)
            if self._behind > MAX_BEHIND_BYTES:
                self.overflowed = True
                self._lines.clear()
        self._ready.set()

    async def chunks(self, lifetime: float) -> AsyncIterator[bytes]:
        """What the viewer reads: pending lines, joined in pieces of about CHUNK_BYTES;
        BOOKMARKs while quiet."""
        loop = asyncio.get_running_loop()
        end = loop.time() + lifetime
        while not self.overflowed:
            left = end - loop.time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(HEARTBEAT, left)):
                    await self._ready.wait()
            self._ready.clear()
            if not self._lines:
                yield panel_rules.BOOKMARK
                continue
            while self._lines and not self.overflowed:
                piece, size = [], 0
                while self._lines and size < CHUNK_BYTES:
                    line = self._lines.popleft()
                    piece.append(line)
                    size += len(line)
                self._behind -= size
                yield b"".join(piece)
        _log.info("ended a panel watch of %s that fell behind", self.view)


class WatchStream:
    """A watch's chunks (an async iterator): closing it ends the watch, read or not, so
    that a watch the server never started to send still gives its place back."""

    def __init__(self, chunks: AsyncGenerator[bytes, None], end: Callable[[], None]) -> None:
        self._chunks = chunks
        self.end = end

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> bytes:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        try:
            await self._chunks.aclose()
        finally:
            self.end()


class PanelFeed:
    """The panel's views and their watchers, bounded in all and per user."""

    def __init__(
        self,
        kinds: Mapping[str, PanelKind],
        registrations: Callable[[], Iterable[Mapping[str, Any]]],
        queues: Callable[[], Iterable[Mapping[str, Any]]],
        *,
        queue_of: Callable[[str, str], str] = lambda _namespace, named: named,
        interval: float = 1.0,
        max_watches: int = 200,
        max_watches_per_user: int = 20,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        # A workload's RelayQueue, by its namespace and its label: the controller hands
        # admission's own rule (admission.queue_choice.queue_name, as `jobrelay get` says it).
        self._queue_of = queue_of
        self._kinds = kinds
        self._registrations = registrations
        self._queues = queues
        self._interval = interval
        self._max_watches = max_watches
        self._max_watches_per_user = max_watches_per_user
        # Watches open by user name.
        self._per_user: collections.Counter[str] = collections.Counter()
        self._clock = clock
        # The scopes that have workloads, and when they were counted.
        self._scopes: tuple[float, frozenset[str]] | None = None
        # Each workload's row and what it was built from (resourceVersion, queue, estimate).
        self._workload_rows: dict[tuple[str, str], tuple[tuple[object, ...], Row]] = {}
        # Each waiting workload's estimated start and its basis (``wall``: epoch seconds).
        self._estimates = PanelEstimates(registrations, queues, queue_of, clock=clock, wall=wall)
        self._published: dict[str, dict[str, Row]] = {}
        # Each published row's ADDED line, encoded once for every viewer that joins.
        self._added: dict[str, dict[str, tuple[Row, bytes]]] = {}
        # Workloads first in each pass: the fleet counts what runs from their rows.
        self._watchers: dict[str, set[Watcher]] = {WORKLOADS: set(), QUEUES: set(), FLEET: set()}
        self._task: asyncio.Task[None] | None = None
        # The workloads changed since the last pass (kind name, key), while it is kept.
        self._dirty: set[tuple[str, str]] = set()
        for name, runtime in kinds.items():
            runtime.objects.add_handler(functools.partial(self._changed, name))

    def _changed(self, kind: str, event: InformerEvent) -> None:
        if WORKLOADS in self._published:
            self._dirty.add((kind, event.key))

    # -- views ------------------------------------------------------------------------

    def rows(self, view: str) -> dict[str, Row]:
        """The view's rows now, by id."""
        if view == WORKLOADS:
            return self._workloads()
        if view == QUEUES:
            rows = (panel_rules.queue_row(queue) for queue in self._queues())
            return {row["name"]: row for row in rows}
        # While workloads are watched their published rows are current (to the last pass):
        # no second look at every workload.
        workloads = self._published.get(WORKLOADS) if self._watchers[WORKLOADS] else None
        running = panel_rules.running_by_worker((workloads or self._workloads()).values())
        fleet = (
            panel_rules.worker_row(registration, running.get(Meta(registration).name, 0))
            for registration in self._registrations()
        )
        return {row["name"]: row for row in fleet}

    def _row(self, kind: str, key: str, obj: Mapping[str, Any]) -> Row:
        """The workload's row, rebuilt only when its object changed."""
        meta = Meta(obj)
        # A queue is defined or a namespace relabelled without the workload changing.
        queue = self._queue_of(meta.namespace, meta.label(QUEUE_LABEL) or "")
        estimate = self._estimates.current.get((kind, key))
        built = (meta.resource_version, queue, estimate)
        cached = self._workload_rows.get((kind, key))
        if cached is None or cached[0] != built:
            row = panel_rules.workload_row(
                self._kinds[kind].kind, obj, queue=queue, estimate=estimate
            )
            cached = (built, row)
            self._workload_rows[(kind, key)] = cached
        return cached[1]

    def _refresh_estimates(self) -> None:
        changed = self._estimates.refresh(self._kinds)
        if changed and WORKLOADS in self._published:
            self._dirty.update(changed)  # looked at again by the next pass

    def _workloads(self) -> dict[str, Row]:
        self._refresh_estimates()
        rows: dict[str, Row] = {}
        seen: dict[tuple[str, str], tuple[tuple[object, ...], Row]] = {}
        for name, runtime in self._kinds.items():
            for key, obj in runtime.objects.items():
                row = self._row(name, key, obj)
                seen[(name, key)] = self._workload_rows[(name, key)]
                rows[row["key"]] = row
        self._workload_rows = seen
        return rows

    def scopes(self) -> frozenset[str]:
        """Every scope (``plural/namespace``) that has workloads now, counted at most once
        per :data:`SCOPES_MAX_AGE` (however many requests ask)."""
        now = self._clock()
        if self._scopes is None or now - self._scopes[0] >= SCOPES_MAX_AGE:
            found = frozenset(
                f"{runtime.kind.ref.plural}/{key.partition('/')[0]}"
                for runtime in self._kinds.values()
                for key, _obj in runtime.objects.items()
            )
            self._scopes = (now, found)
        return self._scopes[1]

    # -- watches ----------------------------------------------------------------------

    @property
    def watching(self) -> int:
        return sum(len(watchers) for watchers in self._watchers.values())

    def watching_for(self, user: str) -> int:
        return self._per_user[user]

    def watch(
        self,
        view: str,
        access: Access | None,
        lifetime: float = WATCH_LIFETIME,
        *,
        user: str = "",
    ) -> WatchStream:
        """A new watch of ``view`` for ``user``: its current rows as ADDED, then every
        change. One user holds at most ``max_watches_per_user`` of all the watches, so
        that no one identity takes every place."""
        if self.watching >= self._max_watches:
            raise TooManyWatches(f"{self._max_watches} panel watches are open; try again later")
        if self._per_user[user] >= self._max_watches_per_user:
            raise TooManyWatches(
                f'user "{user}" has {self._per_user[user]} panel watches open, the most one '
                "user may: close one, or try again later"
            )
        self._publish(view)  # the others are brought up to now before this one starts
        watcher = Watcher(view, access, user)
        watcher.send(
            self._added_line(view, row_id, row)
            for row_id, row in self._published[view].items()
            if watcher.visible(row_id)
        )
        if access is not None:
            access.on_granted = lambda scope: watcher.send(
                self._added_line(view, row_id, row)
                for row_id, row in self._published[view].items()
                if scope_of(row_id) == scope
            )
        self._watchers[view].add(watcher)
        self._per_user[user] += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="panel-feed")
        return WatchStream(self._stream(watcher, lifetime), functools.partial(self._end, watcher))

    def _end(self, watcher: Watcher) -> None:
        """The watch is over (once, however it ended): its place is free again."""
        if watcher.ended:
            return
        watcher.ended = True
        self._watchers[watcher.view].discard(watcher)
        self._per_user[watcher.user] -= 1
        if self._per_user[watcher.user] <= 0:
            del self._per_user[watcher.user]
        if watcher.access is not None:
            watcher.access.close()

    def _added_line(self, view: str, row_id: str, row: Row) -> bytes:
        """The row's ADDED line, encoded once while the row stays the same."""
        lines = self._added.setdefault(view, {})
        cached = lines.get(row_id)
        if cached is None or cached[0] is not row:
            cached = (row, panel_rules.watch_line("ADDED", row))
            lines[row_id] = cached
        return cached[1]

    async def _stream(self, watcher: Watcher, lifetime: float) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in watcher.chunks(lifetime):
                yield chunk
        finally:
            self._end(watcher)

    async def _loop(self) -> None:
        while self.watching:
            await asyncio.sleep(self._interval)
            for view, watchers in self._watchers.items():
                if watchers:
                    self._publish(view)
        # Nobody watches: nothing is kept up to date (the next watch starts afresh).
        self._published.clear()
        self._added.clear()
        self._dirty.clear()

    def _publish(self, view: str) -> None:
        published = self._published.get(view)
        if view == WORKLOADS and published is not None:
            found = self._workload_changes(published)
        else:
            after = self.rows(view)
            found = list(panel_rules.changes(published or {}, after))
            self._published[view] = after
            came_or_went = any(change.type != "MODIFIED" for change in found)
            if view == QUEUES and came_or_went and WORKLOADS in self._published:
                # Each workload's queue is looked at again (its row only if it changed).
                self._dirty.update(self._workload_rows)
        if not found:
            return
        for watcher in list(self._watchers[view]):
            watcher.send(change.line for change in found if watcher.visible(change.id))

    def _workload_changes(self, published: dict[str, Row]) -> list[WatchChange]:
        """What changed among the workloads the informers named since the last pass
        (``published`` is brought up to date in place)."""
        self._refresh_estimates()
        dirty, self._dirty = self._dirty, set()
        before: dict[str, Row] = {}
        after: dict[str, Row] = {}
        for kind, key in dirty:
            runtime = self._kinds.get(kind)
            obj = runtime.objects.get(key) if runtime is not None else None
            row_id = f"{runtime.kind.ref.plural}/{key}" if runtime is not None else ""
            if row_id in published:
                before[row_id] = published[row_id]
            if obj is None:
                self._workload_rows.pop((kind, key), None)
                self._added.get(WORKLOADS, {}).pop(row_id, None)
                published.pop(row_id, None)
            else:
                row = self._row(kind, key, obj)
                after[row["key"]] = published[row["key"]] = row
        return list(panel_rules.changes(before, after))
