"""``spec.autoscaling`` of a WorkerCluster, read from its raw object: the worker runs
cluster-autoscaler with ProvisioningRequests, the class jobrelay's requests take there,
the largest nodes it can add (and how many of each), and how many requests jobrelay may
keep open there at once. The admin sets it; the CRD checks it, and what a hand-made or
older object holds that the CRD would refuse is left out here rather than trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from jobrelay.vocabulary.provisioning_api import BEST_EFFORT_ATOMIC_SCALE_UP
from jobrelay.vocabulary.quantity import Unusable, read_quantity

DEFAULT_MAX_REQUESTS = 10


@dataclass(frozen=True, slots=True)
class AddableNodeShape:
    """Nodes the worker's autoscaler can add: each one's allocatable (quantities as the
    API writes them), and at most ``count`` of them."""

    cpu: str
    memory: str
    gpu: int = 0
    count: int = 1


@dataclass(frozen=True, slots=True)
class WorkerAutoscaling:
    """A worker that grows: jobrelay may claim capacity there with ProvisioningRequests."""

    node_shapes: tuple[AddableNodeShape, ...]
    provisioning_class_name: str = BEST_EFFORT_ATOMIC_SCALE_UP
    max_requests: int = DEFAULT_MAX_REQUESTS

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> WorkerAutoscaling | None:
        """``spec.autoscaling`` of a WorkerCluster's spec; None when absent or when no node
        shape in it is usable."""
        block = (spec or {}).get("autoscaling")
        if not isinstance(block, Mapping):
            return None
        listed = block.get("nodeShapes")
        shapes = tuple(
            shape
            for entry in (listed if isinstance(listed, list) else ())
            if (shape := _node_shape(entry)) is not None
        )
        if not shapes:
            return None
        class_name = block.get("provisioningClassName")
        max_requests = block.get("maxRequests")
        return cls(
            node_shapes=shapes,
            provisioning_class_name=class_name
            if isinstance(class_name, str) and class_name
            else BEST_EFFORT_ATOMIC_SCALE_UP,
            max_requests=max_requests if _is_count(max_requests, low=1) else DEFAULT_MAX_REQUESTS,
        )


def _is_count(value: object, *, low: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _quantity(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    found = read_quantity(text)
    return None if isinstance(found, Unusable) or found <= 0 else text


def _node_shape(entry: object) -> AddableNodeShape | None:
    if not isinstance(entry, Mapping):
        return None
    cpu, memory = _quantity(entry.get("cpu")), _quantity(entry.get("memory"))
    gpu, count = entry.get("gpu", 0), entry.get("count", 1)
    if cpu is None or memory is None or not _is_count(gpu, low=0) or not _is_count(count, low=1):
        return None
    return AddableNodeShape(cpu=cpu, memory=memory, gpu=gpu, count=count)
