"""``spread`` and ``pack``: how allocated a cluster would be once the workload is on it.

Allocation is the mean, over CPU, memory and every other resource the workload asks
for, of (requested + reserved + the workload) / allocatable on the schedulable nodes,
the cluster-level analogue of kube-scheduler's LeastAllocated and MostAllocated.
"""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.units import CPU, MEMORY, PODS
from jobrelay.placement.workload import Strategy


def allocation_after(request: Request, cluster: Cluster) -> float:
    if cluster.capacity is None:
        return 1.0
    allocatable, used = cluster.capacity.usable_totals
    demand = request.workload.demand
    shares = [
        (used.get(resource, 0) + demand.get(resource, 0)) / allocatable[resource]
        for resource in sorted({CPU, MEMORY} | demand.keys() - {PODS})
        if allocatable.get(resource, 0) > 0
    ]
    return sum(shares) / len(shares) if shares else 1.0


class LeastAllocated:
    name = Strategy.SPREAD

    def score(self, request: Request, cluster: Cluster) -> float:
        return -allocation_after(request, cluster)


class MostAllocated:
    name = Strategy.PACK

    def score(self, request: Request, cluster: Cluster) -> float:
        return allocation_after(request, cluster)
