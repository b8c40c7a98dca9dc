"""The manager's RelayQueues: a cache of them read as QueueSpecs, and their status written.

``RelayQueueCache`` follows every RelayQueue with an Informer. ``specs()`` are the valid
queues, ``invalid()`` why the others are ignored; ``figures`` and ``fairness_error`` are
set by whoever computes them (the fair-share pass) and read by the metrics and by
``write_status``. Status writes are fenced (a standby writes nothing), only on change and
at most every ``status_interval`` seconds per queue (the rules: ``relayqueue_rules``); a
change that had to wait is written by the flush loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobrelay.fairshare.model import QueueSpec
from jobrelay.fleet.relayqueue_rules import (
    Figures,
    Invalid,
    StatusClock,
    existing_condition,
    read_queue,
    status_body,
    valid_condition,
)
from jobrelay.fleet.workers.status_rules import rfc3339
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError, WriteFenced
from jobrelay.kube.resources import RELAY_QUEUES
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.manifests import chart_sources

__all__ = ["RelayQueueCache", "crd_manifest"]

# Status fields the controller writes: one no longer wanted is written as null (removed).
_STATUS_FIELDS = ("pending", "admitted", "usage", "demand", "fairShare", "actualShare")

_log = logging.getLogger(__name__)


def crd_manifest() -> dict[str, Any]:
    """The RelayQueue CRD: the chart's ``crds/`` file (one copy, shipped in the package)."""
    return chart_sources.chart_document(chart_sources.RELAY_QUEUE_CRD)


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
    ) -> None:
        self._manager = manager
        self._may_write = may_write
        self._status_interval = status_interval
        self._on_change = on_change
        self._informer = informer if informer is not None else Informer(manager, RELAY_QUEUES)
        self._read: dict[str, QueueSpec | Invalid] = {}
        self._clocks: dict[str, StatusClock] = {}
        self._flusher: asyncio.Task[None] | None = None
        # Set by the fair-share pass: each valid queue's figures, and the fleet's
        # fairness error (None until the first pass).
        self.figures: Mapping[str, Figures] = {}
        self.fairness_error: float | None = None

    # -- reading -----------------------------------------------------------------

    def specs(self) -> dict[str, QueueSpec]:
        """The valid queues, by name."""
        return {n: q for n, q in self._read.items() if isinstance(q, QueueSpec)}

    def invalid(self) -> dict[str, str]:
        """The queues the controller ignores, by name, and why."""
        return {n: q.reason for n, q in self._read.items() if isinstance(q, Invalid)}

    def objects(self) -> list[dict[str, Any]]:
        """Every RelayQueue as the manager holds it (spec and the status written)."""
        return self._informer.values()

    @property
    def has_synced(self) -> bool:
        return self._informer.has_synced

    def _changed(self, event: InformerEvent) -> None:
        name = event.key
        if event.new is None:
            self._read.pop(name, None)
            self._clocks.pop(name, None)
        else:
            read = read_queue(event.new)
            if isinstance(read, Invalid) and not read.name:
                read = Invalid(name, read.reason)
            before, self._read[name] = self._read.get(name), read
            if isinstance(read, Invalid) and read != before:
                _log.warning("RelayQueue %s is ignored: %s", name, read.reason,
                             extra={"event": "relayqueue-invalid", "queue": name})  # fmt: skip
            self._clocks.setdefault(name, StatusClock(self._status_interval)).from_stored(event.new)
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

    async def write_status(self, name: str, figures: Figures | None = None) -> bool:
        """Write queue ``name``'s status from ``figures`` (default: ``self.figures``), if it
        changed and its last write is old enough; True if written."""
        if self._may_write is not None and not self._may_write():
            return False  # a standby writes nothing; once leading, the flush writes it
        obj = self._informer.get(name)
        read = self._read.get(name)
        if obj is None or read is None:
            return False
        invalid = read if isinstance(read, Invalid) else None
        if figures is None and invalid is None:
            figures = self.figures.get(name)
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
        if not clock.due(body, now):
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
        clock.written(body, now)
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
