"""The stand-in at work on one cluster: an informer per kind it drives (every namespace),
a queue of objects to look at, what the real operator would have made of each created
(pods, and the objects that make pods: children_rules.py) or deleted, and each step's
status written through the /status subresource with the object's resourceVersion (a
conflict is looked at again), only ever through ``jobrelay.kube.client.ApiClient``."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable, Sequence

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.localfleet.standin.children_rules import Child
from jobrelay.localfleet.standin.standin_rules import KINDS, StandinKind, next_children, next_step

_log = logging.getLogger(__name__)

Clock = Callable[[], datetime.datetime]
RETRY_SECONDS = 1.0


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class StandinDriver:
    """Drives the objects of ``kinds`` on the cluster of ``client`` until stopped.

    Kinds the cluster does not serve are left out (logged). ``written`` counts the status
    writes made, ``refused`` lists the writes the apiserver refused (besides conflicts) and
    ``altered`` those it stored otherwise than written (a field pruned or defaulted by the
    CRD's schema), so tests can tell the real CRDs took every one as it was. ``made``
    counts the objects it made (pods and the like), ``unmade`` lists those the apiserver
    refused.
    """

    def __init__(
        self,
        client: ApiClient,
        kinds: Sequence[StandinKind] = KINDS,
        *,
        clock: Clock = _utc_now,
    ) -> None:
        self.client = client
        self.kinds = list(kinds)
        self.clock = clock
        self.written = 0
        self.refused: list[str] = []
        self.altered: list[str] = []
        self.informers: dict[str, Informer] = {}
        self.made = 0
        self.unmade: list[str] = []
        # What was made or deleted already, by (plural, namespace, name, its owner's UID).
        self._made: set[tuple[str, str, str, str]] = set()
        self._deleted: set[tuple[str, str, str, str]] = set()
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._driving = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start an informer per served kind and wait for their first lists."""
        for kind in self.kinds:
            resource = kind.resource
            try:
                served = await self.client.discover(resource.group, resource.version)
            except ApiError as error:
                if not error.is_not_found:
                    raise
                served = []
            if not any(found.get("name") == resource.plural for found in served):
                _log.info("%s: %s not served, left out", self.client.cluster, resource.kind)
                continue
            informer = Informer(self.client, resource)
            informer.add_handler(self._handler(resource.kind))
            self.informers[resource.kind] = informer
            informer.start()
        for informer in self.informers.values():
            await informer.wait_synced()
        self._task = asyncio.create_task(self._work(), name=f"stand-in {self.client.cluster}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for informer in self.informers.values():
            await informer.stop()

    async def __aenter__(self) -> StandinDriver:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being driven (rechecks due later on a timer aside):
        every object its informers handed over so far has been looked at."""
        return not self._queued and not self._driving

    async def wait(self) -> None:
        """Until the work loop ends (it ends only when stopped, or on a bug)."""
        if self._task is not None:
            await self._task

    # -- the queue ---------------------------------------------------------------------

    def _handler(self, kind: str) -> Callable[[InformerEvent], None]:
        def handle(event: InformerEvent) -> None:
            if event.new is not None:
                self._enqueue(kind, event.key)

        return handle

    def _enqueue(self, kind: str, key: str) -> None:
        if (kind, key) not in self._queued:
            self._queued.add((kind, key))
            self._queue.put_nowait((kind, key))

    def _later(self, seconds: float, kind: str, key: str) -> None:
        asyncio.get_running_loop().call_later(seconds, self._enqueue, kind, key)

    async def _work(self) -> None:
        by_kind = {kind.resource.kind: kind for kind in self.kinds}
        while True:
            kind_name, key = await self._queue.get()
            self._queued.discard((kind_name, key))
            self._driving = True
            try:
                await self._drive(by_kind[kind_name], key)
            except Exception:  # one object's bug must not stop the others
                _log.exception("%s: %s %s", self.client.cluster, kind_name, key)
                self._later(RETRY_SECONDS, kind_name, key)
            finally:
                self._driving = False

    async def _drive(self, kind: StandinKind, key: str) -> None:
        resource = kind.resource
        obj = self.informers[resource.kind].get(key)
        if obj is None:
            return
        now = self.clock()
        await self._children(kind, obj, now)
        step = next_step(kind, obj, now)
        if step.recheck_after is not None:
            self._later(step.recheck_after, resource.kind, key)
        if step.status is None or step.status == (obj.get("status") or {}):
            return
        meta = obj["metadata"]
        body = {
            "apiVersion": obj.get("apiVersion", resource.api_version),
            "kind": resource.kind,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "status": step.status,
        }
        try:
            stored = await self.client.replace(resource, body, subresource="status")
        except ApiError as error:
            if error.is_not_found:
                return
            if not error.is_conflict:
                self.refused.append(f"{resource.kind} {key}: {error}")
                _log.warning("%s: %s %s: status refused: %s", self.client.cluster,
                             resource.kind, key, error)  # fmt: skip
            self._later(RETRY_SECONDS if not error.is_conflict else 0.1, resource.kind, key)
            return
        self.written += 1
        if stored.get("status") != step.status:
            # The CRD's schema pruned or defaulted a field: the stand-in writes what it
            # must not (a test fails on any).
            self.altered.append(f"{resource.kind} {key}: wrote {step.status}, stored "
                                f"{stored.get('status')}")  # fmt: skip
        _log.info("%s: %s %s: %s", self.client.cluster, resource.kind, key, _summary(step.status))

    async def _children(
        self, kind: StandinKind, obj: dict[str, object], now: datetime.datetime
    ) -> None:
        """Make what the real operator would have made of ``obj`` and is missing, delete
        what it would have deleted (each once per owner)."""
        children = next_children(kind, obj, now)
        meta = obj["metadata"]
        assert isinstance(meta, dict)
        namespace, owner = str(meta.get("namespace") or ""), str(meta.get("uid") or "")
        for child in children.wanted:
            mark = (child.resource.plural, namespace, child.name, owner)
            if mark not in self._made:
                await self._make(child, namespace, mark)
            self._deleted.discard(mark)
        for resource, name in children.unwanted:
            mark = (resource.plural, namespace, name, owner)
            if mark in self._deleted:
                continue
            try:
                await self.client.delete(resource, name, namespace=namespace)
            except ApiError as error:
                if not error.is_not_found:
                    raise
            self._deleted.add(mark)
            self._made.discard(mark)

    async def _make(self, child: Child, namespace: str, mark: tuple[str, str, str, str]) -> None:
        try:
            await self.client.create(child.resource, child.body, namespace=namespace)
        except ApiError as error:
            if error.is_not_found or error.is_namespace_terminating:
                # The kind is not served here (a JobSet without its CRD), or the
                # namespace is going: nothing to make.
                _log.info("%s: %s %s/%s not made: %s", self.client.cluster,
                          child.resource.kind, namespace, child.name, error.message)  # fmt: skip
            elif not error.is_already_exists:
                self.unmade.append(f"{child.resource.kind} {namespace}/{child.name}: {error}")
                _log.warning("%s: %s %s/%s: creation refused: %s", self.client.cluster,
                             child.resource.kind, namespace, child.name, error)  # fmt: skip
                return
        else:
            self.made += 1
            _log.info("%s: made %s %s/%s", self.client.cluster, child.resource.kind,
                      namespace, child.name)  # fmt: skip
        self._made.add(mark)


def _summary(status: dict[str, object]) -> str:
    """One short line of what was written, for the log."""
    deployment = status.get("jobDeploymentStatus") or status.get("state")
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        true = [
            c.get("type") for c in conditions if isinstance(c, dict) and c.get("status") == "True"
        ]
        return f"{deployment or ''} conditions True: {true}".strip()
    return str(deployment or "status written")
