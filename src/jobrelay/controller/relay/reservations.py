"""Placements a worker has not caught up with (the memory's ``reservations``).

Until its mirror is visible, a placement counts in its worker's load; until the
worker has bound its pods, its demand takes room in the worker's capacity. The
reservation pass (:class:`ReservationPass`, run by the memory) looks at what each
still reserves.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Protocol

from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.capacity import Reservation
from jobrelay.placement.tracker import OwnedPods
from jobrelay.placement.workload import PodGroup

__all__ = [
    "RESERVATION_MAX_AGE",
    "ReservationPass",
    "Reservations",
    "Reserved",
    "WorkerPods",
    "without_bound",
]

# A placement whose pods a worker has not bound after this long takes no room: they
# are Pending there (the pending timeout's business), not on their way.
RESERVATION_MAX_AGE = 120.0


@dataclass
class Reserved:
    """One placement: where, the pods it will ask for, and whether its mirror is visible."""

    cluster: str
    demand: tuple[PodGroup, ...]
    since: float
    mirror_visible: bool = False


@dataclass(frozen=True)
class ReservationPass:
    """One look at a worker's reservations: at which (reservations' version, pod
    bindings' version, second), what each still reserves, and which reserve nothing any
    more (the pruning step releases those)."""

    stamp: tuple[int, int, int]
    reserved: tuple[Reservation, ...]
    spent: tuple[WorkloadKey, ...]
    # Each reservation as looked at (the entry, whether its mirror was visible, what it
    # still reserved): the next look within the second takes what has not changed.
    looks: Mapping[WorkloadKey, tuple[Reserved, bool, tuple[PodGroup, ...] | None]]


class Reservations:
    """Placements the worker has not caught up with. Until its mirror is visible, a
    placement counts in its worker's load; until the worker has made its pods, its
    demand takes room in the worker's capacity. So a burst of placements spreads out
    and never over-commits a cluster in jobrelay's own model."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: dict[Hashable, Reserved] = {}
        # The same entries by cluster, and per cluster: how many mirrors are not yet
        # visible, and a version that changes with any entry (snapshots cache by it).
        self._on: dict[str, dict[Hashable, Reserved]] = {}
        self._unseen: Counter[str] = Counter()
        self._versions: Counter[str] = Counter()
        self._clock = clock

    def reserve(self, cluster: str, key: Hashable, demand: tuple[PodGroup, ...] = ()) -> None:
        self.release(key)
        entry = Reserved(cluster, demand, self._clock())
        self._entries[key] = entry
        self._on.setdefault(cluster, {})[key] = entry
        self._unseen[cluster] += 1
        self._versions[cluster] += 1

    def release(self, key: Hashable) -> None:
        """Its placement did not happen, or the workload needs nothing any more."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        del self._on[entry.cluster][key]
        if not entry.mirror_visible:
            self._unseen[entry.cluster] -= 1
        self._versions[entry.cluster] += 1

    def mirror_visible(self, key: Hashable) -> None:
        """Its mirror is in the worker's cache: it counts there now; its pods may not yet."""
        entry = self._entries.get(key)
        if entry is None or entry.mirror_visible:
            return
        if not entry.demand:
            self.release(key)
            return
        entry.mirror_visible = True
        self._unseen[entry.cluster] -= 1
        self._versions[entry.cluster] += 1

    def cluster_of(self, key: Hashable) -> str | None:
        """Where ``key`` was placed by this process, while its placement is reserved."""
        entry = self._entries.get(key)
        return None if entry is None else entry.cluster

    def count(self, cluster: str) -> int:
        """Placements on ``cluster`` whose mirror is not visible yet."""
        return self._unseen[cluster]

    def on(self, cluster: str) -> list[tuple[Hashable, Reserved]]:
        """The reservations with demand on ``cluster``."""
        return [(k, e) for k, e in self._on.get(cluster, {}).items() if e.demand]

    def version(self, cluster: str) -> int:
        """Changes whenever a reservation on ``cluster`` does."""
        return self._versions[cluster]

    def age(self, entry: Reserved) -> float:
        return self._clock() - entry.since


class WorkerPods(Protocol):
    """What the memory reads of a worker (fleet.workers.Worker): its name, its
    unfinished mirrors and the pods they made."""

    name: str
    unfinished: set[WorkloadKey]

    # Moves whenever which of its pods are bound, or whose they are, changes.
    @property
    def bindings_version(self) -> int: ...

    def pods_of(self, namespace: str, name: str) -> OwnedPods | None: ...

    def rebound_since(self, version: int) -> set[tuple[str, str]] | None:
        """The (namespace, name) of the workloads whose pod bindings moved after
        ``version`` (None: too long ago to say)."""


def without_bound(groups: tuple[PodGroup, ...], pods: int) -> tuple[PodGroup, ...]:
    """``groups`` without their first ``pods`` pods (those the worker has bound)."""
    left = []
    for group in groups:
        taken = min(group.count, pods)
        pods -= taken
        if group.count > taken:
            left.append(dataclasses.replace(group, count=group.count - taken))
    return tuple(left)
