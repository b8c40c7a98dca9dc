"""The Job's own choice of clusters (``jobrelay.dev/clusters``, ``jobrelay.dev/cluster-selector``)."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request
from jobrelay.vocabulary.names import CLUSTER_SELECTOR_ANNOTATION, CLUSTERS_ANNOTATION


class JobClusters:
    name = "job-clusters"
    permanent = True

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        allowed = request.workload.choice.clusters
        if allowed is None or cluster.name in allowed:
            return None
        return f"not in the Job's {CLUSTERS_ANNOTATION} ({','.join(allowed)})"


class JobSelector:
    name = "job-selector"
    permanent = True

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        selector = request.workload.choice.selector
        if selector is None or selector.matches(cluster.labels):
            return None
        return f"labels do not match the Job's {CLUSTER_SELECTOR_ANNOTATION} ({selector})"
