"""Kubernetes Events (core/v1) about the objects jobrelay manages.

``EventRecorder.record`` is synchronous and never raises: a reconcile should
not fail, or wait, because an Event could not be written. Records go to a
small pending map that a few background tasks drain. Like client-go's event
correlator, a repeat of the same (object, type, reason, message) within the
dedupe window patches ``count`` and ``lastTimestamp`` of the Event already
written instead of creating another one; repeats that pile up while the
writers are busy are folded into a single write.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import EVENTS
from jobrelay.vocabulary.timestamps import utc_now

__all__ = ["EventRecorder", "EventType"]

_log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

# The apiserver rejects longer messages from the events.k8s.io API; keep core
# Events within the same bound so both views of an Event stay valid.
_MAX_MESSAGE = 1024
# Sends of one Event while its apiserver gives no answer (1 s, then 2 s apart by default).
_UNANSWERED_TRIES = 3


@dataclass(frozen=True, slots=True)
class _Key:
    namespace: str
    kind: str
    name: str
    uid: str
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class _Pending:
    involved: dict[str, Any]
    repeats: int  # occurrences not yet written
    first_seen: str
    last_seen: str


@dataclass(slots=True)
class _Written:
    event_name: str
    count: int
    written_at: float  # monotonic


class EventRecorder:
    """Writes Events about objects through ``client``, deduplicated and off the caller's path.

    Call :meth:`aclose` (or use ``async with``) to flush before the client closes.
    """

    def __init__(
        self,
        client: ApiClient,
        *,
        component: str = "jobrelay",
        instance: str | None = None,
        dedupe_window: float = 600.0,
        max_pending: int = 1000,
        max_remembered: int = 4096,
        close_timeout: float = 5.0,
        writers: int = 4,
        unanswered_retry_delay: float = 1.0,
    ) -> None:
        self._client = client
        self._component = component
        self._instance = instance or socket.gethostname()
        self._dedupe_window = dedupe_window
        self._max_pending = max_pending
        self._max_remembered = max_remembered
        self._close_timeout = close_timeout
        self._unanswered_retry_delay = unanswered_retry_delay
        self._pending: OrderedDict[_Key, _Pending] = OrderedDict()
        # What we wrote recently, least recently used first, to patch instead of create.
        self._written: OrderedDict[_Key, _Written] = OrderedDict()
        self._wakeup = asyncio.Event()
        self._writers_wanted = writers
        self._writers: list[asyncio.Task[None]] = []
        self._in_flight: set[_Key] = set()
        self._closing = False

    def record(
        self,
        obj: Mapping[str, Any],
        event_type: EventType,
        reason: str,
        message: str,
        *,
        count: int = 1,
    ) -> None:
        """Queue an Event about ``obj`` (which needs apiVersion, kind and metadata);
        ``count``: how many occurrences it stands for (relayed Events carry their own)."""
        try:
            self._record(obj, event_type, reason, message, max(1, count))
        except Exception:
            _log.exception("cannot record event %s about %s", reason, _describe(obj))

    async def aclose(self) -> None:
        """Write what is pending (for at most ``close_timeout`` seconds), then stop."""
        self._closing = True
        writers, self._writers = self._writers, []
        if not writers:
            return
        self._wakeup.set()
        try:
            await asyncio.wait_for(asyncio.gather(*writers), self._close_timeout)
        except TimeoutError:
            _log.warning("dropped %d pending events on close", len(self._pending))

    def abandon(self) -> None:
        """Stop at once and drop what is pending: this process may no longer write."""
        self._closing = True
        dropped = len(self._pending)
        self._pending.clear()
        writers, self._writers = self._writers, []
        for writer in writers:
            writer.cancel()
        if dropped:
            _log.info("dropped %d pending events", dropped)

    async def __aenter__(self) -> EventRecorder:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _record(
        self, obj: Mapping[str, Any], event_type: EventType, reason: str, message: str, count: int
    ) -> None:
        if self._closing:
            _log.debug("recorder closed; dropping event %s about %s", reason, _describe(obj))
            return
        metadata = obj.get("metadata") or {}
        kind, api_version, name = obj.get("kind"), obj.get("apiVersion"), metadata.get("name")
        if not (kind and api_version and name):
            _log.warning("event %s: object lacks apiVersion, kind or name; dropped", reason)
            return
        message = message[:_MAX_MESSAGE]
        # Cluster-scoped objects (WorkerClusters) get their Events in "default", as kubectl does.
        namespace = metadata.get("namespace") or "default"
        uid = metadata.get("uid") or ""
        key = _Key(namespace, kind, name, uid, event_type, reason, message)
        now = utc_now()
        pending = self._pending.get(key)
        if pending is not None:
            pending.repeats += count
            pending.last_seen = now
            return
        if len(self._pending) >= self._max_pending:
            _log.warning("event backlog full; dropping %s about %s", reason, _describe(obj))
            return
        involved = {"apiVersion": api_version, "kind": kind, "name": name}
        if metadata.get("namespace"):
            involved["namespace"] = metadata["namespace"]
        if uid:
            involved["uid"] = uid
        if metadata.get("resourceVersion"):
            involved["resourceVersion"] = metadata["resourceVersion"]
        self._pending[key] = _Pending(involved, count, now, now)
        if not self._writers:
            # Several writers: one Event costs a round trip, and a busy controller
            # emits a few per Job; a single writer caps Events at ~1/latency per second.
            loop = asyncio.get_running_loop()
            self._writers = [
                loop.create_task(self._write_loop(), name=f"event-recorder-{index}")
                for index in range(self._writers_wanted)
            ]
        self._wakeup.set()

    async def _write_loop(self) -> None:
        while True:
            key = self._next_key()
            if key is None:
                if self._closing:
                    return
                # Checked and cleared with no await in between: no wake-up is lost,
                # and every writer waits on its own (one writer's clear can't strand another).
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            pending = self._pending.pop(key)
            # One write per key at a time: a repeat must find the first Event
            # remembered, to count it rather than create a second one.
            self._in_flight.add(key)
            try:
                await self._write_until_answered(key, pending)
            except ApiError as exc:
                # A namespace being deleted takes its objects and their Events with it.
                _log.log(
                    logging.DEBUG if exc.is_namespace_terminating else logging.WARNING,
                    "cannot write event %s about %s %s/%s: %s",
                    key.reason,
                    key.kind,
                    key.namespace,
                    key.name,
                    exc,
                )
            except Exception:
                _log.exception(
                    "cannot write event %s about %s %s/%s",
                    key.reason,
                    key.kind,
                    key.namespace,
                    key.name,
                )
            finally:
                self._in_flight.discard(key)
                if key in self._pending:
                    self._wakeup.set()  # a repeat waited for this write

    async def _write_until_answered(self, key: _Key, pending: _Pending) -> None:
        """One Event's write, sent again after a moment while the apiserver gives no answer
        (a busy apiserver's connect timeout would otherwise lose it): at most
        :data:`_UNANSWERED_TRIES` times (closing waits at most its ``close_timeout``). An
        answer, even a refusal, is final."""
        for attempt in range(1, _UNANSWERED_TRIES + 1):
            try:
                await self._write(key, pending)
                return
            except ApiError as exc:
                if not exc.is_unreachable or attempt == _UNANSWERED_TRIES:
                    raise
            await asyncio.sleep(self._unanswered_retry_delay * attempt)

    def _next_key(self) -> _Key | None:
        """The oldest pending key that no other writer is writing."""
        for key in self._pending:
            if key not in self._in_flight:
                return key
        return None

    async def _write(self, key: _Key, pending: _Pending) -> None:
        written = self._written.get(key)
        if written is not None and time.monotonic() - written.written_at < self._dedupe_window:
            count = written.count + pending.repeats
            try:
                await self._client.patch(
                    EVENTS,
                    written.event_name,
                    {"count": count, "lastTimestamp": pending.last_seen},
                    namespace=key.namespace,
                )
            except ApiError as exc:
                if not exc.is_not_found:
                    raise
                # The Event expired (the apiserver's event TTL) or was deleted: start anew.
            else:
                self._remember(key, _Written(written.event_name, count, time.monotonic()))
                return
        # Named like client-go's: unique per object and nanosecond, within 253 characters.
        event_name = f"{key.name[:236]}.{time.time_ns():x}"
        await self._client.create(
            EVENTS,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": event_name, "namespace": key.namespace},
                "involvedObject": pending.involved,
                "type": key.type,
                "reason": key.reason,
                "message": key.message,
                "source": {"component": self._component, "host": self._instance},
                "reportingComponent": self._component,
                "reportingInstance": self._instance,
                "firstTimestamp": pending.first_seen,
                "lastTimestamp": pending.last_seen,
                "count": pending.repeats,
            },
        )
        self._remember(key, _Written(event_name, pending.repeats, time.monotonic()))

    def _remember(self, key: _Key, written: _Written) -> None:
        self._written[key] = written
        self._written.move_to_end(key)
        while len(self._written) > self._max_remembered:
            self._written.popitem(last=False)


def _describe(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')} {metadata.get('namespace', '')}/{metadata.get('name', '?')}"
