"""The two streams an apiserver sends: watch events and pod logs, read as they arrive.

:class:`~jobrelay.kube.client.ApiClient` opens them (``watch``, ``pod_log``);
this module says how long a read may wait, turns the bytes into events or
chunks, and closes the response however the consumer stops.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any

import httpx2
import msgspec

from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError, ResponseTooLarge
from jobrelay.kube.transport import StreamedResponse

__all__ = [
    "WatchEvent",
    "log_chunks",
    "log_timeout",
    "split_lines",
    "watch_events",
    "watch_params",
    "watch_timeout",
]

# What a client makes of a connection that broke mid-stream (it logs the outage).
Unreachable = Callable[[httpx2.HTTPError], ApiError]


class WatchEvent(msgspec.Struct, frozen=True):
    """One line of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: dict[str, Any]


_watch_event_decoder = msgspec.json.Decoder(WatchEvent)


def watch_params(
    *,
    label_selector: str | None,
    field_selector: str | None,
    resource_version: str | None,
    timeout_seconds: int | None,
    allow_bookmarks: bool,
) -> dict[str, str]:
    """The query of a watch request."""
    params: dict[str, str] = {"watch": "true"}
    if allow_bookmarks:
        params["allowWatchBookmarks"] = "true"
    if resource_version:
        params["resourceVersion"] = resource_version
    if timeout_seconds is not None:
        params["timeoutSeconds"] = str(timeout_seconds)
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def watch_timeout(options: ApiOptions, timeout_seconds: int | None) -> httpx2.Timeout:
    """A watch's time-outs: a read may wait a little longer than the server's own end."""
    # The server ends the stream after timeoutSeconds; a read that waits much
    # longer than that means the connection is gone.
    read = None if timeout_seconds is None else timeout_seconds + options.request_timeout
    return httpx2.Timeout(
        connect=options.connect_timeout,
        read=read,
        write=options.request_timeout,
        pool=options.request_timeout,
    )


def log_timeout(
    options: ApiOptions, params: Mapping[str, str], follow_idle_timeout: float | None
) -> httpx2.Timeout:
    """A log's time-outs: a follow waits ``follow_idle_timeout`` for each chunk (None: for ever)."""
    return httpx2.Timeout(
        connect=options.connect_timeout,
        read=follow_idle_timeout if params.get("follow") == "true" else options.request_timeout,
        write=options.request_timeout,
        pool=options.request_timeout,
    )


@contextlib.asynccontextmanager
async def watch_events(
    response: StreamedResponse, unreachable: Unreachable, *, max_line: int
) -> AsyncIterator[AsyncIterator[WatchEvent]]:
    """The decoded events of an open watch response, which is closed on the way out;
    a line longer than ``max_line`` bytes ends it with ResponseTooLarge."""
    try:
        events = _decode_events(response, max_line)
        try:
            yield events
        finally:
            await events.aclose()
    except httpx2.HTTPError as exc:
        # The connection broke mid-stream; the consumer sees it as an ApiError too.
        raise unreachable(exc) from exc
    finally:
        await response.aclose()


@contextlib.asynccontextmanager
async def log_chunks(
    response: StreamedResponse, unreachable: Unreachable
) -> AsyncIterator[AsyncIterator[bytes]]:
    """The chunks of an open log response, which is closed on the way out."""
    try:
        chunks = response.aiter_bytes()
        try:
            yield chunks
        finally:
            await chunks.aclose()
    except httpx2.ReadTimeout:
        # A quiet pod, not a worker that does not answer.
        raise ApiError(0, "Timeout", "no log output within the idle time-out") from None
    except httpx2.HTTPError as exc:
        raise unreachable(exc) from exc
    finally:
        await response.aclose()


async def _decode_events(response: StreamedResponse, max_line: int) -> AsyncGenerator[WatchEvent]:
    async for line in split_lines(response.aiter_bytes(), max_line=max_line):
        try:
            yield _watch_event_decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise ApiError(200, "InvalidResponse", f"undecodable watch event: {exc}") from exc


async def split_lines(
    chunks: AsyncIterator[bytes], *, max_line: int | None = None
) -> AsyncIterator[bytes | bytearray]:
    """Newline-delimited records from arbitrarily cut chunks.

    A large object arrives over many chunks; each chunk is scanned once and
    appended once, so the cost stays linear in the line's size. A line longer than
    ``max_line`` bytes raises ResponseTooLarge before more than that is held.
    """
    limit = max_line if max_line is not None else sys.maxsize
    pending = bytearray()
    async for chunk in chunks:
        start = 0
        if pending:
            newline = chunk.find(b"\n")
            if newline < 0:
                if len(pending) + len(chunk) > limit:
                    raise ResponseTooLarge(200, "a line of the watch", limit)
                pending += chunk
                continue
            if len(pending) + newline > limit:
                raise ResponseTooLarge(200, "a line of the watch", limit)
            pending += memoryview(chunk)[:newline]
            # Hand out the buffer itself and start a new one: no copy of a big line.
            line, pending = pending, bytearray()
            yield line
            start = newline + 1
        while (newline := chunk.find(b"\n", start)) >= 0:
            if newline - start > limit:
                raise ResponseTooLarge(200, "a line of the watch", limit)
            if newline > start:
                yield chunk[start:newline]
            start = newline + 1
        if len(chunk) - start > limit:
            raise ResponseTooLarge(200, "a line of the watch", limit)
        if start < len(chunk):
            pending += memoryview(chunk)[start:]
    if pending.strip():
        yield pending
