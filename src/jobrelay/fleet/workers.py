"""The live pool of worker clusters: one client and one mirror-Job cache per worker.

The pool follows the manager's ``WorkerCluster`` objects: a new or changed
one is (re)connected from its kubeconfig Secret, a deleted one is dropped.
Each worker's informer caches only the mirror Jobs this controller created
(label-selected) and reports every change as the management Job's key, so
the dispatcher learns of mirror status changes without polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobrelay.fleet import registry
from jobrelay.jobs.naming import MIRROR_LABEL, controller_label_value
from jobrelay.jobs.status import is_finished
from jobrelay.kube.api import JOBS, SECRETS, WORKER_CLUSTERS, ApiClient, ApiError, ApiOptions
from jobrelay.kube.queueing import WorkQueue, run_workers
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolOptions:
    namespace: str = registry.DEFAULT_NAMESPACE
    controller_name: str = "jobrelay.dev/relay"
    # How long a worker may take to list its mirrors before it counts as unreachable.
    connect_timeout: float = 20.0
    # How often each worker's status (Connected, activeMirrors) is refreshed at most.
    status_interval: float = 10.0
    api: ApiOptions = field(default_factory=ApiOptions)
    informer: InformerOptions = field(default_factory=InformerOptions)


@dataclass
class Worker:
    """One connected (or connecting) worker cluster."""

    name: str
    client: ApiClient
    mirrors: Informer
    identity: tuple[str, ...]  # what the connection was built from; a change reconnects
    cordoned: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    last_error: str = ""
    # Keys of the mirrors that have not finished, kept by the informer handler:
    # placement asks for the count on every decision, so it must not scan.
    unfinished: set[str] = field(default_factory=set)

    @property
    def connected(self) -> bool:
        return self.mirrors.has_synced and not self.last_error

    def active_mirrors(self) -> int:
        return len(self.unfinished)

    def track(self, event: InformerEvent) -> None:
        if event.new is None or is_finished(event.new):
            self.unfinished.discard(event.key)
        else:
            self.unfinished.add(event.key)

    async def close(self) -> None:
        await self.mirrors.stop()
        await self.client.aclose()


def slim_mirror(obj: dict[str, Any]) -> dict[str, Any]:
    """What the dispatcher needs of a mirror: identity, mutable spec fields and status.

    The pod template and managedFields are most of a Job's bytes and are never read.
    """
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    return {
        "metadata": {
            key: metadata[key]
            for key in (
                "name",
                "namespace",
                "uid",
                "labels",
                "annotations",
                "resourceVersion",
                "deletionTimestamp",
            )
            if key in metadata
        },
        "spec": {key: value for key, value in spec.items() if key != "template"},
        "status": obj.get("status") or {},
    }


class WorkerPool:
    """Connects to every registered worker and keeps the connections current."""

    def __init__(
        self,
        manager: ApiClient,
        on_mirror_change: Callable[[str], None],
        options: PoolOptions | None = None,
    ) -> None:
        self._manager = manager
        self._on_mirror_change = on_mirror_change
        self._options = options or PoolOptions()
        self._workers: dict[str, Worker] = {}
        self._registrations = Informer(manager, WORKER_CLUSTERS, options=self._options.informer)
        # The kubeconfig Secrets, watched so that a rotated credential reconnects its worker.
        self._secrets = Informer(
            manager, SECRETS, namespace=self._options.namespace, options=self._options.informer
        )
        self._queue: WorkQueue[str] = WorkQueue()
        self._task: asyncio.Task[None] | None = None
        self._selector = f"{MIRROR_LABEL}={controller_label_value(self._options.controller_name)}"
        self._status_written: dict[str, dict[str, Any]] = {}
        self._worker_added = asyncio.Event()

    # -- reading ---------------------------------------------------------------

    def get(self, name: str) -> Worker | None:
        return self._workers.get(name)

    def workers(self) -> list[Worker]:
        return list(self._workers.values())

    def mirror(self, cluster: str, key: str) -> dict[str, Any] | None:
        worker = self._workers.get(cluster)
        return worker.mirrors.get(key) if worker else None

    def mirrors_of(self, key: str) -> list[tuple[Worker, dict[str, Any]]]:
        """Every cached mirror with the management Job's namespace/name, on any worker."""
        found = []
        for worker in self._workers.values():
            mirror = worker.mirrors.get(key)
            if mirror is not None:
                found.append((worker, mirror))
        return found

    def is_registered(self, name: str) -> bool:
        return self._registrations.get(name) is not None

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._registrations.add_handler(self._on_registration)
        self._secrets.add_handler(self._on_secret)
        self._secrets.start()
        self._registrations.start()
        await self._secrets.wait_synced()
        await self._registrations.wait_synced()
        self._task = asyncio.get_running_loop().create_task(
            run_workers(self._queue, 2, self._sync, name="worker-pool"), name="worker-pool"
        )

    async def wait_connected(self, timeout: float) -> None:
        """Wait (bounded) until every registered worker has listed its mirrors once."""
        with contextlib.suppress(TimeoutError, RuntimeError):
            async with asyncio.timeout(timeout):
                for name in self._registrations.keys():  # noqa: SIM118 (an Informer, not a dict)
                    while (worker := self._workers.get(name)) is None:
                        self._worker_added.clear()
                        await self._worker_added.wait()
                    await worker.mirrors.wait_synced()

    async def stop(self) -> None:
        self._queue.shutdown()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._registrations.stop()
        await self._secrets.stop()
        for worker in list(self._workers.values()):
            await worker.close()
        self._workers.clear()

    def _on_registration(self, event: InformerEvent) -> None:
        self._queue.add(event.key)

    def _on_secret(self, event: InformerEvent) -> None:
        secret = str((event.obj.get("metadata") or {}).get("name"))
        for registration in self._registrations.values():
            ref = (registration.get("spec") or {}).get("kubeconfigSecretRef") or {}
            if ref.get("name") == secret:
                self._queue.add(str(registration["metadata"]["name"]))

    # -- keeping one worker current ------------------------------------------------

    async def _sync(self, name: str) -> float | None:
        registration = self._registrations.get(name)
        current = self._workers.get(name)
        if registration is None:
            if current is not None:
                _log.info("worker %s unregistered: disconnecting", name)
                del self._workers[name]
                await current.close()
            self._status_written.pop(name, None)
            return None
        spec = registration.get("spec") or {}
        identity = self._identity(spec)
        if current is None or current.identity != identity:
            if current is not None:
                _log.info("worker %s changed: reconnecting", name)
                del self._workers[name]
                await current.close()
            current = await self._connect(name, spec, identity)
            if current is None:
                return self._options.status_interval
        current.cordoned = bool(spec.get("cordoned"))
        current.labels = dict((registration.get("metadata") or {}).get("labels") or {})
        if not current.mirrors.has_synced:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._options.connect_timeout):
                    await current.mirrors.wait_synced()
        current.last_error = (
            "" if current.mirrors.has_synced else "cannot list Jobs on the worker yet"
        )
        await self._write_status(name, current)
        return self._options.status_interval

    def _identity(self, spec: Mapping[str, Any]) -> tuple[str, ...]:
        ref = spec.get("kubeconfigSecretRef") or {}
        secret = self._secrets.get(f"{self._options.namespace}/{ref.get('name')}") or {}
        secret_version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
        return (
            str(ref.get("name")),
            str(ref.get("key")),
            str(spec.get("context") or ""),
            secret_version,
        )

    async def _connect(
        self, name: str, spec: Mapping[str, Any], identity: tuple[str, ...]
    ) -> Worker | None:
        try:
            kubeconfig = await registry.read_kubeconfig(
                self._manager, {"spec": spec}, self._options.namespace
            )
            client = ApiClient.from_kubeconfig_dict(
                kubeconfig, spec.get("context") or None, cluster=name, options=self._options.api
            )
        except (registry.RegistryError, ValueError) as error:
            _log.warning("worker %s: %s", name, error)
            await self._write_conditions(
                name, connected=False, reason="InvalidKubeconfig", message=str(error)
            )
            return None
        mirrors = Informer(
            client,
            JOBS,
            label_selector=self._selector,
            transform=slim_mirror,
            options=self._options.informer,
        )
        worker = Worker(name, client, mirrors, identity)
        mirrors.add_handler(worker.track)
        mirrors.add_handler(lambda event: self._on_mirror_change(event.key))
        mirrors.start()
        self._workers[name] = worker
        self._worker_added.set()
        _log.info("worker %s: connecting to %s", name, client.cluster)
        return worker

    async def _write_status(self, name: str, worker: Worker) -> None:
        reason, message = (
            ("Connected", "mirror Jobs listed and watched")
            if worker.connected
            else ("Unreachable", worker.last_error)
        )
        await self._write_conditions(
            name, connected=worker.connected, reason=reason, message=message,
            active=worker.active_mirrors(),
        )  # fmt: skip

    async def _write_conditions(
        self, name: str, *, connected: bool, reason: str, message: str, active: int | None = None
    ) -> None:
        wanted: dict[str, Any] = {
            "type": "Connected",
            "status": "True" if connected else "False",
            "reason": reason,
            "message": message,
        }
        previous = self._status_written.get(name)
        if (
            previous is not None
            and previous.get("condition") == wanted
            and previous.get("active") == active
        ):
            return
        registration = self._registrations.get(name) or {}
        existing = next(
            (
                c
                for c in (registration.get("status") or {}).get("conditions") or []
                if c.get("type") == "Connected"
            ),
            None,
        )
        transition = (
            existing["lastTransitionTime"]
            if existing
            and existing.get("status") == wanted["status"]
            and existing.get("lastTransitionTime")
            else datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
        status: dict[str, Any] = {"conditions": [{**wanted, "lastTransitionTime": transition}]}
        if active is not None:
            status["activeMirrors"] = active
        try:
            await self._manager.patch(
                WORKER_CLUSTERS, name, {"status": status}, subresource="status"
            )
        except ApiError as error:
            if not error.is_not_found:
                _log.warning("worker %s: cannot write status: %s", name, error)
            return
        self._status_written[name] = {"condition": wanted, "active": active}
