"""The management objects' versions this process wrote: their watch events are echoes.

A write to a management object (its placement, its status, jobrelay's annotations)
comes back as a watch event. The reconcile that wrote it already decided with what it
wrote and acted on it (created the mirror, deleted the finished one, asked to look again
later), so the echo gives the decision nothing new: reconciling it cost a Job one to
three decisions more, each reading the caches and deciding again to do nothing (issue
36). The version an apiserver answered a write with names that write's result and no
other change (every change gets a new resourceVersion), so an event carrying exactly it
is skipped.

The echo often comes before the write's answer: the watch and the answer travel on two
connections, and under a burst the event is often handled first. So while a
write is under way its object's events wait here (:meth:`OwnWrites.defer`); the answer
settles them: the one carrying the written version was the echo, any other is queued in
its lane as it would have been, and a write that fails queues them all. Without a
``requeue`` nothing waits (an echo that comes first is then reconciled as any event: no
harm, the decision finds nothing to do).

Bounded: one version per workload, the newest write's; the oldest forgotten past
:data:`REMEMBERED` (a version never echoed, as when the object was deleted meanwhile,
only costs its entry until then). Events wait only while their object's write is under
way, and only its reconcile writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.outcome import Lane

__all__ = ["REMEMBERED", "WAITING_AT_MOST", "OwnWrites", "WriteUnderWay"]

# Workloads whose last write's version is kept until its echo: a burst's worth.
REMEMBERED = 20_000
# Events of one object that wait for one write's answer; later ones are queued at once.
WAITING_AT_MOST = 8


@dataclass(slots=True)
class WriteUnderWay:
    """One write to a management object; its writer tells the version it was answered."""

    version: str | None = None

    def answered(self, version: str | None) -> None:
        self.version = version or None


class OwnWrites:
    """The version each workload's last write by this process produced (see the module doc).

    ``requeue(key, lane)`` queues a workload whose event waited for a write's answer and
    was not its echo (the work queue's ``add``); None: no event waits.
    """

    def __init__(
        self,
        remembered: int = REMEMBERED,
        requeue: Callable[[WorkloadKey, Lane], None] | None = None,
    ) -> None:
        self._remembered = remembered
        self._requeue = requeue
        self._versions: dict[WorkloadKey, str] = {}
        # Workloads with a write under way: the events that came meanwhile (version, lane).
        self._under_way: dict[WorkloadKey, list[tuple[str, Lane]]] = {}

    @contextmanager
    def writing(self, key: WorkloadKey, *, echo_skippable: bool = True) -> Iterator[WriteUnderWay]:
        """Around one write to ``key``'s object whose echo needs no look: its events wait
        until the writer tells the answer (:meth:`WriteUnderWay.answered`) or fails."""
        write = WriteUnderWay()
        waits = echo_skippable and self._requeue is not None and key not in self._under_way
        if waits:
            self._under_way[key] = []
        try:
            yield write
        finally:
            came = self._under_way.pop(key, []) if waits else []
            if echo_skippable and write.version is not None:
                if not any(version == write.version for version, _lane in came):
                    self.wrote(key, write.version)  # its echo is still to come
                came = [(v, lane) for v, lane in came if v != write.version]
            if came and self._requeue is not None:
                self._requeue(key, min(lane for _version, lane in came))

    def defer(self, key: WorkloadKey, resource_version: str | None, lane: Lane) -> bool:
        """Whether an event showing ``key``'s object at ``resource_version`` waits for the
        answer of the write under way (settled by :meth:`writing`); False: none is."""
        came = self._under_way.get(key)
        if came is None or not resource_version or len(came) >= WAITING_AT_MOST:
            return False  # past the bound (a tenant editing fast), queued at once as before
        came.append((resource_version, lane))
        return True

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
