"""The manager's ConfigMaps, Secrets and ServiceAccounts that workloads reference, and
which workloads reference each.

Informers of the management cluster, slimmed to name, UID, version and the
digest, size and type of what a copy would carry (dependencies/copy_rules.py):
never a Secret's data in memory. ConfigMaps and ServiceAccounts are watched everywhere;
Secrets only in the namespaces an admin opened to Secret copying
(``--dependency-secret-namespaces``, the chart's ``dependencies.secretNamespaces``, each
with a Role that lets the controller read Secrets there), one informer each, or everywhere
when no list is given (`jobrelay run` with an admin's kubeconfig). A workload elsewhere
that needs a Secret is held, saying the namespace is not opened (steps/holds/
by_dependencies.py). An index from (namespace, kind, name) to the
workloads whose pod templates name it, kept as the workloads' own caches change,
so that a referenced object that appears, changes or goes brings back exactly
those workloads (a held one proceeds; a running one's copies follow).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable

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

    def __init__(
        self, manager: ApiClient, *, secret_namespaces: Iterable[str] | None = None
    ) -> None:
        # None: Secrets read everywhere.
        self.secret_namespaces = None if secret_namespaces is None else frozenset(secret_namespaces)
        # By (kind, namespace); "" for one informer of every namespace.
        self.informers: dict[tuple[DependencyKind, str], Informer] = {}
        for kind, ref in RESOURCES.items():
            where = [""]
            if kind == "secret" and self.secret_namespaces is not None:
                where = sorted(self.secret_namespaces)
            for namespace in where:
                self.informers[kind, namespace] = Informer(
                    manager, ref, namespace=namespace or None, transform=slim_source(kind)
                )
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

    def closed(self, kind: DependencyKind, namespace: str) -> bool:
        """Whether the controller does not read ``kind`` in ``namespace``."""
        return self._informer(kind, namespace) is None

    def _informer(self, kind: DependencyKind, namespace: str) -> Informer | None:
        everywhere = self.informers.get((kind, ""))  # (an empty Informer is falsy)
        return everywhere if everywhere is not None else self.informers.get((kind, namespace))

    def needed(self, kind: WorkloadKind, obj: JsonObj) -> tuple[Needed, ...]:
        """What ``obj``'s pods need, each with the manager's (None: missing, or closed)."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        found = []
        for d in dependencies(kind.pod_templates(obj)):
            informer = self._informer(d.kind, namespace)
            if informer is None:
                found.append(Needed(d, None, closed=True))
            else:
                found.append(Needed(d, source_of(informer.get(f"{namespace}/{d.name}"))))
        return tuple(found)

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
        for (kind, _), informer in self.informers.items():
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
