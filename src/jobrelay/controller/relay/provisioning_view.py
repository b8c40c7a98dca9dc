"""A worker snapshot's fields of capacity that can be provisioned (issue 37, part 1):
the worker's ``spec.autoscaling`` and this workload's ProvisioningRequests there, read
from its provisioning feed (fleet/workers/provisioning_feed.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobrelay.controller.relay.snapshot import ProvisioningRequestSeen
from jobrelay.controller.relay.steps.provisioning import workload_tag
from jobrelay.fleet.workers.definitions import WorkerView
from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.provisioning_api import PROVISIONING_FOR_LABEL


def request_seen(request: Mapping[str, Any]) -> ProvisioningRequestSeen:
    meta = Meta(request)
    spec = request.get("spec") or {}
    templates = tuple(
        str((pod_set.get("podTemplateRef") or {}).get("name") or "")
        for pod_set in spec.get("podSets") or []
    )
    return ProvisioningRequestSeen(
        name=meta.name,
        namespace=meta.namespace,
        workload_uid=str(meta.labels.get(PROVISIONING_FOR_LABEL) or ""),
        class_name=str(spec.get("provisioningClassName") or ""),
        templates=tuple(t for t in templates if t),
        request=dict(request),
        deleting=bool(meta.raw.get("deletionTimestamp")),
    )


def provisioning_fields(view: WorkerView, key: WorkloadKey) -> dict[str, Any]:
    """The fields of the worker's snapshot for ``key`` (none for a worker that does not grow)."""
    worker = view.worker
    if view.autoscaling is None and (worker is None or not worker.provisioning_feed.enabled):
        return {}
    fields: dict[str, Any] = {"autoscaling": view.autoscaling}
    if worker is not None:
        feed = worker.provisioning_feed
        seen = feed.of(workload_tag(key.kind, key.key))
        if seen:
            fields["provisioning"] = tuple(request_seen(r) for r in seen)
        fields["open_requests"] = feed.open_requests
    return fields
