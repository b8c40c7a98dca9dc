"""A worker's copies of workloads' ConfigMaps, Secrets and ServiceAccounts.

One informer per kind, label-selected to the copies this controller and origin made
(kinds/dependency_copies.py), slimmed to their metadata: owners, our marks, the
digest of what was copied (never a Secret's data). The reconciler reads which
copies of a workload's dependencies are there and current; a change of one tells
the runner, which looks again at the workloads that reference it (a copy deleted
behind jobrelay's back is made again); the orphan sweep reads every copy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from jobrelay.kinds.dependency_copies import RESOURCES, slim_copy
from jobrelay.kinds.references import DependencyKind
from jobrelay.kinds.types import JsonObj
from jobrelay.kube.client import ApiClient
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions

__all__ = ["CopyChanged", "DependencyFeed"]

# Told (kind, "namespace/name") of every change of a copy.
CopyChanged = Callable[[DependencyKind, str], None]


@dataclass
class DependencyFeed:
    """One connection's informers of our copies there."""

    name: str  # the worker's
    informers: dict[DependencyKind, Informer] = field(default_factory=dict)

    def start(
        self,
        client: ApiClient,
        selector: str,
        options: InformerOptions,
        *,
        changed: CopyChanged | None = None,
    ) -> None:
        for kind, ref in RESOURCES.items():
            informer = Informer(
                client, ref, label_selector=selector, transform=slim_copy, options=options
            )
            if changed is not None:
                informer.add_handler(functools.partial(_tell, changed, kind))
            self.informers[kind] = informer
            informer.start()

    def copy(self, kind: DependencyKind, namespace: str, name: str) -> JsonObj | None:
        """Our copy of that name there, as cached (None: none, or not listed yet)."""
        informer = self.informers.get(kind)
        return informer.get(f"{namespace}/{name}") if informer is not None else None

    def copies(self) -> Iterator[tuple[DependencyKind, JsonObj]]:
        """Every copy cached here (for the orphan sweep)."""
        for kind, informer in self.informers.items():
            if not informer.has_synced:
                continue
            for key in list(informer.keys()):
                obj = informer.get(key)
                if obj is not None:
                    yield kind, obj

    async def stop(self) -> None:
        for informer in self.informers.values():
            await informer.stop()


def _tell(changed: CopyChanged, kind: DependencyKind, event: InformerEvent) -> None:
    changed(kind, event.key)
