"""A worker holding, under a name the workload's pods need, a ConfigMap, Secret or
ServiceAccount that jobrelay did not make: jobrelay never overwrites it, so the
workload cannot run there (its pods would read someone else's data)."""

from __future__ import annotations

from jobrelay.placement.model import Cluster, Request


class ForeignDependencies:
    name = "dependencies"
    # Its owner may delete it, or jobrelay looks again after a while.
    permanent = False

    def reject(self, request: Request, cluster: Cluster) -> str | None:
        held = cluster.foreign_dependencies
        if not held:
            return None
        where = f" in {request.workload.namespace}" if request.workload.namespace else ""
        verb = "was" if len(held) == 1 else "were"
        return f"{', '.join(held)}{where} {verb} not made by jobrelay"
