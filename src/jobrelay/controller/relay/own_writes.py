"""The management objects' versions this process wrote: their watch events are echoes.

A write to a management object (its placement, its status, jobrelay's annotations)
comes back as a watch event. The reconcile that wrote it already decided with what it
wrote and acted on it (created the mirror, deleted the finished one, asked to look again
later), so the echo gives the decision nothing new: reconciling it cost a Job one to
three decisions more, each reading the caches and deciding again to do nothing (issue
36). The version an apiserver answered a write with names that write's result and no
other change (every change gets a new resourceVersion), so an event carrying exactly it
is skipped. An echo that comes before the write's answer is reconciled as any event
(no harm: the decision finds nothing to do).

Bounded: one version per workload, the newest write's; the oldest forgotten past
:data:`REMEMBERED` (a version never echoed, as when the object was deleted meanwhile,
only costs its entry until then).
"""

from __future__ import annotations

from jobrelay.kinds.base import WorkloadKey

__all__ = ["REMEMBERED", "OwnWrites"]

# Workloads whose last write's version is kept until its echo: a burst's worth.
REMEMBERED = 20_000


class OwnWrites:
    """The version each workload's last write by this process produced (see the module doc)."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._remembered = remembered
        self._versions: dict[WorkloadKey, str] = {}

    def wrote(self, key: WorkloadKey, resource_version: str | None) -> None:
        """This process's write to ``key``'s object produced ``resource_version``."""
        if not resource_version:
            return
        self._versions.pop(key, None)
        self._versions[key] = resource_version
        while len(self._versions) > self._remembered:
            del self._versions[next(iter(self._versions))]

    def is_echo(self, key: WorkloadKey, resource_version: str | None) -> bool:
        """Whether a watch event showing ``key``'s object at ``resource_version`` is the
        echo of this process's last write to it (forgotten once seen)."""
        if resource_version and self._versions.get(key) == resource_version:
            del self._versions[key]
            return True
        return False

    def forget(self, key: WorkloadKey) -> None:
        """``key``'s object is gone: no echo is coming."""
        self._versions.pop(key, None)

    def __len__(self) -> int:
        return len(self._versions)
