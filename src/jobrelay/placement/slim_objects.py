"""The slim objects a worker's informers cache: only what placement reads of Nodes,
Pods and owner hops, strings interned and equal requests shared (a worker's 10,000
pods of one Job share one requests tuple). The tracker (:mod:`.tracker`) counts them.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import Any

from jobrelay.kinds.mirror_pods import OWNER_LABELS, pod_owners
from jobrelay.kinds.pod_faults import worker_fault
from jobrelay.kinds.pod_ownership import controller_refs
from jobrelay.kinds.pods import pod_requests
from jobrelay.placement.units import PODS, resources_of
from jobrelay.vocabulary.meta import Meta

__all__ = [
    "POD_FIELD_SELECTOR",
    "SLIM_OWNERS",
    "UNUSABLE_QUANTITY",
    "WORKER_FAULT",
    "effective_requests",
    "slim_hop",
    "slim_node",
    "slim_pod",
]

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
_FINISHED = frozenset({"Succeeded", "Failed"})
# In a slim pod: why its requests could not be read (it then counts as no requests).
UNUSABLE_QUANTITY = "unusableQuantity"
# In a slim pod: why it cannot run on its worker for a worker-side cause (kinds/pod_faults.py).
WORKER_FAULT = "workerFault"
# The slim pod's owners, (name, UID) sorted, found once when it is slimmed: the tracker
# reads them on every event of the pod (what it counts, and for whom).
SLIM_OWNERS = "owners"

# A pod's requests as sorted (resource, units) pairs, shared by every pod asking the
# same (the pods of one Job all do); bounded so that odd workloads cannot grow it forever.
Requests = tuple[tuple[str, int], ...]
_shared_requests: dict[Requests, Requests] = {}
_SHARED_REQUESTS_MAX = 65536


def _share(requests: Requests) -> Requests:
    shared = _shared_requests.get(requests)
    if shared is None:
        if len(_shared_requests) >= _SHARED_REQUESTS_MAX:
            _shared_requests.clear()
        shared = _shared_requests[requests] = requests
    return shared


def _intern(value: Any) -> str:
    return sys.intern(str(value)) if value else ""


def slim_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Node with only what :func:`~jobrelay.placement.capacity.node_of` reads
    (allocatable, labels, taints, unschedulable, the Ready condition)."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = [
        {"type": "Ready", "status": _intern(c.get("status"))}
        for c in status.get("conditions") or []
        if c.get("type") == "Ready"
    ]
    return {
        "metadata": {
            "name": metadata.get("name", ""),
            "resourceVersion": metadata.get("resourceVersion", ""),
            "labels": {_intern(k): _intern(v) for k, v in (metadata.get("labels") or {}).items()},
        },
        "spec": {
            "taints": spec.get("taints") or [],
            "unschedulable": bool(spec.get("unschedulable")),
        },
        "status": {"allocatable": status.get("allocatable") or {}, "conditions": ready},
    }


def effective_requests(pod_spec: Mapping[str, Any]) -> Requests:
    """What one pod takes on its node, in placement units, with ``pods: 1``: containers,
    init containers by the Kubernetes rule, pod-level resources where set, overhead.
    An unusable quantity counts as nothing (see :func:`_effective`)."""
    return _effective(pod_spec)[0]


def _effective(pod_spec: Mapping[str, Any]) -> tuple[Requests, str | None]:
    """:func:`effective_requests`, and why a quantity was unusable (then the pod counts as
    ``pods: 1`` only: a worker's odd pod must not stop the count of the others)."""
    spec = dict(pod_spec)
    unusable = None
    try:
        requests = resources_of(pod_requests(spec))
        pod_level = (spec.get("resources") or {}).get("requests") or {}
        if pod_level:
            # Pod-level resources (KEP-2837) replace the containers' sum where set.
            overhead = resources_of(spec.get("overhead") or {})
            for resource, quantity in resources_of(pod_level).items():
                requests[resource] = quantity + overhead.get(resource, 0)
    except (ValueError, TypeError, AttributeError) as error:
        requests, unusable = {}, str(error)[:300]
    requests[PODS] = 1
    return _share(tuple(sorted((_intern(r), q) for r, q in requests.items() if q))), unusable


def slim_pod(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """A Pod with only what the tracker reads, or None for a finished one (it holds
    nothing: the informer then drops it as if deleted).

    Keeps ``metadata`` (name, namespace, resourceVersion, the owner labels),
    ``nodeName``, ``phase``, ``requests`` (:func:`effective_requests`) and
    ``unschedulableSince`` (when PodScheduled turned False with reason Unschedulable)
    and ``workerFault`` (why it cannot run there for its worker's fault, bounded).
    """
    metadata = Meta(obj).raw
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = status.get("phase") or ""
    if phase in _FINISHED:
        return None
    owners = {
        _intern(name): _intern(uid) for name, uid in _owner_labels(metadata.get("labels")).items()
    }
    controllers = [
        {"name": _intern(name), "uid": _intern(uid), "controller": True}
        for name, uid in controller_refs(obj)
    ]
    since = next(
        (
            str(c.get("lastTransitionTime") or "")
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ),
        None,
    )
    requests, unusable = _effective(spec)
    slim: dict[str, Any] = {
        "metadata": {
            "name": Meta(obj).name,
            "namespace": _intern(Meta(obj).namespace),
            "uid": Meta(obj).uid,
            "resourceVersion": metadata.get("resourceVersion", ""),
        },
        "nodeName": _intern(spec.get("nodeName")),
        "phase": _intern(phase),
        "requests": requests,
    }
    if unusable is not None:
        slim[UNUSABLE_QUANTITY] = unusable
    if owners:
        slim["metadata"]["labels"] = owners
    if controllers:
        slim["metadata"]["ownerReferences"] = controllers
    if since is not None:
        slim["unschedulableSince"] = since
    fault = worker_fault(obj)
    if fault is not None:
        slim[WORKER_FAULT] = fault
    slim[SLIM_OWNERS] = tuple(sorted(pod_owners(slim)))
    return slim


def slim_hop(
    obj: Mapping[str, Any], controllers: Collection[tuple[str, str]]
) -> dict[str, Any] | None:
    """An object that makes a mirror's pods (an owner hop), with only its identity and its
    controller reference; None unless one of ``controllers`` (API group, kind) controls
    it: the hop informer then leaves it out (a worker's other Jobs are none of ours)."""
    meta = Meta(obj)
    if not meta.name or not meta.uid:
        return None
    for ref in meta.owner_references:
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        name, uid = ref.get("name"), ref.get("uid")
        if (
            ref.get("controller") is True
            and (group, ref.get("kind")) in controllers
            and isinstance(name, str)
            and isinstance(uid, str)
            and name
            and uid
        ):
            owner = {"name": _intern(name), "uid": _intern(uid), "controller": True}
            return {
                "metadata": {
                    "name": _intern(meta.name),
                    "namespace": _intern(meta.namespace),
                    "uid": _intern(meta.uid),
                    "resourceVersion": meta.resource_version,
                    "ownerReferences": [owner],
                }
            }
    return None


def _owner_labels(labels: Any) -> dict[str, str]:
    """The owner labels among ``labels`` that hold a text (a worker may send anything)."""
    if not isinstance(labels, Mapping):
        return {}
    return {k: v for k in OWNER_LABELS if isinstance(v := labels.get(k), str) and v}
