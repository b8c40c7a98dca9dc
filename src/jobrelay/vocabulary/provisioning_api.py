"""The ProvisioningRequest API of cluster-autoscaler (``autoscaling.x-k8s.io/v1``), as its
CRD and Go types in kubernetes/autoscaler's ``cluster-autoscaler/apis`` define it: where it
is served, its two built-in classes, its condition types, the annotations that let pods
consume provisioned capacity, and reading an object's conditions. Pure: no I/O.

A request names its pods by ``spec.podSets[].podTemplateRef.name`` (a PodTemplate in the
same namespace) and ``count``; its spec is immutable (the CRD says so by CEL rules), so a
changed request is a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.vocabulary.resource import Resource

GROUP = "autoscaling.x-k8s.io"
CRD_NAME = f"provisioningrequests.{GROUP}"
PROVISIONING_REQUESTS = Resource(GROUP, "v1", "provisioningrequests", "ProvisioningRequest")
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate")

# The classes cluster-autoscaler serves itself ("kubernetes.io"-suffixed ones were v1beta1's).
CHECK_CAPACITY = f"check-capacity.{GROUP}"
BEST_EFFORT_ATOMIC_SCALE_UP = f"best-effort-atomic-scale-up.{GROUP}"
CLASSES = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC_SCALE_UP)
# spec.parameters of best-effort-atomic-scale-up: seconds, counted from creation, to retry.
VALID_UNTIL_SECONDS = "ValidUntilSeconds"

# status.conditions types (metav1.Condition: type, status, reason, message, lastTransitionTime).
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"

# On every ProvisioningRequest and PodTemplate jobrelay makes: the workload's UID, and its
# work queue key (``<kind>:<namespace>/<name>``), so that a request is found by its
# workload even once the workload is gone.
PROVISIONING_FOR_LABEL = "jobrelay.dev/provisioning-for"
PROVISIONING_WORKLOAD_ANNOTATION = "jobrelay.dev/provisioning-workload"

# On a pod: the request (in the pod's namespace) whose capacity it consumes, and its class.
CONSUME_ANNOTATION = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
CLASS_ANNOTATION = "cluster-autoscaler.kubernetes.io/provisioning-class-name"


@dataclass(frozen=True, slots=True)
class RequestCondition:
    """One condition of a request as stored (status is "True", "False" or "Unknown")."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


def conditions_of(obj: Mapping[str, Any] | None) -> dict[str, RequestCondition]:
    """A request's conditions by type; malformed entries are skipped."""
    found: dict[str, RequestCondition] = {}
    status = (obj or {}).get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for entry in conditions if isinstance(conditions, list) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("type"), str):
            found[entry["type"]] = RequestCondition(
                type=entry["type"],
                status=str(entry.get("status") or "Unknown"),
                reason=str(entry.get("reason") or ""),
                message=str(entry.get("message") or ""),
            )
    return found


def is_condition_true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    found = conditions_of(obj).get(kind)
    return found is not None and found.status == "True"


def consuming_annotations(request_name: str, class_name: str) -> dict[str, str]:
    """The annotations a pod carries to consume the capacity of ``request_name``."""
    return {CONSUME_ANNOTATION: request_name, CLASS_ANNOTATION: class_name}
