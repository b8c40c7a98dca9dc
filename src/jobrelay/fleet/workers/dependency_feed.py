"""A worker's copies of workloads' ConfigMaps, Secrets and ServiceAccounts.

Informers label-selected to the copies this controller and origin made
(dependencies/copy_rules.py), slimmed to their metadata: owners, our marks, the
digest of what was copied (never a Secret's data). The reconciler reads which
copies of a workload's dependencies are there and current; a change of one tells
the runner, which looks again at the workloads that reference it (a copy deleted
behind jobrelay's back is made again); the orphan sweep reads every copy.

Where they watch follows what the credential may read (one SelfSubjectAccessReview per
kind and verb, once per connection). The least-privilege worker credential reads those
kinds only in the namespaces opened to its origin (charts/jobrelay-worker/files/
worker-access.yaml, ``namespaceRole``): then one informer per kind per opened namespace,
opened and closed as the namespace feed sees namespaces labelled with the origin come and
go, once the credential may read there (a review per namespace, or the relay's word that
it bound the namespaced ClusterRole there: :meth:`DependencyFeed.granted`). A credential that may list them everywhere (a worker admin's) keeps one cluster-wide
informer per kind, as fewer watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from jobrelay.dependencies.copy_rules import RESOURCES, slim_copy
from jobrelay.dependencies.template_references import DependencyKind
from jobrelay.fleet.serviceaccount import SELF_SUBJECT_ACCESS_REVIEWS
from jobrelay.fleet.workers.feed_base import Apply, CopyChanged, FeedWiring, WorkerFeed
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import ORIGIN_LABEL
from jobrelay.vocabulary.resource import Resource

__all__ = [
    "CopyChanged",
    "DependencyFeed",
    "OpenedNamespaces",
    "may_read_everywhere",
    "may_read_in",
]

_log = logging.getLogger(__name__)

# An informer lists, then watches: both must be allowed everywhere for one informer per kind.
_VERBS = ("list", "watch")
# The key of the cluster-wide informers.
_EVERYWHERE = ""


async def may_read_in(client: ApiClient, namespace: str = "") -> bool:
    """Whether the credential may list and watch every copied kind in ``namespace`` ("":
    in every namespace). An error counts as no."""

    async def allowed(ref: Resource, verb: str) -> bool:
        attributes = {"verb": verb, "resource": ref.plural, "namespace": namespace}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        try:
            answer = await client.review(SELF_SUBJECT_ACCESS_REVIEWS, review)
        except ApiError:
            return False
        return bool((answer.get("status") or {}).get("allowed"))

    answers = await asyncio.gather(
        *(allowed(ref, verb) for ref in RESOURCES.values() for verb in _VERBS)
    )
    return all(answers)


async def may_read_everywhere(client: ApiClient) -> bool:
    """Whether the credential may list and watch every copied kind in every namespace (no:
    the namespaced informers work for every credential)."""
    return await may_read_in(client)


class OpenedNamespaces(Protocol):
    """What it reads of the connection's namespace feed (namespace_feed.py)."""

    @property
    def informer(self) -> Informer | None: ...

    @property
    def listed(self) -> bool: ...


