"""One pass over the workloads waiting unplaced, when capacity changes: which of them
would be placed now.

Oldest first, and each takes its room before the next is judged, so freeing room for
one workload wakes that one, not all ten thousand that wait.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Sequence

from jobrelay.placement.capacity import Reservation
from jobrelay.placement.decision import place
from jobrelay.placement.model import Cluster
from jobrelay.placement.nodefit import Fit
from jobrelay.placement.workload import Choice, Workload


def placeable(
    held: Iterable[tuple[Hashable, Workload, Choice]], clusters: Sequence[Cluster]
) -> list[Hashable]:
    """The keys of ``held`` (oldest first) that a placement would place now."""
    current = {c.name: c for c in clusters}
    chosen: list[Hashable] = []
    # Room only shrinks during the pass: what did not fit a cluster will not.
    misfits: dict[tuple[str, str], Fit] = {}
    # Workloads (pods, choice and policy) no cluster took: one like them will not either.
    hopeless: set[str] = set()
    for key, workload, policy in held:
        alike = repr((workload, policy))
        if alike in hopeless:
            continue
        decision = place(
            current.values(), workload, policy, misfits=misfits, judge_never_fits=False
        )
        if decision.cluster is None:
            hopeless.add(alike)
            continue
        chosen.append(key)
        cluster = current[decision.cluster]
        if cluster.capacity is not None:
            taken = Reservation(str(key), workload.groups)
            current[cluster.name] = dataclasses.replace(
                cluster,
                capacity=cluster.capacity.with_reservation(taken),
            )
    return chosen
