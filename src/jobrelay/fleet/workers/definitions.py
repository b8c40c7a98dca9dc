"""Where the pool's workers come from: WorkerCluster objects, and selected ClusterProfiles.

The pool sees one set of registrations by name, read as it reads a WorkerCluster (a name,
labels, a spec, a status): every WorkerCluster, and with ``--cluster-profiles`` every selected
ClusterProfile (fleet/cluster_profiles.py) whose name no WorkerCluster has. A name in both is
the WorkerCluster's: it keeps working with a ``ClusterProfileConflict`` condition, and the
profile is refused (a Warning Event on it); neither replaces the other silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.fleet.cluster_profile_rules import ClusterProfileSettings, name_conflict_condition
from jobrelay.fleet.cluster_profiles import ClusterProfileSource
from jobrelay.fleet.workers.record import Worker
from jobrelay.kube.client import ApiClient
from jobrelay.kube.events import EventRecorder
from jobrelay.kube.resources import WORKER_CLUSTERS
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions
from jobrelay.vocabulary.autoscaling_spec import WorkerAutoscaling
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.workercluster import DrainMode

__all__ = ["WorkerDefinitions", "WorkerView"]


@dataclass(frozen=True)
class WorkerView:
    """One registered worker as a reconcile needs it, connected or not."""

    name: str
    worker: Worker | None  # None: no connection could be made from its kubeconfig
    cordoned: bool
    drain: DrainMode | None
    labels: Mapping[str, str]
    # None while connected; else seconds until it is declared lost (<= 0: it is).
    lost_in: float | None
    autoscaling: WorkerAutoscaling | None = None  # spec.autoscaling: nodes it can add

    @property
    def connected(self) -> bool:
        return self.lost_in is None

    @property
    def lost(self) -> bool:
        return self.lost_in is not None and self.lost_in <= 0


class WorkerDefinitions:
    """Every worker's registration, by name, from both sources (read-only but for handlers)."""

    def __init__(
        self,
        manager: ApiClient,
        informer: InformerOptions,
        profiles: ClusterProfileSource | None = None,
    ) -> None:
        self.clusters = Informer(manager, WORKER_CLUSTERS, options=informer)
        self.profiles = profiles

    @classmethod
    def of(
        cls,
        manager: ApiClient,
        informer: InformerOptions,
        settings: ClusterProfileSettings | None,
        events: EventRecorder | None,
    ) -> WorkerDefinitions:
        """WorkerClusters, and the profiles of ``settings`` (None: none)."""
        profiles = (
            ClusterProfileSource(manager, settings, informer=informer, events=events)
            if settings is not None
            else None
        )
        return cls(manager, informer, profiles)

    # -- reading ---------------------------------------------------------------------

    def get(self, name: str) -> Mapping[str, Any] | None:
        registration = self.clusters.get(name)
        if registration is None and self.profiles is not None:
            return self.profiles.registration(name)
        return registration

    def keys(self) -> list[str]:
        names = self.clusters.keys()
        if self.profiles is not None:
            taken = set(names)
            names += [name for name in self.profiles.names() if name not in taken]
        return names

    def values(self) -> list[dict[str, Any]]:
        """Every registration: the WorkerClusters as the manager holds them, then the
        profiles' (their status what jobrelay keeps of them)."""
        values = self.clusters.values()
        if self.profiles is not None:
            taken = set(self.clusters.keys())
            for name in self.profiles.names():
                registration = self.profiles.registration(name)
                if name not in taken and registration is not None:
                    values.append(registration)
        return values

    def conflict(self, name: str) -> dict[str, str] | None:
        """The WorkerCluster ``name``'s conflict condition, while a selected profile has it."""
        profiles = self.profiles
        if profiles is None or profiles.profile(name) is None or self.clusters.get(name) is None:
            return None
        return name_conflict_condition(profiles.settings.namespace, name)

    def health_problem(self, name: str) -> str | None:
        """What a profile worker's own conditions say is wrong (None: nothing, or no profile)."""
        if self.profiles is None or self.clusters.get(name) is not None:
            return None
        return self.profiles.health_problem(name)

    # -- lifecycle -------------------------------------------------------------------

    def add_handler(self, handler: Callable[[str], None]) -> None:
        """``handler`` gets the name of every worker whose registration may have changed."""

        def cluster_changed(event: InformerEvent) -> None:
            self._follow_conflict(event.key)
            handler(event.key)

        def profile_changed(event: InformerEvent) -> None:
            assert self.profiles is not None
            self.profiles.forget(event)
            name = Meta(event.obj).name
            self._follow_conflict(name)
            handler(name)

        self.clusters.add_handler(cluster_changed)
        if self.profiles is not None:
            self.profiles.informer.add_handler(profile_changed)

    def _follow_conflict(self, name: str) -> None:
        if self.profiles is not None:
            in_both = self.clusters.get(name) is not None and self.profiles.profile(name)
            self.profiles.conflict(name, bool(in_both))

    def start(self) -> None:
        self.clusters.start()
        if self.profiles is not None:
            self.profiles.informer.start()

    async def wait_synced(self) -> None:
        await self.clusters.wait_synced()
        if self.profiles is not None:
            await self.profiles.informer.wait_synced()

    async def stop(self) -> None:
        await self.clusters.stop()
        if self.profiles is not None:
            await self.profiles.informer.stop()
