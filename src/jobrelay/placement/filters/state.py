"""A cluster jobrelay cannot reach, or that its admin is emptying, takes nothing new."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request


class NotExcluded:
    name = "excluded"
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        return request.excluded.get(cluster.name)


class Connected:
    name = "connected"
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        del request
        if cluster.lost:
            return "lost"
        return None if cluster.connected else "not connected"


class NotCordoned:
    name = "not-cordoned"
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        del request
        if cluster.draining:
            return "draining"
        return "cordoned" if cluster.cordoned else None
