"""Every pod group fits at once, counted per node (see :mod:`jobrelay.placement.nodefit`)."""

from __future__ import annotations

from jobrelay.placement.model import NOT_KNOWN, Cluster, Request


class Fits:
    name = "fit"
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        fit = request.fit(cluster)
        if fit is None:
            return None if cluster.blind else NOT_KNOWN
        return fit.reason
