"""Log streams of the logs API: a pod's log from its worker, followed until the pod ends
(one pod watch per request), several pods' logs prefixed and chained or merged, the
byte cap of a non-follow read and the byte and rate bounds of a follow.

Each is an async iterator of bytes that the HTTPS server copies to the caller as it comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS
from jobrelay.relayapi.log_refusal_rules import pod_refusal_line
from jobrelay.relayapi.route_rules import scrub
from jobrelay.relayapi.stream_rules import MAX_LINE_BYTES, LineSplitter, RateBudget
from jobrelay.vocabulary.meta import Meta

__all__ = [
    "FOLLOW_CUT",
    "FOLLOW_GRACE",
    "TRUNCATED",
    "PodWatch",
    "bounded_follow",
    "capped",
    "chained",
    "merged",
    "pod_log",
    "prefixed",
    "until_ended",
    "watched",
]

_log = logging.getLogger(__name__)

# Lines cut by the byte cap end with this marker so that a reader knows the log goes on.
TRUNCATED = b"\n[jobrelay: output cut at the byte limit; use --tail or --since]\n"
# A follow that passed on its byte limit ends with this line.
FOLLOW_CUT = b"\n[jobrelay: stopped following at the byte limit; follow again to go on]\n"


async def pod_log(
    client: ApiClient,
    namespace: str,
    pod: str,
    params: Mapping[str, str],
    idle: float,
    ended: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[bytes]:
    """One pod's log; a refusal or a broken stream ends it with one line saying why
    (``log_refusal_rules``: the client's error).
    A follow also ends soon after ``ended`` returns (the request's pod watch says so)."""
    try:
        async with client.pod_log(namespace, pod, params, follow_idle_timeout=idle) as chunks:
            if ended is None:
                async for chunk in chunks:
                    yield chunk
                return
            # Closed before the response under it: its pump must stop reading it first.
            async with contextlib.aclosing(until_ended(chunks, ended())) as following:
                async for chunk in following:
                    yield chunk
    except ApiError as error:
        if error.reason == "Timeout" and params.get("follow") == "true":
            yield f"\n[jobrelay: no output for {idle:g} s; stopped following]\n".encode()
            return
        # The worker's own words only when they are about the request, never addresses.
        message = scrub(error.message) if error.code in (400, 404) else error.reason
        # A line `jobrelay logs` takes for an error (log_refusal_rules): exit non-zero.
        yield pod_refusal_line(pod, message)


_TERMINAL_PHASES = frozenset(("Succeeded", "Failed"))
# After its pod has ended, a follow still passes on what comes within this many seconds. A
# kubelet ends the stream itself when the container exits; a simulated one (KWOK) never does.
FOLLOW_GRACE = 1.0


class PodWatch:
    """Which of a request's pods have ended (Succeeded, Failed, or deleted): one watch of
    the mirror's pods per request, however many pods it follows."""

    def __init__(
        self, client: ApiClient, namespace: str, label_selector: str, pods: Sequence[str]
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._selector = label_selector
        # Known from the start: one gone before the watch lists has ended too.
        self._ended = {pod: asyncio.Event() for pod in pods}
        self._task: asyncio.Task[None] | None = None

    async def ended(self, pod: str) -> None:
        """Returns once ``pod`` has ended."""
        await self._event(pod).wait()

    def _event(self, pod: str) -> asyncio.Event:
        return self._ended.setdefault(pod, asyncio.Event())

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="pod-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _saw(self, pod: Mapping[str, Any], deleted: bool) -> None:
        name = Meta(pod).name
        if deleted or (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            self._event(name).set()

    async def _watch(self) -> None:
        while True:
            try:
                listed = await self._client.list(
                    PODS, namespace=self._namespace, label_selector=self._selector
                )
                present = {Meta(pod).name for pod in listed.items}
                for pod in listed.items:
                    self._saw(pod, deleted=False)
                for name, ended in self._ended.items():
                    if name not in present:
                        ended.set()
                async with self._client.watch(
                    PODS, namespace=self._namespace, label_selector=self._selector,
                    resource_version=listed.resource_version, timeout_seconds=300,
                ) as events:  # fmt: skip
                    async for event in events:
                        if event.type in ("ADDED", "MODIFIED", "DELETED"):
                            self._saw(event.object, deleted=event.type == "DELETED")
            except ApiError as error:
                _log.debug("watching pods %s in %s: %s", self._selector, self._namespace, error)
                await asyncio.sleep(1.0)  # back off, then look again


async def until_ended(
    chunks: AsyncIterator[bytes], ended: Awaitable[None], grace: float = FOLLOW_GRACE
) -> AsyncGenerator[bytes]:
    """``chunks`` until they end, or until ``grace`` seconds after ``ended`` returned."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

    async def pump() -> None:
        await _pump(chunks, queue)

    pumping = asyncio.create_task(pump())
    ending: asyncio.Future[None] = asyncio.ensure_future(ended)
    deadline: float | None = None
    getting: asyncio.Task[bytes | None] | None = None
    try:
        while True:
            getting = getting or asyncio.create_task(queue.get())
            waiting: set[asyncio.Future[Any]] = {getting} if deadline else {getting, ending}
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when="FIRST_COMPLETED")
            if getting in done:
                chunk, getting = getting.result(), None
                if chunk is None:
                    await asyncio.wait({pumping})
                    if (error := pumping.exception()) is not None:
                        raise error  # e.g. the idle time-out: the caller says so
                    return
                yield chunk
            elif deadline is None and ending in done:
                deadline = loop.time() + grace
            elif deadline is not None:
                return
    finally:
        for task in (pumping, ending, getting):
            if task is not None:
                task.cancel()
        await asyncio.gather(pumping, ending, return_exceptions=True)


async def prefixed(
    prefix: bytes, chunks: AsyncIterator[bytes], limit: int = MAX_LINE_BYTES
) -> AsyncIterator[bytes]:
    """Each line of ``chunks`` with ``prefix`` before it (kubectl --prefix); a line longer
    than ``limit`` is passed on in pieces (stream_rules.LineSplitter)."""
    splitter = LineSplitter(prefix, limit)
    async with _closing(chunks):
        async for chunk in chunks:
            if out := splitter.feed(chunk):
                yield out
    if out := splitter.flush():
        yield out


async def bounded_follow(
    chunks: AsyncIterator[bytes], max_bytes: int, rate: int
) -> AsyncIterator[bytes]:
    """A followed pod's chunks, at most ``max_bytes`` of them and ``rate`` bytes a second
    (a faster pod waits: the worker's stream is read no faster)."""
    loop = asyncio.get_running_loop()
    budget = RateBudget(rate=float(rate), burst=float(max(rate, MAX_LINE_BYTES)))
    sent = 0
    async with _closing(chunks):
        async for chunk in chunks:
            if sent + len(chunk) > max_bytes:
                yield chunk[: max_bytes - sent] + FOLLOW_CUT
                return
            sent += len(chunk)
            if (delay := budget.wait(loop.time(), len(chunk))) > 0:
                await asyncio.sleep(delay)
            yield chunk


async def watched(watch: PodWatch, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks``, with ``watch`` running meanwhile (stopped however they end)."""
    watch.start()
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        with contextlib.suppress(Exception):
            await chunks.aclose()  # type: ignore[attr-defined]
        await watch.stop()


async def chained(sources: Sequence[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    for source in sources:
        async for chunk in source:
            yield chunk


async def merged(sources: Sequence[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    """Every source's chunks as they come (follows of several pods at once)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

    tasks = [asyncio.create_task(_pump(source, queue)) for source in sources]
    try:
        remaining = len(tasks)
        while remaining:
            chunk = await queue.get()
            if chunk is None:
                remaining -= 1
            else:
                yield chunk
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def _closing(chunks: AsyncIterator[bytes]) -> AsyncIterator[None]:
    """Closes ``chunks`` (when it can be) on the way out: a stream closed from above closes
    the worker's stream under it now, in order, not when the garbage collector gets to it."""
    try:
        yield
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


async def _pump(chunks: AsyncIterator[bytes], queue: asyncio.Queue[bytes | None]) -> None:
    """``chunks`` into ``queue``, then None, however they end, unless cancelled: then its
    reader has gone and the queue may be full: waiting to mark the end would never end (nor
    would the cleanup that waits for this task), so ``chunks`` is closed at once instead,
    and the worker's stream behind it with it (not whenever it is garbage-collected)."""
    try:
        async for chunk in chunks:
            await queue.put(chunk)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await chunks.aclose()  # type: ignore[attr-defined]
        raise
    except BaseException:
        await queue.put(None)
        raise
    await queue.put(None)


async def capped(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    sent = 0
    async for chunk in chunks:
        if sent + len(chunk) > limit:
            yield chunk[: limit - sent] + TRUNCATED
            return
        sent += len(chunk)
        yield chunk
