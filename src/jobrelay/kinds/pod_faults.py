"""Why a pod cannot run on its worker when the fault is the worker's, not the workload's.

A worker-side fault is one another worker would not have: its image cannot be pulled
there, its containers cannot be set up there (``CreateContainerConfigError``), or the
worker took the pod away (an eviction, a ``DisruptionTarget``: a lost node, a drain, a
preemption by the worker's scheduler). A container that ran and exited non-zero, or a
deadline, is the workload's own failure: it stays where it is. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FAULT_TEXT_LIMIT", "WAITING_FAULTS", "worker_fault"]

# A container waiting for one of these will not start on this worker as things are.
WAITING_FAULTS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
    }
)
# Workers write these messages: bounded before jobrelay keeps or repeats them.
FAULT_TEXT_LIMIT = 200


def _bounded(text: object) -> str:
    return " ".join(str(text or "").split())[:FAULT_TEXT_LIMIT]


def _waiting_fault(status: Mapping[str, Any]) -> str | None:
    for field in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(field) or ():
            if not isinstance(container, Mapping):
                continue
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason") if isinstance(waiting, Mapping) else None
            if reason in WAITING_FAULTS:
                name = _bounded(container.get("name"))
                message = _bounded(waiting.get("message"))
                detail = f": {message}" if message else ""
                return f"{reason} (container {name}){detail}"
    return None


def _disrupted(status: Mapping[str, Any]) -> str | None:
    """The worker is taking the pod away (the condition comes before the pod ends), or
    has evicted it."""
    for condition in status.get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "DisruptionTarget"
            and condition.get("status") == "True"
        ):
            reason = _bounded(condition.get("reason")) or "DisruptionTarget"
            message = _bounded(condition.get("message"))
            return f"{reason}: {message}" if message else reason
    if status.get("phase") == "Failed" and status.get("reason") == "Evicted":
        message = _bounded(status.get("message"))
        return f"Evicted: {message}" if message else "Evicted"
    return None


def worker_fault(pod: Mapping[str, Any]) -> str | None:
    """Why ``pod`` cannot run where it is for a cause of its worker's (a bounded line
    starting with the reason), or None: it runs, waits for its turn, or failed by itself."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return None
    return _disrupted(status) or _waiting_fault(status)
