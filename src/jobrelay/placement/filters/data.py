"""Data decides the place: a workload that mounts PersistentVolumeClaims goes only to a
worker holding each of them, Bound, in its namespace (see :mod:`jobrelay.placement.claims`)."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.not_known import NotKnownYet


class DataLocality:
    name = "data"
    # Data may arrive (a claim created, a volume bound): the cluster still counts when
    # asking whether the workload could ever fit, so the workload waits as NotPlaced,
    # never NeverFits.
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | NotKnownYet | None:
        claims = request.workload.claims
        if not claims or cluster.claims is None:
            return None  # mounts none, or not judged (a bare placement, as in benchmarks)
        return cluster.claims.refusal(request.workload.namespace, claims)
