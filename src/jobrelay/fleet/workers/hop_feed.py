"""The objects a worker's operators make from mirrors that make pods in turn (owner hops,
each kind's ``owner_hops``), so that the capacity tracker counts their pods as the mirror's.

One informer per hop resource the configured kinds name (``WorkloadKind.owner_hop_refs``),
cluster-wide, keeping only the objects that one of those kinds controls, slimmed to their
identity and controller (placement/slim_objects.py ``slim_hop``), each handed to the
connection's capacity tracker. A worker whose credential may not list one is said so once
(:meth:`HopFeed.tell_refusals`): the pods of the hops it cannot see then count only where
they name the mirror itself, as before there were hops.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from jobrelay.fleet.workers.feed_base import Apply, FeedWiring, WorkerFeed
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.placement.slim_objects import slim_hop
from jobrelay.placement.tracker import CapacityTracker
from jobrelay.vocabulary.resource import Resource

__all__ = ["HopFeed", "hop_controllers"]

_log = logging.getLogger(__name__)


def hop_controllers(kinds: Iterable[WorkloadKind]) -> dict[Resource, frozenset[tuple[str, str]]]:
    """Each hop resource of ``kinds``, with the (API group, kind) of those that make it."""
    found: dict[Resource, set[tuple[str, str]]] = {}
    for kind in kinds:
        for ref in kind.owner_hop_refs:
            found.setdefault(ref, set()).add((kind.ref.group, kind.ref.kind))
    return {ref: frozenset(controllers) for ref, controllers in found.items()}


@dataclass
class HopFeed(WorkerFeed):
    """One connection's informers of the owner hops of its configured kinds, feeding the
    capacity feed's tracker (a hop that comes or goes changes whose pods are whose)."""

    label: ClassVar[str] = "hops"

    tracker: CapacityTracker  # the capacity feed's
    by_ref: dict[Resource, Informer] = field(default_factory=dict)
    # The refusals already told, as (informer, reason).
    told: set[tuple[str, str]] = field(default_factory=set)

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        opened: list[tuple[Informer, Apply]] = []
        for ref, controllers in hop_controllers(wiring.kinds).items():
            informer = Informer(
                wiring.client, ref, transform=functools.partial(slim_hop, controllers=controllers),
                options=wiring.options,
            )  # fmt: skip
            self.by_ref[ref] = informer
            opened.append((informer, functools.partial(self._apply, ref)))
        return opened

    def informers(self) -> Sequence[Informer | None]:
        return tuple(self.by_ref.values())

    def _apply(self, ref: Resource, event: InformerEvent) -> bool:
        # Keyed by resource too: a RayCluster and a Job may share a name.
        return self.tracker.set_hop(f"{ref.plural}.{ref.group}/{event.key}", event.new)

    def tell_refusals(self) -> None:
        """Log each hop resource it may not list or cannot find, once per reason."""
        for refusal in self.refusals():
            told = (refusal.informer.name, refusal.reason)
            if told in self.told:
                continue
            self.told.add(told)
            _log.warning(
                "worker %s: cannot list %s (%s: %s): the pods its objects make are counted "
                "only where they name a mirror itself (grant list/watch to count them)",
                self.name, refusal.informer.name, refusal.reason, refusal.message,
                extra={"cluster": self.name},
            )  # fmt: skip
