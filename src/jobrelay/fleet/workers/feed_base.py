"""What every worker feed shares: informers on the worker's connection, started with the
pool's InformerOptions, the word to placement when the fact changed, synced, stopped.

A feed is one fact of a worker read through its connection (its capacity, its
namespaces, its claims, our copies there). A subclass says only what is its own:
the informers it opens and what each event changes (:meth:`WorkerFeed._open`), and
the view placement reads. The pool starts every feed of a new connection with one
:class:`FeedWiring`; so a new worker fact is one feed here plus one placement
filter (``placement/``).

The shared lifecycle: each informer's event is applied to the fact; a change once
every informer has listed tells ``changed`` (while the first lists run, the one call
once all have listed says it all); a task waits for the first lists and then calls
:meth:`WorkerFeed._listed` (``changed``, by default); a stop ends the task and the
informers.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from jobrelay.dependencies.template_references import DependencyKind
from jobrelay.fleet.refusals import classify
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kube.client import ApiClient
from jobrelay.kube.watching import Informer, InformerEvent, InformerOptions

__all__ = ["Apply", "CopyChanged", "FeedWiring", "InformerRefusal", "WorkerFeed"]

# Applies one event of an informer to the fact: True when placement's view changed.
Apply = Callable[[InformerEvent], bool]
# Told (kind, "namespace/name") of every change of one of our dependency copies.
CopyChanged = Callable[[DependencyKind, str], None]


@dataclass(frozen=True)
class FeedWiring:
    """What the pool starts each feed of one connection with."""

    client: ApiClient  # the worker's
    options: InformerOptions  # the pool's
    # A fact changed (once listed): placement may look again (debounced by the pool).
    changed: Callable[[], None]
    # The worker's WorkerCluster status may say more now (written at its next sync).
    status_changed: Callable[[], None] = lambda: None
    # For the feed of our dependency copies: which are ours, and who hears of a change.
    copy_selector: str = ""
    copy_changed: CopyChanged | None = None
    # This manager's origin: the copies are watched in the namespaces labelled with it.
    origin: str = ""
    # The kinds configured: the hop feed watches the objects their operators make.
    kinds: Sequence[WorkloadKind] = ()


@dataclass(frozen=True)
class InformerRefusal:
    """An informer that has not listed, and why (fleet/refusals.py's reason and message)."""

    informer: Informer
    reason: str
    message: str


@dataclass
class WorkerFeed(ABC):
    """One fact of one worker, read through informers on its connection."""

    # What its task is named after, with the worker's name: "capacity-w1".
    label: ClassVar[str]

    name: str  # the worker's
    task: asyncio.Task[None] | None = field(default=None, init=False)
    # The informers last seen all listed: an informer that has listed stays listed, so
    # while the feed's informers are these, ``listed`` answers without asking each (it
    # is read for every snapshot and every event of the feed).
    _listed_informers: tuple[Informer | None, ...] = field(default=(), init=False, repr=False)

    @abstractmethod
    def _open(self, wiring: FeedWiring) -> Sequence[tuple[Informer, Apply]]:
        """Make its informers (kept by the feed, not started), each with its Apply."""

    @abstractmethod
    def informers(self) -> Sequence[Informer | None]:
        """Its informers (None before it starts)."""

    def start(self, wiring: FeedWiring) -> None:
        for informer, apply in self._open(wiring):

            def handler(event: InformerEvent, apply: Apply = apply) -> None:
                if apply(event) and self.listed:
                    wiring.changed()

            informer.add_handler(handler)
            informer.start()
        self.task = asyncio.get_running_loop().create_task(
            self._until_listed(wiring), name=f"{self.label}-{self.name}"
        )

    async def _until_listed(self, wiring: FeedWiring) -> None:
        await self._before_listed(wiring.client)
        for informer in self.informers():
            if informer is not None:
                await informer.wait_synced()
        self._listed(wiring)

    async def _before_listed(self, client: ApiClient) -> None:
        """What else it learns before it counts as listed (nothing, by default)."""
        return None

    def _listed(self, wiring: FeedWiring) -> None:
        """Its first lists are in: placement looks again."""
        wiring.changed()

    @property
    def listed(self) -> bool:
        """Every informer of its has listed."""
        informers = tuple(self.informers())
        if informers and informers == self._listed_informers:
            return True
        listed = bool(informers) and all(i is not None and i.has_synced for i in informers)
        if listed:
            self._listed_informers = informers
        return listed

    def refusals(self) -> Iterator[InformerRefusal]:
        """Each informer that has not listed and failed, with why (a cache that listed
        once stands while a watch fails)."""
        for informer in self.informers():
            if informer is not None and not informer.has_synced and informer.last_error is not None:
                reason, message = classify(informer.last_error)
                yield InformerRefusal(informer, reason, message)

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for informer in self.informers():
            if informer is not None:
                await informer.stop()
