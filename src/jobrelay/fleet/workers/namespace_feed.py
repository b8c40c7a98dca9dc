"""A worker's namespaces: which exist there and which are open to this manager.

One informer of the worker's Namespaces, slimmed to their name and their
``jobrelay.dev/origin`` label, and the namespace of jobrelay's own credential
there (a SelfSubjectReview, once). Placement reads them through
:class:`~jobrelay.placement.namespaces.WorkerNamespaces`; a change that opens or
closes a namespace tells the placement, like a capacity change, so that a workload
held for it is looked at again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from jobrelay.fleet.namespace_grants import MANAGER_NAMESPACE_UID
from jobrelay.fleet.workers.feed_base import Apply, FeedWiring, WorkerFeed
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES, SELF_SUBJECT_REVIEWS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.placement.namespaces import WorkerNamespaces, credential_namespace
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import ORIGIN_LABEL

__all__ = ["NamespaceFeed", "slim_namespace"]

_log = logging.getLogger(__name__)


def slim_namespace(obj: dict[str, Any]) -> dict[str, Any]:
    """A Namespace as the feed keeps it: its name, version, origin label and the UID of
    the manager namespace it was made for (fleet/namespace_grants.py), only."""
    meta = Meta(obj)
    metadata: dict[str, Any] = {"name": meta.name, "resourceVersion": meta.resource_version}
    origin = meta.labels.get(ORIGIN_LABEL)
    if isinstance(origin, str):
        metadata["labels"] = {ORIGIN_LABEL: origin}
    made_for = meta.annotations.get(MANAGER_NAMESPACE_UID)
    if isinstance(made_for, str):
        metadata["annotations"] = {MANAGER_NAMESPACE_UID: made_for[:64]}
    return {"metadata": metadata}


@dataclass
class NamespaceFeed(WorkerFeed):
    """One connection's Namespace informer, and what it says of each namespace; listed
    once the informer has and the credential's namespace was asked for."""

    label: ClassVar[str] = "namespaces"

    informer: Informer | None = None
    # Each namespace and its origin label (None: none), kept by the informer's handler.
    origins: dict[str, str | None] = field(default_factory=dict)
    credential: str | None = None
    # The credential's user name there (None: not known).
    username: str | None = None
    # The credential's namespace was asked for (known or not, the answer is in).
    asked: bool = False

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        self.informer = Informer(
            wiring.client, NAMESPACES, transform=slim_namespace, options=wiring.options
        )
        return [(self.informer, self._apply)]

    def informers(self) -> Sequence[Informer | None]:
        return (self.informer,)

    async def _before_listed(self, client: ApiClient) -> None:
        await self.learn_credential(client)

    def _apply(self, event: InformerEvent) -> bool:
        name = event.key
        if event.new is None:
            self.origins.pop(name, None)
            return True
        origin = Meta(event.new).labels.get(ORIGIN_LABEL)
        known = name in self.origins
        before = self.origins.get(name)
        self.origins[name] = origin if isinstance(origin, str) else None
        return not known or before != self.origins[name]

    async def learn_credential(self, client: ApiClient) -> None:
        """Which namespace jobrelay's own credential lives in there (its ServiceAccount's),
        never to be used for mirrors; unknown when the worker does not say."""
        # Advisory (the worker's admission policy is the guard): any answer but a clear
        # one leaves it unknown.
        with contextlib.suppress(ApiError, ValueError, TypeError, AttributeError):
            # A review stores nothing: asked by a standby too (a write would be fenced).
            review = await client.review(
                SELF_SUBJECT_REVIEWS,
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            )
            user = ((review.get("status") or {}).get("userInfo") or {}).get("username")
            self.credential = credential_namespace(user) if isinstance(user, str) else None
            self.username = user if isinstance(user, str) else None
        self.asked = True
        if self.credential is not None:
            _log.info("worker %s: jobrelay's credential there lives in namespace %s",
                      self.name, self.credential)  # fmt: skip

    @property
    def listed(self) -> bool:
        return self.asked and super().listed

    def open_to(self, origin: str, namespace: str) -> bool:
        """Whether the cache shows ``namespace`` there carrying ``origin``."""
        return self.listed and self.origins.get(namespace) == origin

    def made_for(self, namespace: str) -> str | None:
        """The UID of the manager namespace ``namespace`` there was made for, as cached
        (None: not made by jobrelay, or not known)."""
        cached = self.informer.get(namespace) if self.informer is not None else None
        recorded = Meta(cached).annotations.get(MANAGER_NAMESPACE_UID) if cached else None
        return recorded if isinstance(recorded, str) else None

    def view(self, origin: str, *, create: bool) -> WorkerNamespaces:
        """The namespaces as placement reads them (not copied: a decision is synchronous)."""
        return WorkerNamespaces(
            origin=origin,
            create=create,
            synced=self.listed,
            origins=MappingProxyType(self.origins),
            credential=self.credential,
        )
