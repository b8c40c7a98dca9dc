"""Wires the controller together and runs it until told to stop.

Start-up order matters for safety: the management Jobs' cache must be synced
before any key is reconciled (an unsynced cache would make every mirror look
orphaned), and workers get a bounded chance to list their mirrors first (so
that nothing is placed on the strength of an empty cache).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from jobrelay.controller.dispatch import Dispatcher, managed_by
from jobrelay.controller.options import ControllerOptions
from jobrelay.fleet import registry
from jobrelay.fleet.workers import PoolOptions, WorkerPool
from jobrelay.kube.api import JOBS, ApiClient
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.queueing import QueueOptions, WorkQueue, run_workers
from jobrelay.kube.watching import Informer

_log = logging.getLogger(__name__)


class Controller:
    """One running jobrelay: caches, queue, reconcilers."""

    def __init__(self, manager: ApiClient, options: ControllerOptions) -> None:
        self.options = options
        self.manager = manager
        self.queue: WorkQueue[str] = WorkQueue(QueueOptions(max_delay=60.0, qps=50.0, burst=200))
        self.jobs = Informer(manager, JOBS, transform=managed_by(options.controller_name))
        self.pool = WorkerPool(
            manager,
            self.queue.add,
            PoolOptions(namespace=options.namespace, controller_name=options.controller_name),
        )
        self.events = EventRecorder(manager, component="jobrelay")
        self.dispatcher = Dispatcher(manager, self.jobs, self.pool, self.events, options)

    async def run(self, stop: asyncio.Event) -> None:
        await registry.install_crd(self.manager)
        await registry.ensure_namespace(self.manager, self.options.namespace)
        self.jobs.add_handler(lambda event: self.queue.add(event.key))
        self.jobs.start()
        await self.pool.start()
        try:
            await self.jobs.wait_synced()
            await self.pool.wait_connected(self.options.worker_sync_timeout)
            _log.info(
                "jobrelay ready: %d managed Jobs, workers: %s",
                len(self.jobs),
                ", ".join(
                    f"{w.name}({'connected' if w.connected else 'not connected'})"
                    for w in self.pool.workers()
                )
                or "none registered",
                extra={"event": "ready"},
            )
            async with asyncio.TaskGroup() as group:
                workers = group.create_task(
                    run_workers(
                        self.queue,
                        self.options.concurrency,
                        self.dispatcher.reconcile,
                        name="dispatch",
                    )
                )
                resync = group.create_task(self._resync())
                await stop.wait()
                _log.info("stopping")
                self.queue.shutdown()
                resync.cancel()
                await workers
        finally:
            await self.jobs.stop()
            await self.pool.stop()
            await self.events.aclose()

    async def _resync(self) -> None:
        """Reconcile every known key now and then, from the caches alone.

        Events drive everything; this bounds what a lost event could cost,
        e.g. how long an orphaned mirror can outlive its management Job.
        """
        while True:
            await asyncio.sleep(self.options.gc_interval)
            keys = set(self.jobs.keys())
            for worker in self.pool.workers():
                keys.update(worker.mirrors.keys())
            for key in keys:
                self.queue.add(key)


async def run(manager: ApiClient, options: ControllerOptions) -> None:
    """Run until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await Controller(manager, options).run(stop)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)
        await manager.aclose()
        _log.info("stopped")