@dataclass
class DependencyFeed(WorkerFeed):
    """One connection's informers of our copies there; each change is told
    (``FeedWiring.copy_changed``), never placement's news."""

    label: ClassVar[str] = "copies"

    # The connection's namespace feed: which namespaces are opened to the origin.
    namespaces: OpenedNamespaces
    # By (kind, namespace); the namespace is "" for a cluster-wide informer.
    by_key: dict[tuple[DependencyKind, str], Informer] = field(default_factory=dict)
    wiring: FeedWiring | None = None
    # Whether it watches cluster-wide (None: not known yet).
    everywhere: bool | None = None
    # The namespaces opened to the origin, as the namespace feed shows them.
    opened: set[str] = field(default_factory=set)
    # Informers being stopped (a namespace closed), and reviews asked, kept until done.
    stopping: set[asyncio.Task[None]] = field(default_factory=set)
    pending: set[asyncio.Task[None]] = field(default_factory=set)

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        self.wiring = wiring
        return ()  # opened once the credential's reach is known (_before_listed)

    async def _before_listed(self, client: ApiClient) -> None:
        self.everywhere = await may_read_everywhere(client)
        if self.everywhere:
            for kind in RESOURCES:
                self._watch(kind, _EVERYWHERE)
            return
        informer = self.namespaces.informer
        if informer is None:
            return
        _log.info("worker %s: copies watched only in the namespaces opened to this manager",
                  self.name)  # fmt: skip
        await informer.wait_synced()
        informer.add_handler(self._namespace_changed)  # replays every namespace cached

    def _namespace_changed(self, event: InformerEvent) -> None:
        wiring = self.wiring
        if wiring is None:
            return
        namespace = event.key
        opened = event.new is not None and Meta(event.new).labels.get(ORIGIN_LABEL) == (
            wiring.origin
        )
        if not opened:
            self.opened.discard(namespace)
            for kind in RESOURCES:
                self._unwatch(kind, namespace)
            return
        if namespace in self.opened:
            return
        self.opened.add(namespace)
        # Watched once the credential may read there: a namespace opened by its label alone
        # has no RoleBinding until the relay makes one before its first copy (granted).
        task = asyncio.get_running_loop().create_task(self._watch_if_allowed(namespace))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _watch_if_allowed(self, namespace: str) -> None:
        wiring = self.wiring
        if wiring is not None and await may_read_in(wiring.client, namespace):
            self.granted(namespace)

    def granted(self, namespace: str) -> None:
        """The credential may read the copied kinds in ``namespace`` now (the relay bound
        its namespaced ClusterRole there): watch them, if the namespace is opened."""
        if self.everywhere or namespace not in self.opened:
            return
        for kind in RESOURCES:
            self._watch(kind, namespace)

    def _watch(self, kind: DependencyKind, namespace: str) -> None:
        wiring = self.wiring
        if wiring is None or (kind, namespace) in self.by_key:
            return
        informer = Informer(
            wiring.client, RESOURCES[kind], namespace=namespace or None,
            label_selector=wiring.copy_selector, transform=slim_copy, options=wiring.options,
        )  # fmt: skip
        informer.add_handler(functools.partial(_tell, wiring.copy_changed, kind))
        self.by_key[kind, namespace] = informer
        informer.start()

    def _unwatch(self, kind: DependencyKind, namespace: str) -> None:
        informer = self.by_key.pop((kind, namespace), None)
        if informer is None:
            return
        task = asyncio.get_running_loop().create_task(informer.stop())
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    def informers(self) -> Sequence[Informer | None]:
        return tuple(self.by_key.values())

    @property
    def listed(self) -> bool:
        """Its reach is known and every informer it has opened has listed (none: no
        namespace is opened to this manager there yet)."""
        if self.everywhere is None:
            return False
        if not self.everywhere and not self.namespaces.listed:
            return False
        return all(i.has_synced for i in self.by_key.values())

    def _listed(self, wiring: FeedWiring) -> None:
        """Nothing to tell: each copy was told as it came."""

    def copy(self, kind: DependencyKind, namespace: str, name: str) -> JsonObj | None:
        """Our copy of that name there, as cached (None: none, or not listed yet)."""
        informer = self.by_key.get((kind, _EVERYWHERE if self.everywhere else namespace))
        return informer.get(f"{namespace}/{name}") if informer is not None else None

    def copies(self) -> Iterator[tuple[DependencyKind, JsonObj]]:
        """Every copy cached here (for the orphan sweep)."""
        for (kind, _), informer in list(self.by_key.items()):
            if not informer.has_synced:
                continue
            for key in list(informer.keys()):
                obj = informer.get(key)
                if obj is not None:
                    yield kind, obj

    async def stop(self) -> None:
        for task in list(self.pending):
            task.cancel()
        await super().stop()
        for task in [*self.stopping, *self.pending]:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _tell(changed: CopyChanged | None, kind: DependencyKind, event: InformerEvent) -> None:
    if changed is not None:
        changed(kind, event.key)
