"""jobrelay's ProvisioningRequests on an autoscaled worker (issue 37, part 1): each one
slimmed to what a decision reads (its name, the workload it is for, its class, its
PodTemplates, its conditions), by the workload's key.

One informer, cluster-wide, of the requests labelled ``jobrelay.dev/provisioning-for``
(the workload's UID; its key is in the annotation ``jobrelay.dev/provisioning-workload``).
Only on a worker whose WorkerCluster has ``spec.autoscaling`` (the pool reconnects one
whose block comes or goes): elsewhere the CRD need not exist, and nothing is watched. What an answer means is the decision's
(controller/relay/steps/provisioning.py), not this feed's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from jobrelay.fleet.workers.feed_base import Apply, FeedWiring, WorkerFeed
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.provisioning_api import (
    PROVISIONING_FOR_LABEL,
    PROVISIONING_REQUESTS,
    PROVISIONING_WORKLOAD_ANNOTATION,
)

__all__ = ["ProvisioningFeed", "slim_request"]


def slim_request(obj: dict[str, Any]) -> dict[str, Any]:
    """A request as the feed keeps it."""
    meta = Meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    spec = spec if isinstance(spec, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    return {
        "metadata": {
            "namespace": meta.namespace,
            "name": meta.name,
            "uid": meta.uid,
            "labels": {PROVISIONING_FOR_LABEL: meta.labels.get(PROVISIONING_FOR_LABEL, "")},
            "annotations": {
                PROVISIONING_WORKLOAD_ANNOTATION: meta.annotations.get(
                    PROVISIONING_WORKLOAD_ANNOTATION, ""
                )
            },
            **({"deletionTimestamp": True} if meta.raw.get("deletionTimestamp") else {}),
        },
        "spec": {
            "provisioningClassName": spec.get("provisioningClassName", ""),
            "podSets": [
                {"podTemplateRef": dict(p.get("podTemplateRef") or {})}
                for p in spec.get("podSets") or []
                if isinstance(p, Mapping)
            ],
        },
        "status": {"conditions": list(status.get("conditions") or [])},
    }


@dataclass
class ProvisioningFeed(WorkerFeed):
    """One autoscaled worker's jobrelay ProvisioningRequests, by workload key."""

    label: ClassVar[str] = "provisioning"

    # Whether the worker is autoscaled (its WorkerCluster's spec.autoscaling, when it
    # connected): only then is anything watched.
    enabled: bool = False
    informer: Informer | None = None
    # By workload key, by "namespace/name" of the request: the slim request.
    requests: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # The workload key of each request, by "namespace/name".
    _keys: dict[str, str] = field(default_factory=dict)

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        if not self.enabled:
            return []
        self.informer = Informer(
            wiring.client, PROVISIONING_REQUESTS, label_selector=PROVISIONING_FOR_LABEL,
            transform=slim_request, options=wiring.options,
        )  # fmt: skip
        return [(self.informer, self._apply)]

    def informers(self) -> Sequence[Informer | None]:
        return (self.informer,) if self.enabled else ()

    def _apply(self, event: InformerEvent) -> bool:
        before = self._keys.pop(event.key, None)
        if before is not None:
            there = self.requests.get(before, {})
            there.pop(event.key, None)
            if not there:
                self.requests.pop(before, None)
        if event.new is not None:
            workload = str(Meta(event.new).annotations.get(PROVISIONING_WORKLOAD_ANNOTATION) or "")
            self._keys[event.key] = workload
            self.requests.setdefault(workload, {})[event.key] = event.new
        return True

    def of(self, workload_key: str) -> list[dict[str, Any]]:
        """The requests made for the workload of this key (its kind, namespace and name)."""
        return list(self.requests.get(workload_key, {}).values())

    @property
    def open_requests(self) -> int:
        """How many of jobrelay's requests are on this worker now."""
        return len(self._keys)

    def workload_keys(self) -> list[str]:
        """The keys of every workload a request here is for (for the sweep of leftovers)."""
        return [key for key in self.requests if key]
