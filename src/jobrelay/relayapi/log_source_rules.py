"""Which container logs one logs request reads, and each one's line prefix: pure.

A request names pods (``route_rules.choose_pods``); each pod gives one log, of the
container asked for (the kubelet's default when none), or with ``allContainers`` one per
container, init containers first, as `kubectl logs --all-containers` reads them. Lines
are prefixed as kubectl's ``--prefix`` writes them, ``[pod/NAME/CONTAINER] ``; without it,
``--all-pods`` keeps its ``[pod/NAME] ``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrelay.relayapi.route_rules import LogQuery

__all__ = ["DEFAULT_CONTAINER_ANNOTATION", "LogSource", "container_names", "log_sources"]

# kubectl reads this annotation to pick a pod's container when none is named.
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


@dataclass(frozen=True, slots=True)
class LogSource:
    """One container's log: its pod, its container ("" the kubelet's default), and the
    bytes put before each of its lines (b"" none)."""

    pod: str
    container: str
    prefix: bytes


def container_names(pod: Mapping[str, Any]) -> list[str]:
    """The pod's init containers then its containers, by name (as kubectl lists them)."""
    spec = pod.get("spec") or {}
    names = []
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            name = container.get("name") if isinstance(container, Mapping) else None
            if isinstance(name, str) and name:
                names.append(name)
    return names


def _default_container(pod: Mapping[str, Any]) -> str:
    """The container kubectl would read: the annotation's, else the first one."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    containers = [
        c.get("name")
        for c in (pod.get("spec") or {}).get("containers") or []
        if isinstance(c, dict)
    ]
    named = annotations.get(DEFAULT_CONTAINER_ANNOTATION)
    if named in containers:
        return str(named)
    return str(containers[0]) if containers and containers[0] else ""


def log_sources(pods: Sequence[Mapping[str, Any]], query: LogQuery) -> list[LogSource]:
    """The logs ``query`` reads of ``pods``, in order."""
    sources = []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name") or "")
        containers = container_names(pod) if query.all_containers else [query.container]
        for container in containers:
            if query.prefix:
                shown = container or _default_container(pod)
                prefix = f"[pod/{name}/{shown}] " if shown else f"[pod/{name}] "
            elif query.all_pods:
                prefix = f"[pod/{name}] "
            else:
                prefix = ""
            sources.append(LogSource(name, container, prefix.encode()))
    return sources
