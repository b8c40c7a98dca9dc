"""The workload's namespace on the cluster must be open to this manager (see
:mod:`jobrelay.placement.namespaces`): never a tenant's or the worker's own."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.not_known import NotKnownYet


class WorkerNamespace:
    name = "worker-namespace"
    # An admin's label (or namespace) changes it: the cluster still counts when asking
    # whether the workload could ever fit.
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | NotKnownYet | None:
        namespace = request.workload.namespace
        if cluster.namespaces is None or not namespace:
            return None  # not judged (a bare placement, as in benchmarks)
        return cluster.namespaces.refusal(namespace)
