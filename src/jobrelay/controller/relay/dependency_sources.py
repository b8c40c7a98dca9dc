"""The manager's ConfigMaps, Secrets and ServiceAccounts that workloads reference, and
which workloads reference each.

Three informers of the management cluster, slimmed to name, UID, version and the
digest, size and type of what a copy would carry (dependencies/copy_rules.py):
never a Secret's data in memory. An index from (namespace, kind, name) to the
workloads whose pod templates name it, kept as the workloads' own caches change,
so that a referenced object that appears, changes or goes brings back exactly
those workloads (a held one proceeds; a running one's copies follow).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable

from jobrelay.controller.relay.snapshot import Needed
from jobrelay.dependencies.copy_rules import RESOURCES, slim_source, source_of
from jobrelay.dependencies.template_references import DependencyKind, dependencies
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.outcome import Lane

__all__ = ["DependencySources"]

# (namespace, kind, name) of one referenced object.
_Ref = tuple[str, DependencyKind, str]


class DependencySources:
    """The manager's referenced objects, and who references them."""

    def __init__(self, manager: ApiClient) -> None:
        self.informers: dict[DependencyKind, Informer] = {
            kind: Informer(manager, ref, transform=slim_source(kind))
            for kind, ref in RESOURCES.items()
        }
        self._by_ref: dict[_Ref, set[WorkloadKey]] = {}
        self._of_key: dict[WorkloadKey, frozenset[_Ref]] = {}
        self._enqueue: Callable[[WorkloadKey, Lane], None] | None = None

    # -- who references what -------------------------------------------------------------

    def workload_changed(self, key: WorkloadKey, kind: WorkloadKind, obj: JsonObj | None) -> None:
        """Keep the index: ``obj`` is the workload as its cache now holds it (None: gone)."""
        refs: frozenset[_Ref] = frozenset()
        if obj is not None:
            try:
                needed = dependencies(kind.pod_templates(obj))
            except (TypeError, ValueError, AttributeError, KeyError):
                needed = ()  # an unreadable template names nothing; decide says why
            refs = frozenset((key.namespace, d.kind, d.name) for d in needed)
        before = self._of_key.get(key, frozenset())
        if refs == before:
            return
        for ref in before - refs:
            keys = self._by_ref.get(ref)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_ref[ref]
        for ref in refs - before:
            self._by_ref.setdefault(ref, set()).add(key)
        if refs:
            self._of_key[key] = refs
        else:
            self._of_key.pop(key, None)

    def referencing(self, kind: DependencyKind, namespaced_name: str) -> list[WorkloadKey]:
        """The workloads whose templates name this object."""
        namespace, _, name = namespaced_name.partition("/")
        return sorted(self._by_ref.get((namespace, kind, name), ()))

    # -- what the manager has ----------------------------------------------------------------

    def needed(self, kind: WorkloadKind, obj: JsonObj) -> tuple[Needed, ...]:
        """What ``obj``'s pods need, each with the manager's (None: missing)."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        return tuple(
            Needed(d, source_of(self.informers[d.kind].get(f"{namespace}/{d.name}")))
            for d in dependencies(kind.pod_templates(obj))
        )

    @property
    def listed(self) -> bool:
        return all(i.has_synced for i in self.informers.values())

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, enqueue: Callable[[WorkloadKey, Lane], None], timeout: float) -> None:
        """Start the informers and wait (bounded) for their first lists: a manager that
        forbids them holds only the workloads that reference something, never the rest.
        A change of a referenced object queues the workloads that reference it (FRESH: a
        held one may be placed now)."""
        self._enqueue = enqueue
        for kind, informer in self.informers.items():
            informer.add_handler(functools.partial(self._tell, kind, Lane.FRESH))
            informer.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                for informer in self.informers.values():
                    await informer.wait_synced()

    def copy_changed(self, kind: DependencyKind, namespaced_name: str) -> None:
        """A copy on a worker changed (or went): the workloads that reference its name look
        again (one deleted behind jobrelay's back is made again)."""
        self._queue(kind, namespaced_name, Lane.STATUS)

    def _tell(self, kind: DependencyKind, lane: Lane, event: InformerEvent) -> None:
        self._queue(kind, event.key, lane)

    def _queue(self, kind: DependencyKind, namespaced_name: str, lane: Lane) -> None:
        if self._enqueue is None:
            return
        for key in self.referencing(kind, namespaced_name):
            self._enqueue(key, lane)

    async def stop(self) -> None:
        for informer in self.informers.values():
            await informer.stop()
