"""One pass over the workloads waiting unplaced, when capacity changes: which of them
would be placed now.

Oldest first, and each takes its room before the next is judged, so freeing room for
one workload wakes that one, not all ten thousand that wait. :class:`Room` is that
check on its own, for a pass that chooses its own order (fleet-wide queues' admission).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Sequence

from jobrelay.placement.capacity import Reservation
from jobrelay.placement.decision import place
from jobrelay.placement.model import Cluster
from jobrelay.placement.nodefit import Fit
from jobrelay.placement.workload import Choice, Workload


class Room:
    """The clusters' room during one pass: each workload that fits takes its room
    before the next is judged."""

    def __init__(self, clusters: Sequence[Cluster]) -> None:
        self._current = {c.name: c for c in clusters}
        # Room only shrinks during the pass: what did not fit a cluster will not.
        self._misfits: dict[tuple[str, str], Fit] = {}
        # Workloads (pods, choice and policy) no cluster took: one like them will not either.
        self._hopeless: set[tuple[str, Choice]] = set()

    def take(self, key: Hashable, workload: Workload, policy: Choice) -> bool:
        """Whether a placement would place ``workload`` now; if so, its room is taken."""
        alike = (workload.likeness, policy)
        if alike in self._hopeless:
            return False
        decision = place(
            self._current.values(),
            workload,
            policy,
            misfits=self._misfits,
            judge_never_fits=False,
        )
        if decision.cluster is None:
            self._hopeless.add(alike)
            return False
        cluster = self._current[decision.cluster]
        if cluster.capacity is not None:
            taken = Reservation(str(key), workload.groups)
            self._current[cluster.name] = dataclasses.replace(
                cluster, capacity=cluster.capacity.with_reservation(taken)
            )
        return True

    def free(self) -> dict[str, dict[str, int]]:
        """Each cluster's room now, by resource (allocatable over its schedulable nodes
        less what is requested and reserved, this pass's takings included); clusters
        whose capacity is not known are left out."""
        found = {}
        for cluster in self._current.values():
            if cluster.capacity is not None:
                allocatable, used = cluster.capacity.usable_totals
                found[cluster.name] = {r: v - used.get(r, 0) for r, v in allocatable.items()}
        return found

    def could_take(self, workload: Workload, policy: Choice) -> list[str]:
        """The clusters a placement would give ``workload`` were they empty: where making
        room for it can help."""
        return [
            cluster.name
            for cluster in self._current.values()
            if cluster.capacity is not None
            and place(
                [dataclasses.replace(cluster, capacity=cluster.capacity.empty)],
                workload,
                policy,
                judge_never_fits=False,
            ).cluster
            == cluster.name
        ]


def placeable(
    held: Iterable[tuple[Hashable, Workload, Choice]], clusters: Sequence[Cluster]
) -> list[Hashable]:
    """The keys of ``held`` (oldest first) that a placement would place now."""
    room = Room(clusters)
    return [key for key, workload, policy in held if room.take(key, workload, policy)]
