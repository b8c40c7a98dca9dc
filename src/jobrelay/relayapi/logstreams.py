"""Log streams of the logs API: a pod's log from its worker, followed until the pod ends,
several pods' logs prefixed and chained or merged, and the byte cap of a non-follow read.

Each is an async iterator of bytes that the HTTPS server copies to the caller as it comes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS
from jobrelay.relayapi.rules import scrub

__all__ = [
    "FOLLOW_GRACE",
    "TRUNCATED",
    "capped",
    "chained",
    "merged",
    "pod_ended",
    "pod_log",
    "prefixed",
    "until_ended",
]

_log = logging.getLogger(__name__)

# Lines cut by the byte cap end with this marker so that a reader knows the log goes on.
TRUNCATED = b"\n[jobrelay: output cut at the byte limit; use --tail or --since]\n"


async def pod_log(
    client: ApiClient, namespace: str, pod: str, params: Mapping[str, str], idle: float
) -> AsyncIterator[bytes]:
    """One pod's log; a refusal or a broken stream ends it with one line saying why."""
    try:
        async with client.pod_log(namespace, pod, params, follow_idle_timeout=idle) as chunks:
            if params.get("follow") == "true":
                chunks = until_ended(chunks, pod_ended(client, namespace, pod))
            async for chunk in chunks:
                yield chunk
    except ApiError as error:
        if error.reason == "Timeout" and params.get("follow") == "true":
            yield f"\n[jobrelay: no output for {idle:g} s; stopped following]\n".encode()
            return
        # The worker's own words only when they are about the request, never addresses.
        message = scrub(error.message) if error.code in (400, 404) else error.reason
        yield f"[jobrelay: pod {pod}: {message}]\n".encode()


_TERMINAL_PHASES = frozenset(("Succeeded", "Failed"))
# After its pod has ended, a follow still passes on what comes within this many seconds. A
# kubelet ends the stream itself when the container exits; a simulated one (KWOK) never does.
FOLLOW_GRACE = 1.0


async def pod_ended(client: ApiClient, namespace: str, pod: str) -> None:
    """Returns once the pod has ended (Succeeded, Failed, or deleted), watching it."""
    selector = f"metadata.name={pod}"
    while True:
        try:
            listed = await client.list(PODS, namespace=namespace, field_selector=selector)
            if (
                not listed.items
                or listed.items[0].get("status", {}).get("phase") in _TERMINAL_PHASES
            ):
                return
            async with client.watch(
                PODS, namespace=namespace, field_selector=selector,
                resource_version=listed.resource_version, timeout_seconds=300,
            ) as events:  # fmt: skip
                async for event in events:
                    phase = (event.object.get("status") or {}).get("phase")
                    if event.type == "DELETED" or phase in _TERMINAL_PHASES:
                        return
        except ApiError as error:
            _log.debug("watching pod %s/%s: %s", namespace, pod, error)
            await asyncio.sleep(1.0)  # back off, then look again


async def until_ended(
    chunks: AsyncIterator[bytes], ended: Awaitable[None], grace: float = FOLLOW_GRACE
) -> AsyncIterator[bytes]:
    """``chunks`` until they end, or until ``grace`` seconds after ``ended`` returned."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

    async def pump() -> None:
        try:
            async for chunk in chunks:
                await queue.put(chunk)
        finally:
            await queue.put(None)

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


async def prefixed(prefix: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Each line of ``chunks`` with ``prefix`` before it (kubectl --prefix)."""
    pending = b""
    async for chunk in chunks:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if lines:
            yield b"".join(prefix + line + b"\n" for line in lines)
    if pending:
        yield prefix + pending + b"\n"


async def chained(sources: Sequence[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    for source in sources:
        async for chunk in source:
            yield chunk


async def merged(sources: Sequence[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    """Every source's chunks as they come (follows of several pods at once)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

    async def pump(source: AsyncIterator[bytes]) -> None:
        try:
            async for chunk in source:
                await queue.put(chunk)
        finally:
            await queue.put(None)

    tasks = [asyncio.create_task(pump(source)) for source in sources]
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


async def capped(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    sent = 0
    async for chunk in chunks:
        if sent + len(chunk) > limit:
            yield chunk[: limit - sent] + TRUNCATED
            return
        sent += len(chunk)
        yield chunk
