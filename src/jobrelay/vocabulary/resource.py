"""Where a kind is served on an apiserver: one type for every URL jobrelay builds.

A workload kind's adapter names its resource (``WorkloadKind.ref``) and the
API client takes the same value, so nothing converts one into the other. The
well-known resources the I/O code uses are in :mod:`jobrelay.kube.resources`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Resource"]


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives on the apiserver: enough to build every URL for it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    # Workload kinds are namespaced; cluster-scoped ones (Nodes, our CRD) say so.
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """``Kind.version.group``, the form ``jobrelay run --kind`` takes (and kubectl's)."""
        return (
            f"{self.kind}.{self.version}.{self.group}"
            if self.group
            else f"{self.kind}.{self.version}"
        )
