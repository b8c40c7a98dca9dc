"""A worker's capacity: its Node and Pod informers feeding its tracker, and the
debounced word to the placement that it changed.

The Nodes and (unfinished) Pods are slimmed as they arrive; they do not count
for the Connected verdict: a worker whose nodes cannot be read still runs mirrors.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from jobrelay.fleet.workers.feed_base import Apply, FeedWiring, WorkerFeed
from jobrelay.kube.resources import NODES, PODS
from jobrelay.kube.watching import Informer, InformerEvent
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.slim_objects import POD_FIELD_SELECTOR, slim_node, slim_pod
from jobrelay.placement.tracker import CapacityTracker, OwnedPods

__all__ = ["CAPACITY_DEBOUNCE", "CapacityCalls", "CapacityFeed"]

_log = logging.getLogger(__name__)

# A burst of node and pod events tells the placement at most this often per worker:
# soon enough to place a held workload within seconds of capacity freeing.
CAPACITY_DEBOUNCE = 0.5
# Pods that finished or went, remembered (slim) so that their last Events (Evicted, a
# failed container) still find whom they speak for; the oldest are forgotten first.
_GONE_PODS_KEPT = 4096
# A worker reporting unusable quantities is logged at most this often (they are ignored).
UNUSABLE_LOG_INTERVAL = 60.0


@dataclass
class CapacityFeed(WorkerFeed):
    """One connection's Node and Pod informers and the tracker they feed."""

    label: ClassVar[str] = "capacity"

    nodes: Informer | None = None
    pods: Informer | None = None
    tracker: CapacityTracker = field(default_factory=CapacityTracker)
    # The error already logged (each is logged once).
    error_logged: str | None = None
    # The last state of pods that finished or were deleted, by key (bounded).
    gone_pods: collections.OrderedDict[str, dict[str, Any]] = field(
        default_factory=collections.OrderedDict
    )
    # When an unusable quantity was last logged, and how many were seen since.
    unusable_logged_at: float | None = None
    unusable_unlogged: int = 0

    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        options = wiring.options
        self.nodes = Informer(wiring.client, NODES, transform=slim_node, options=options)
        self.pods = Informer(
            wiring.client, PODS, field_selector=POD_FIELD_SELECTOR, transform=slim_pod,
            options=options,
        )  # fmt: skip
        return [(self.nodes, self._node_changed), (self.pods, self._pod_changed)]

    def informers(self) -> Sequence[Informer | None]:
        return (self.nodes, self.pods)

    def _listed(self, wiring: FeedWiring) -> None:
        """Both have listed: placement looks again, the worker's status shows the summary."""
        _log.info(
            "worker %s: capacity known: %s", self.name, self.tracker.capacity().summary.columns()
        )
        wiring.changed()
        wiring.status_changed()

    def _node_changed(self, event: InformerEvent) -> bool:
        if event.new is None:
            return self.tracker.delete_node(event.key)
        changed = self.tracker.set_node(event.new)
        self._tell_unusable()
        return changed

    def _pod_changed(self, event: InformerEvent) -> bool:
        if event.new is None and event.old is not None:
            self.gone_pods[event.key] = event.old
            self.gone_pods.move_to_end(event.key)
            while len(self.gone_pods) > _GONE_PODS_KEPT:
                self.gone_pods.popitem(last=False)
        changed = self.tracker.set_pod(event.key, event.new)
        self._tell_unusable()
        return changed

    def _tell_unusable(self) -> None:
        """Log a node or pod whose quantities were ignored, at most once a minute."""
        unusable = self.tracker.take_unusable()
        if unusable is None:
            return
        self.unusable_unlogged += 1
        moment = time.monotonic()
        if self.unusable_logged_at is not None and (
            moment - self.unusable_logged_at < UNUSABLE_LOG_INTERVAL
        ):
            return
        more = self.unusable_unlogged - 1
        _log.warning(
            "worker %s: %s; ignored%s", self.name, unusable,
            f" (and {more} more since the last such line)" if more else "",
            extra={"cluster": self.name},
        )  # fmt: skip
        self.unusable_logged_at, self.unusable_unlogged = moment, 0

    def pod(self, key: str) -> dict[str, Any] | None:
        """The pod ``namespace/name`` as cached (slim), or as it was when it finished or
        went; None when unknown (its Pods not listed yet, or long gone)."""
        if self.pods is None or not self.pods.has_synced:
            return None
        found = self.pods.get(key)
        return found if found is not None else self.gone_pods.get(key)

    def capacity(self) -> WorkerCapacity | None:
        """Its nodes and what is requested on each; None until both its Nodes and Pods
        have listed (or when it forbids listing them: ``error`` says why)."""
        return self.tracker.capacity() if self.listed else None

    @property
    def error(self) -> str | None:
        """Why its capacity is not known (listing Nodes or Pods failed), if it is not."""
        refusal = next(self.refusals(), None)
        if refusal is None:
            return None
        return f"cannot list {refusal.informer.name}: {refusal.reason}: {refusal.message}"

    def error_to_log(self) -> str | None:
        """The error, the first time it is seen (each is logged once)."""
        error = self.error
        if error is None or error == self.error_logged:
            return None
        self.error_logged = error
        return error

    @property
    def forbidden(self) -> bool:
        """Its credentials may not list its Nodes or Pods: placement there goes without a
        fit check (blind) rather than never. Other errors (it does not answer) wait."""
        return any(refusal.reason == "Forbidden" for refusal in self.refusals())

    def holds_pods_named(self, namespace: str, name: str) -> bool | None:
        """Whether unfinished pods of the workload ``namespace/name`` (any UID) are cached
        here; None until its Pods have listed."""
        if self.pods is None or not self.pods.has_synced:
            return None
        return self.tracker.holds_pods_named(namespace, name)

    def pods_of(self, namespace: str, name: str, uid: str) -> OwnedPods | None:
        """The unfinished pods of the workload ``namespace/name`` whose UID is ``uid`` here,
        with those of the hops it controls (hop_feed.py); None until its Pods have listed
        (unknown, not none)."""
        if self.pods is None or not self.pods.has_synced:
            return None
        return self.tracker.pods_of(namespace, name, uid)


@dataclass
class CapacityCalls:
    """The placement's capacity callback for one worker, debounced: at once, or at the
    end of the window if it ran less than CAPACITY_DEBOUNCE ago; never twice in one."""

    # When the callback last ran (loop time), and the call scheduled for the end of
    # the debounce window, if any.
    told: float | None = None
    scheduled: asyncio.TimerHandle | None = None

    def schedule(self, tell: Callable[[], None]) -> None:
        if self.scheduled is not None:
            return
        loop = asyncio.get_running_loop()
        delay = 0.0 if self.told is None else max(0.0, self.told + CAPACITY_DEBOUNCE - loop.time())
        self.scheduled = loop.call_later(delay, self._run, tell)

    def _run(self, tell: Callable[[], None]) -> None:
        self.scheduled = None
        self.told = asyncio.get_running_loop().time()
        tell()

    def cancel(self) -> None:
        if self.scheduled is not None:
            self.scheduled.cancel()
            self.scheduled = None
