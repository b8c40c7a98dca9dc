"""The waiting workloads' estimated starts in the panel's workload rows (issue 34):
computed on read over the controller's caches, never written. Each workload is read for
the estimate once per resourceVersion; the simulation
(:func:`jobrelay.readmodel.estimate_reads.estimates_of`) runs at most every
:data:`ESTIMATES_EVERY` seconds while the workloads view is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from jobrelay.admission.queue_model import QueueSpec
from jobrelay.admission.queue_places import QueueKnowledge
from jobrelay.admission.queue_specs import read_queue
from jobrelay.kinds.base import WorkloadKind
from jobrelay.readmodel.estimate_reads import (
    EstimateRead,
    estimated_time,
    estimates_of,
    read_for_estimate,
    worker_figures,
)
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import QUEUE_LABEL

__all__ = ["ESTIMATES_EVERY", "PanelEstimates", "RowEstimate"]

# How often the estimates are computed again (each is a time, not a countdown).
ESTIMATES_EVERY = 5.0

# A row's estimate: its start (RFC 3339, None when unknown) and its basis.
RowEstimate = tuple[str | None, str]


class _Cache(Protocol):
    def items(self) -> list[tuple[str, dict[str, Any]]]: ...


class _Kind(Protocol):
    @property
    def kind(self) -> WorkloadKind: ...
    @property
    def objects(self) -> _Cache: ...


class PanelEstimates:
    """Each waiting workload's estimate, by (kind name, cache key)."""

    def __init__(
        self,
        registrations: Callable[[], Iterable[Mapping[str, Any]]],
        queues: Callable[[], Iterable[Mapping[str, Any]]],
        queue_of: Callable[[str, str], str],
        *,
        clock: Callable[[], float],
        wall: Callable[[], float],
    ) -> None:
        self._registrations = registrations
        self._queues = queues
        self._queue_of = queue_of
        self._clock = clock
        self._wall = wall
        self.current: dict[tuple[str, str], RowEstimate] = {}
        self._at: float | None = None
        # Each workload's read, and the resourceVersion and queue it was read at.
        self._reads: dict[tuple[str, str], tuple[tuple[str, str], EstimateRead | None]] = {}

    def refresh(self, kinds: Mapping[str, _Kind]) -> set[tuple[str, str]] | None:
        """Compute the estimates again when ESTIMATES_EVERY passed: the workloads whose
        estimate changed (None: not computed again)."""
        moment = self._clock()
        if self._at is not None and moment - self._at < ESTIMATES_EVERY:
            return None
        self._at = moment
        known = QueueKnowledge({}, {})
        reads: dict[tuple[str, str], tuple[tuple[str, str], EstimateRead | None]] = {}
        for name, runtime in kinds.items():
            for key, obj in runtime.objects.items():
                meta = Meta(obj)
                version = (meta.resource_version or "", self._queue_of(
                    meta.namespace, meta.label(QUEUE_LABEL) or ""))  # fmt: skip
                cached = self._reads.get((name, key))
                if cached is None or cached[0] != version:
                    cached = (version, read_for_estimate(runtime.kind, obj, version[1], known))
                reads[(name, key)] = cached
        self._reads = reads
        where = {read.key: at for at, (_, read) in reads.items() if read is not None}
        specs = {
            spec.name: spec for spec in map(read_queue, self._queues())
            if isinstance(spec, QueueSpec)
        }  # fmt: skip
        now = datetime.fromtimestamp(self._wall(), UTC)
        found = estimates_of([r for _, r in reads.values() if r is not None], specs,
                             worker_figures(self._registrations()), now)  # fmt: skip
        fresh = {
            where[key]: (estimated_time(estimate), estimate.basis)
            for key, estimate in found.items() if key in where
        }  # fmt: skip
        before, self.current = self.current, fresh
        return {k for k in {*before, *fresh} if before.get(k) != fresh.get(k)}
