"""The namespace's policy: the clusters an admin lets the namespace use (a Job narrows it,
never widens it: both this filter and the Job's must pass)."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request

EXCLUDED = "excluded by namespace policy"


class NamespacePolicy:
    name = "namespace-policy"
    permanent = True

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        return None if request.policy.allows(cluster.name, cluster.labels) else EXCLUDED
