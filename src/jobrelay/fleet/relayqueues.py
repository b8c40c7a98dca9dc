"""The manager's RelayQueues: a cache of them read as QueueSpecs, and their status written.

``RelayQueueCache`` follows every RelayQueue with an Informer. ``specs()`` are the valid
queues, ``invalid()`` why the others are ignored (the reading is pure:
``admission/queue_specs.py``). Each queue's status is written from the figures of the
last admission plan (``figures``, asked when a write is due; the body is pure:
``admission/queue_status.py``). Status writes are fenced (a standby writes nothing), only
on change and at most every ``status_interval`` seconds per queue
(:class:`~jobrelay.fleet.workers.status_rules.StatusClock`); a change that had to wait is written by the flush loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobrelay.admission.queue_model import QueueSpec
from jobrelay.admission.queue_specs import InvalidQueue, read_queue
from jobrelay.admission.queue_status import existing_condition, status_body, valid_condition
from jobrelay.admission.shares import QueueFigures
from jobrelay.fleet.workers.status_rules import StatusClock
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, WriteFenced
from jobrelay.kube.resources import RELAY_QUEUES
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.manifests import chart_sources
from jobrelay.vocabulary.timestamps import rfc3339

__all__ = ["RelayQueueCache", "crd_manifest", "status_essence"]

# Status fields the controller writes: one no longer wanted is written as null (removed).
_STATUS_FIELDS = ("pending", "admitted", "usage", "demand", "fairShare", "actualShare")

_log = logging.getLogger(__name__)


def crd_manifest() -> dict[str, Any]:
    """The RelayQueue CRD: the chart's ``files/crds/`` file (one copy, shipped in the
    package)."""
    return chart_sources.chart_document(chart_sources.RELAY_QUEUE_CRD)


def status_essence(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body without its transition times: a rewrite of the same words is no change."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in body.get("conditions") or []
    ]
    return {**body, "conditions": conditions}


class RelayQueueCache:
    """Every RelayQueue on the manager, read; their status written by the leader."""

    def __init__(
        self,
        manager: ApiClient,
        *,
        may_write: Callable[[], bool] | None = None,
        status_interval: float = 5.0,
        on_change: Callable[[], None] | None = None,
        informer: Informer | None = None,
        figures: Callable[[], Mapping[str, QueueFigures]] = dict,
    ) -> None:
        self._manager = manager
        self._may_write = may_write
        self._status_interval = status_interval
        self._on_change = on_change
        self._informer = informer if informer is not None else Informer(manager, RELAY_QUEUES)
        self._read: dict[str, QueueSpec | InvalidQueue] = {}
        self._clocks: dict[str, StatusClock] = {}
        self._flusher: asyncio.Task[None] | None = None
        # Each valid queue's figures, as the last admission plan says them ({} before one).
        self._figures = figures

    # -- reading -----------------------------------------------------------------

    def specs(self) -> dict[str, QueueSpec]:
        """The valid queues, by name."""
        return {n: q for n, q in self._read.items() if isinstance(q, QueueSpec)}

    def invalid(self) -> dict[str, str]:
        """The queues the controller ignores, by name, and why."""
        return {n: q.reason for n, q in self._read.items() if isinstance(q, InvalidQueue)}

    def objects(self) -> list[dict[str, Any]]:
        """Every RelayQueue as the manager holds it (spec and the status written)."""
        return self._informer.values()

    @property
    def has_synced(self) -> bool:
        return self._informer.has_synced

    @property
    def name(self) -> str:
        return self._informer.name

    @property
    def last_error(self) -> Exception | None:
        """Why its informer's last list or watch failed (readiness says it)."""
        return self._informer.last_error

    def _changed(self, event: InformerEvent) -> None:
        name = event.key
        if event.new is None:
            self._read.pop(name, None)
            self._clocks.pop(name, None)
        else:
            read = read_queue(event.new)
            if isinstance(read, InvalidQueue) and not read.name:
                read = InvalidQueue(name, read.reason)
            before, self._read[name] = self._read.get(name), read
            if isinstance(read, InvalidQueue) and read != before:
                _log.warning("RelayQueue %s is ignored: %s", name, read.reason,
                             extra={"event": "relayqueue-invalid", "queue": name})  # fmt: skip
            clock = self._clocks.setdefault(name, StatusClock(self._status_interval))
            stored = event.new.get("status")
            if isinstance(stored, Mapping):
                clock.adopt(status_essence(stored))  # a restart writes nothing it need not
        if self._on_change is not None:
            self._on_change()

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        self._informer.add_handler(self._changed)
        self._informer.start()
        self._flusher = asyncio.get_running_loop().create_task(
            self._flush_loop(), name="relayqueue-status"
        )

    async def wait_synced(self) -> None:
        await self._informer.wait_synced()

    async def stop(self) -> None:
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        await self._informer.stop()

    # -- status --------------------------------------------------------------------

    async def write_status(self, name: str, figures: QueueFigures | None = None) -> bool:
        """Write queue ``name``'s status from ``figures`` (default: the last admission
        plan's), if it changed and its last write is old enough; True if written."""
        if self._may_write is not None and not self._may_write():
            return False  # a standby writes nothing; once leading, the flush writes it
        obj = self._informer.get(name)
        read = self._read.get(name)
        if obj is None or read is None:
            return False
        invalid = read if isinstance(read, InvalidQueue) else None
        if figures is None and invalid is None:
            figures = self._figures().get(name)
        if invalid is not None:
            figures = None
        stored = existing_condition(obj)
        condition = valid_condition(invalid, stored, rfc3339(time.time()))
        # A valid queue before the first fair-share pass (a restart): the figures stored
        # stay until new ones come; only a changed condition is news.
        before_first_pass = figures is None and invalid is None
        if before_first_pass and stored is not None and stored.get("status") == "True":
            return False
        body = status_body(figures, condition)
        clock = self._clocks.setdefault(name, StatusClock(self._status_interval))
        now = asyncio.get_running_loop().time()
        if not clock.due(status_essence(body), now):
            return False
        # An ignored queue shows no figures: those stored are removed (null).
        cleared = {field: None for field in _STATUS_FIELDS} if invalid is not None else {}
        patch = {**cleared, **body}
        try:
            await self._manager.patch(RELAY_QUEUES, name, {"status": patch}, subresource="status")
        except WriteFenced:
            return False  # leadership lost meanwhile: the next leader writes it
        except ApiError as error:
            if not error.is_not_found:
                _log.warning("RelayQueue %s: cannot write status: %s", name, error)
            return False
        clock.written(status_essence(body), now)
        return True

    async def write_all(self) -> None:
        """Every queue's status that changed and may be written now."""
        for name in list(self._read):
            await self.write_status(name)

    async def _flush_loop(self) -> None:
        # Changes held back by the interval, and invalid queues' conditions, get written.
        period = max(0.5, min(self._status_interval, 5.0))
        while True:
            await asyncio.sleep(period)
            try:
                await self.write_all()
            except Exception:  # never let the loop die: the next round tries again
                _log.exception("RelayQueue status: write failed")
