"""A worker's capacity: its Node and Pod informers feeding its tracker, and the
debounced word to the placement that it changed.

The Nodes and (unfinished) Pods are slimmed as they arrive; they do not count
for the Connected verdict: a worker whose nodes cannot be read still runs mirrors.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobrelay.fleet.refusals import classify
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import NODES, PODS
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.tracker import (
    POD_FIELD_SELECTOR,
    CapacityTracker,
    OwnedPods,
    slim_node,
    slim_pod,
)

__all__ = ["CAPACITY_DEBOUNCE", "CapacityCalls", "CapacityFeed"]

_log = logging.getLogger(__name__)

# A burst of node and pod events tells the placement at most this often per worker:
# soon enough to place a held workload within seconds of capacity freeing.
CAPACITY_DEBOUNCE = 0.5
# Pods that finished or went, remembered (slim) so that their last Events (Evicted, a
# failed container) still find whom they speak for; the oldest are forgotten first.
_GONE_PODS_KEPT = 4096


@dataclass
class CapacityFeed:
    """One connection's Node and Pod informers and the tracker they feed."""

    name: str  # the worker's
    nodes: Informer | None = None
    pods: Informer | None = None
    tracker: CapacityTracker = field(default_factory=CapacityTracker)
    task: asyncio.Task[None] | None = None
    # The error already logged (each is logged once).
    error_logged: str | None = None
    # The last state of pods that finished or were deleted, by key (bounded).
    gone_pods: collections.OrderedDict[str, dict[str, Any]] = field(
        default_factory=collections.OrderedDict
    )

    def start(
        self,
        client: ApiClient,
        options: InformerOptions,
        *,
        changed: Callable[[], None],
        listed: Callable[[], None],
    ) -> None:
        """Start both informers: ``changed()`` on each change once both have listed,
        ``listed()`` once when they first have."""
        self.nodes = Informer(client, NODES, transform=slim_node, options=options)
        self.pods = Informer(
            client, PODS, field_selector=POD_FIELD_SELECTOR, transform=slim_pod, options=options
        )
        for informer, apply in ((self.nodes, self._node_changed), (self.pods, self._pod_changed)):

            def handler(
                event: InformerEvent, apply: Callable[[InformerEvent], bool] = apply
            ) -> None:
                # While the first lists run, the one call once both have listed says it all.
                if apply(event) and self.listed:
                    changed()

            informer.add_handler(handler)
            informer.start()
        self.task = asyncio.get_running_loop().create_task(
            self._until_listed(listed), name=f"capacity-{self.name}"
        )

    async def _until_listed(self, listed: Callable[[], None]) -> None:
        for informer in (self.nodes, self.pods):
            if informer is not None:
                await informer.wait_synced()
        _log.info(
            "worker %s: capacity known: %s", self.name, self.tracker.capacity().summary.columns()
        )
        listed()

    def _node_changed(self, event: InformerEvent) -> bool:
        if event.new is None:
            return self.tracker.delete_node(event.key)
        return self.tracker.set_node(event.new)

    def _pod_changed(self, event: InformerEvent) -> bool:
        if event.new is None and event.old is not None:
            self.gone_pods[event.key] = event.old
            self.gone_pods.move_to_end(event.key)
            while len(self.gone_pods) > _GONE_PODS_KEPT:
                self.gone_pods.popitem(last=False)
        return self.tracker.set_pod(event.key, event.new)

    def pod(self, key: str) -> dict[str, Any] | None:
        """The pod ``namespace/name`` as cached (slim), or as it was when it finished or
        went; None when unknown (its Pods not listed yet, or long gone)."""
        if self.pods is None or not self.pods.has_synced:
            return None
        found = self.pods.get(key)
        return found if found is not None else self.gone_pods.get(key)

    @property
    def listed(self) -> bool:
        return (
            self.nodes is not None
            and self.pods is not None
            and self.nodes.has_synced
            and self.pods.has_synced
        )

    def capacity(self) -> WorkerCapacity | None:
        """Its nodes and what is requested on each; None until both its Nodes and Pods
        have listed (or when it forbids listing them: ``error`` says why)."""
        return self.tracker.capacity() if self.listed else None

    @property
    def error(self) -> str | None:
        """Why its capacity is not known (listing Nodes or Pods failed), if it is not."""
        for informer in (self.nodes, self.pods):
            if informer is not None and not informer.has_synced and informer.last_error:
                reason, message = classify(informer.last_error)
                return f"cannot list {informer.name}: {reason}: {message}"
        return None

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
        return any(
            informer is not None
            and not informer.has_synced
            and informer.last_error is not None
            and classify(informer.last_error)[0] == "Forbidden"
            for informer in (self.nodes, self.pods)
        )

    def pods_of(self, namespace: str, name: str, uid: str) -> OwnedPods | None:
        """The unfinished pods of the Job or JobSet ``namespace/name`` whose UID is ``uid``
        here; None until its Pods have listed (unknown, not none)."""
        if self.pods is None or not self.pods.has_synced:
            return None
        return self.tracker.pods_of(namespace, name, uid)

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for informer in (self.nodes, self.pods):
            if informer is not None:
                await informer.stop()


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
