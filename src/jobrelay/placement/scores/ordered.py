"""``ordered``: the first cluster of the allow-list that fits (spill-over from the
first to the next only while it is full); clusters not listed come after, by name."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.workload import Strategy


class Ordered:
    name = Strategy.ORDERED

    def score(self, request: Request, cluster: Cluster) -> float:
        order = request.order
        return -float(order.index(cluster.name) if cluster.name in order else len(order))
