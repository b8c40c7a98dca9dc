"""The copy janitor: a dependency copy lives on its worker while a workload there uses it.

Copies carry no owner per mirror (each new mirror would rewrite the whole copy), so
their lifetime is told here, from what the caches show, never from memory: a copy
is in use while a mirror on its worker comes from a workload whose pod templates
name it, or such a workload is placed there and not finished (its mirror is on its
way). One found unused on consecutive looks for :data:`SETTLE` seconds is deleted
with its UID as a precondition (never a namesake made since); a restarted leader
starts looking afresh, so nothing is deleted on one look alone. The leader looks
every :data:`CHECK_INTERVAL` seconds; a worker whose mirrors are not all listed is
not looked at (a mirror not listed yet is not a mirror that is gone). The rules are
pure (``dependencies/copy_rules.py``: ``in_use``, ``settled_unused``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from jobrelay.dependencies.copy_rules import RESOURCES, CopyUser, in_use, settled_unused
from jobrelay.dependencies.template_references import DependencyKind
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.placement import placements_of

__all__ = ["CHECK_INTERVAL", "SETTLE", "CopyJanitor"]

_log = logging.getLogger(__name__)

# Seconds a copy stays unused before it goes: longer than a cache takes to show the
# mirror or placement a reconcile just wrote.
SETTLE = 10.0
# Seconds between two looks at every worker's copies.
CHECK_INTERVAL = 5.0

# (worker, kind, namespace, name, uid) of one copy.
_CopyId = tuple[str, DependencyKind, str, str, str]


class _Copies(Protocol):
    def copies(self) -> Iterable[tuple[DependencyKind, JsonObj]]: ...


class JanitorWorker(Protocol):
    """One worker as the janitor reads it (fleet/workers/record.py's Worker)."""

    name: str
    client: ApiClient
    dependency_feed: _Copies
    mirrors: dict[str, Any]

    @property
    def connected(self) -> bool: ...

    def mirror(self, key: tuple[str, str]) -> dict[str, Any] | None: ...


class JanitorPool(Protocol):
    def workers(self) -> Sequence[Any]: ...


class _Objects(Protocol):
    def get(self, key: str) -> JsonObj | None: ...


class JanitorKind(Protocol):
    """A kind the relay dispatches, with its management cache (the runner's KindRuntime)."""

    @property
    def kind(self) -> WorkloadKind: ...

    @property
    def objects(self) -> _Objects: ...


class CopyJanitor:
    """Deletes the copies no workload on their worker uses any more (the leader's)."""

    def __init__(
        self,
        pool: JanitorPool,
        referencing: Callable[[DependencyKind, str], Iterable[WorkloadKey]],
        kinds: Mapping[str, JanitorKind],
        *,
        settle: float = SETTLE,
        interval: float = CHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        # The workloads whose templates name (kind, "namespace/name"): the relay's index.
        self._referencing = referencing
        # Each kind's management objects, as cached.
        self._kinds = kinds
        self._settle = settle
        self._interval = interval
        self._clock = clock
        # Since when each copy found unused has been (restarts empty: looked at again).
        self._since: dict[_CopyId, float] = {}

    async def run(self) -> None:
        """Look every ``interval`` seconds, until cancelled (each leadership afresh)."""
        self._since = {}
        while True:
            await asyncio.sleep(self._interval)
            await self.sweep()

    async def sweep(self) -> int:
        """Delete the copies unused for ``settle`` seconds; how many went. Errors are
        logged, never raised."""
        unused = [copy for worker in self._pool.workers() for copy in self._unused_on(worker)]
        due, self._since = settled_unused(unused, self._since, self._clock(), self._settle)
        workers = {worker.name: worker for worker in self._pool.workers()}
        deleted = 0
        for copy in due:
            worker = workers.get(copy[0])
            if worker is not None and await self._delete(worker, copy):
                deleted += 1
            self._since.pop(copy, None)
        return deleted

    def _unused_on(self, worker: JanitorWorker) -> list[_CopyId]:
        if not worker.connected or not _mirrors_listed(worker):
            return []
        found: list[_CopyId] = []
        for kind, copy in list(worker.dependency_feed.copies()):
            meta = Meta(copy)
            users = (self._user(worker, key) for key in self._referencing(kind, meta.key))
            if not in_use(users):
                found.append((worker.name, kind, meta.namespace, meta.name, meta.uid))
        return found

    def _user(self, worker: JanitorWorker, key: WorkloadKey) -> CopyUser:
        if worker.mirror(key) is not None:
            return CopyUser(mirrored_here=True, placed_here=True)
        runtime = self._kinds.get(key.kind)
        obj = runtime.objects.get(key.key) if runtime is not None else None
        if runtime is None or obj is None:
            return CopyUser(mirrored_here=False, placed_here=False)
        placed = placements_of(obj)
        return CopyUser(
            mirrored_here=False,
            placed_here=bool(placed) and placed[-1] == worker.name,
            finished=runtime.kind.is_finished(obj),
        )

    async def _delete(self, worker: JanitorWorker, copy: _CopyId) -> bool:
        name, kind, namespace, copy_name, uid = copy
        try:
            await worker.client.delete(RESOURCES[kind], copy_name, namespace=namespace, uid=uid)
        except ApiError as error:
            if not (error.is_not_found or error.is_conflict):
                _log.warning("worker %s: cannot delete the unused copy %s %s/%s: %s",
                             name, kind, namespace, copy_name, error.message)  # fmt: skip
            return False
        _log.info("worker %s: deleted the copy %s %s/%s (no workload there uses it)",
                  name, kind, namespace, copy_name, extra={"cluster": name})  # fmt: skip
        return True


def _mirrors_listed(worker: JanitorWorker) -> bool:
    """Every mirror cache of the worker has listed, or its kind is not served there
    (404: no mirror of it can be there)."""
    for informer in worker.mirrors.values():
        if informer.has_synced:
            continue
        error = informer.last_error
        if not (isinstance(error, ApiError) and error.is_not_found):
            return False
    return True
