"""A worker's copies of workloads' ConfigMaps, Secrets and ServiceAccounts.

One informer per kind, label-selected to the copies this controller and origin made
(dependencies/copy_rules.py), slimmed to their metadata: owners, our marks, the
digest of what was copied (never a Secret's data). The reconciler reads which
copies of a workload's dependencies are there and current; a change of one tells
the runner, which looks again at the workloads that reference it (a copy deleted
behind jobrelay's back is made again); the orphan sweep reads every copy.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from jobrelay.dependencies.copy_rules import RESOURCES, slim_copy
from jobrelay.dependencies.template_references import DependencyKind
from jobrelay.fleet.workers.feed_base import Apply, CopyChanged, FeedWiring, WorkerFeed
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.vocabulary.json_types import JsonObj

__all__ = ["CopyChanged", "DependencyFeed"]


@dataclass
class DependencyFeed(WorkerFeed):
    """One connection's informers of our copies there; each change is told
    (``FeedWiring.copy_changed``), never placement's news."""

    label: ClassVar[str] = "copies"

    by_kind: dict[DependencyKind, Informer] = field(default_factory=dict)

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        opened: list[tuple[Informer, Apply]] = []
        for kind, ref in RESOURCES.items():
            informer = Informer(
                wiring.client, ref, label_selector=wiring.copy_selector, transform=slim_copy,
                options=wiring.options,
            )  # fmt: skip
            self.by_kind[kind] = informer
            opened.append((informer, functools.partial(_tell, wiring.copy_changed, kind)))
        return opened

    def informers(self) -> Sequence[Informer | None]:
        return tuple(self.by_kind.values())

    def _listed(self, wiring: FeedWiring) -> None:
        """Nothing to tell: each copy was told as it came."""

    def copy(self, kind: DependencyKind, namespace: str, name: str) -> JsonObj | None:
        """Our copy of that name there, as cached (None: none, or not listed yet)."""
        informer = self.by_kind.get(kind)
        return informer.get(f"{namespace}/{name}") if informer is not None else None

    def copies(self) -> Iterator[tuple[DependencyKind, JsonObj]]:
        """Every copy cached here (for the orphan sweep)."""
        for kind, informer in self.by_kind.items():
            if not informer.has_synced:
                continue
            for key in list(informer.keys()):
                obj = informer.get(key)
                if obj is not None:
                    yield kind, obj


def _tell(changed: CopyChanged | None, kind: DependencyKind, event: InformerEvent) -> bool:
    if changed is not None:
        changed(kind, event.key)
    return False  # never placement's news
