"""A worker's PersistentVolumeClaims: which exist there, in which namespace, and whether
each is Bound, for placement by data (``placement/claims.py``).

One informer of the worker's claims, cluster-wide, slimmed to namespace, name and
``status.phase``. A claim that comes, goes or changes phase tells the placement, like a
capacity change, so that a workload held for its data is looked at again. A worker
whose credential may not list claims (an older worker role) is said to be unreadable:
workloads that mount a claim are not placed there, with that reason; its other work
goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from jobrelay.fleet.workers.feed_base import Apply, FeedWiring, WorkerFeed
from jobrelay.kube.resources import PERSISTENT_VOLUME_CLAIMS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.placement.claims import WorkerClaims
from jobrelay.vocabulary.meta import Meta

__all__ = ["ClaimFeed", "slim_claim"]

_log = logging.getLogger(__name__)


def slim_claim(obj: dict[str, Any]) -> dict[str, Any]:
    """A PersistentVolumeClaim as the feed keeps it: namespace, name, version and phase."""
    meta = Meta(obj)
    status = obj.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return {
        "metadata": {
            "namespace": meta.namespace,
            "name": meta.name,
            "resourceVersion": meta.resource_version,
        },
        "status": {"phase": phase if isinstance(phase, str) else ""},
    }


@dataclass
class ClaimFeed(WorkerFeed):
    """One connection's PersistentVolumeClaim informer, and each claim's phase: placement
    hears when a claim comes, goes or changes phase once the claims have listed (and
    once when they have)."""

    label: ClassVar[str] = "claims"

    informer: Informer | None = None
    # By namespace, each claim's phase ("" while it has none), kept by the handler.
    phases: dict[str, dict[str, str]] = field(default_factory=dict)
    # Why the claims cannot be read, as last logged (logged once per reason).
    logged: str | None = None

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        self.informer = Informer(
            wiring.client, PERSISTENT_VOLUME_CLAIMS, transform=slim_claim, options=wiring.options
        )
        return [(self.informer, self._apply)]

    def informers(self) -> Sequence[Informer | None]:
        return (self.informer,)

    def _apply(self, event: InformerEvent) -> bool:
        namespace, _, name = event.key.partition("/")
        there = self.phases.get(namespace)
        if event.new is None:
            if there is None or there.pop(name, None) is None:
                return False
            if not there:
                del self.phases[namespace]
            return True
        phase = str((event.new.get("status") or {}).get("phase") or "")
        if there is None:
            there = self.phases[namespace] = {}
        before = there.get(name)
        there[name] = phase
        return before != phase

    @property
    def unreadable(self) -> str | None:
        """Why its claims cannot be read (its credential may not list them), if so; other
        failures (it does not answer) leave them merely not known yet."""
        refusal = next(self.refusals(), None)
        if refusal is None or refusal.reason != "Forbidden":
            return None
        reason, message = refusal.reason, refusal.message
        why = f"list persistentvolumeclaims: {reason}"
        if why != self.logged:
            self.logged = why
            _log.warning(
                "worker %s: cannot list its PersistentVolumeClaims (%s: %s): workloads that "
                "mount a claim are not placed there (grant list/watch persistentvolumeclaims)",
                self.name, reason, message, extra={"cluster": self.name},
            )  # fmt: skip
        return why

    def view(self) -> WorkerClaims:
        """The claims as placement reads them (not copied: a decision is synchronous)."""
        return WorkerClaims(
            synced=self.listed, phases=MappingProxyType(self.phases), unreadable=self.unreadable
        )
