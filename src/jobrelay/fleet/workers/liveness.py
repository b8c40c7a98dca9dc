"""A worker's liveness: the ``/version`` probe and its loop.

Each worker is probed every sixth of the health timeout, each probe bounded by
a third of it, so that one that fails or stops answering shows Connected=False
within the health timeout. The verdict itself is pure
(:mod:`~jobrelay.fleet.workers.liveness_rules`); so is the lost clock, which the
pool moves from here and from its status path, never from a read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from jobrelay.fleet.workers.liveness_rules import ConnectedVerdict
from jobrelay.fleet.workers.record import Worker
from jobrelay.vocabulary.timestamps import rfc3339

__all__ = ["probe", "run_probes"]

_log = logging.getLogger(__name__)


async def probe(worker: Worker, health_timeout: float) -> None:
    """GET /version, bounded by a third of the health timeout."""
    timeout = health_timeout / 3
    try:
        async with asyncio.timeout(timeout):
            version = await worker.client.version(timeout=timeout)
    except Exception as error:  # whatever it is, the worker did not answer
        worker.probe_error = error
        return
    worker.probe_error = None
    worker.last_contact = rfc3339(time.time())
    git_version = version.get("gitVersion")
    if isinstance(git_version, str) and git_version:
        worker.kubernetes_version = git_version


async def run_probes(
    worker: Worker,
    health_timeout: float,
    *,
    changed: Callable[[Worker, ConnectedVerdict], None],
    probed: Callable[[Worker], None],
) -> None:
    """Probe every sixth of the health timeout: ``changed(worker, verdict)`` when the
    verdict's connected or reason changes (a new message alone waits for the next status
    refresh), then ``probed(worker)`` after every probe."""
    interval = health_timeout / 6
    seen = worker.verdict()
    while True:
        await asyncio.sleep(interval)
        await probe(worker, health_timeout)
        now = worker.verdict()
        if (now.connected, now.reason) != (seen.connected, seen.reason):
            _log.log(
                logging.INFO if now.connected else logging.WARNING,
                "worker %s: %s: %s",
                worker.name,
                now.reason,
                now.message,
            )
            seen = now
            changed(worker, now)
        probed(worker)
