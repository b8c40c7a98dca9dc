"""Every pod group fits at once, counted per node (see :mod:`jobrelay.placement.nodefit`)."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.not_known import NotKnownYet


class Fits:
    name = "fit"
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | NotKnownYet | None:
        fit = request.fit(cluster)
        if fit is None:
            return None if cluster.blind else NotKnownYet.CAPACITY
        return fit.reason
