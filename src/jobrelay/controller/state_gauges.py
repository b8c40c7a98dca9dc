"""What the controller's state gauges show, read at each scrape from what it already
holds (caches, queue, the relay's memory, the workers' capacity trackers): nothing is
kept current between scrapes but a cache of each object's state by resourceVersion.

A standby reports its caches (workers, capacity, workloads by state: true there
too) but neither its work queue (filled by informer events, never drained) nor
held workloads (decisions it does not make): see observe/state_metrics.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from jobrelay.admission.planner import AdmissionPlan
from jobrelay.admission.queue_model import QueueSpec
from jobrelay.controller.relay.memory import RelayMemory
from jobrelay.controller.relay.reconciler import KindRuntime
from jobrelay.fleet.workers import WorkerView
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.standing import State, standing
from jobrelay.kube.queueing import WorkQueue
from jobrelay.observe.metrics import (
    ControllerState,
    QueueGaugeFigures,
    QueueState,
    WorkerCapacityFigures,
    WorkerLiveness,
)
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.units import CPU, MEMORY

__all__ = [
    "HELD_REASONS",
    "OTHER_RESOURCES",
    "StateGauges",
    "capacity_figures",
    "held_reason",
    "labelled_resources",
]

# The resource label of the amounts of resources no queue's quota names, summed.
OTHER_RESOURCES = "other"

# Why a workload is held, as its Warning Event's reason says it.
HELD_REASONS = (
    "NotPlaced",
    "NeverFits",
    "MissingDependency",
    "DependencyRefused",
    "DependencyTooLarge",
    # Fleet-wide queues and the manager's ResourceQuotas (admission/).
    "QueueNotFound",
    "QueueNotAllowed",
    "QueueQuotaExceeded",
    "ExceedsQueueQuota",
    "QueuedBehind",
    "WaitingForRoom",
    "Preempting",
    "NamespaceQuotaExceeded",
    "ExceedsNamespaceQuota",
)


def held_reason(signature: str) -> str:
    """The reason of a held signature (``NotPlaced|...``, ``MissingDependency|...`` ...)."""
    reason = signature.partition("|")[0]
    return reason if reason in HELD_REASONS else "NotPlaced"


def _base_units(resource: str, amount: int) -> float:
    # placement.units counts CPU in millicores; Prometheus wants base units.
    return amount / 1000 if resource == CPU else float(amount)


def labelled_resources(amounts: Mapping[str, int], named: Iterable[str]) -> dict[str, float]:
    """``amounts`` in base units under a label an admin chose: CPU, memory and the
    resources ``named`` (a queue's quota) keep theirs; the rest, names tenants chose in
    their requests, are summed under ``other``, so that a tenant cannot make a series
    per made-up name."""
    kept = {CPU, MEMORY, *named}
    labelled: dict[str, float] = {}
    for resource, amount in amounts.items():
        label = resource if resource in kept else OTHER_RESOURCES
        labelled[label] = labelled.get(label, 0.0) + _base_units(resource, amount)
    return labelled


def _quota_names(spec: QueueSpec | None) -> set[str]:
    return set() if spec is None else {*spec.nominal, *spec.borrowing_limit}


def capacity_figures(worker: str, capacity: WorkerCapacity) -> WorkerCapacityFigures:
    """A worker's allocatable and requested resources, summed over its nodes."""
    allocatable: Counter[str] = Counter()
    requested: Counter[str] = Counter()
    for node in capacity.nodes:
        allocatable.update(node.allocatable)
        requested.update(node.requested)
    # Nodes (an admin's) name the resources; a pod bound past the scheduler may ask for
    # any name, summed as ``other``.
    return WorkerCapacityFigures(
        worker,
        {r: _base_units(r, q) for r, q in allocatable.items()},
        labelled_resources(requested, allocatable),
    )


class _Pool(Protocol):
    def views(self) -> list[WorkerView]: ...


class _ApiFacts(Protocol):
    """What the aggregated API's listener knows (controller/http_serving.py)."""

    api_service_available: bool | None

    def certificate_expiry(self) -> float | None: ...


class StateGauges:
    """Builds the :class:`ControllerState` of one controller at each scrape."""

    def __init__(
        self,
        *,
        kinds: Mapping[str, KindRuntime],
        queue: WorkQueue[WorkloadKey],
        memory: RelayMemory,
        pool: _Pool,
        leader: Callable[[], bool],
        ready: Callable[[], bool],
        queue_specs: Callable[[], Mapping[str, QueueSpec]] = dict,
        api: _ApiFacts | None = None,
    ) -> None:
        self._api = api
        self._kinds = kinds
        self._queue = queue
        self._memory = memory
        self._pool = pool
        self._leader = leader
        self._ready = ready
        # The RelayQueues' specs: the resources their quotas name label the queue gauges.
        self._queue_specs = queue_specs
        # Each object's state by (kind, key), with the resourceVersion it was computed at.
        self._states: dict[tuple[str, str], tuple[str, State]] = {}

    def __call__(self) -> ControllerState:
        leader = self._leader()
        views = self._pool.views()
        queue = self._queue
        last = self._memory.queues.last  # the last admission plan
        return ControllerState(
            leader=leader,
            ready=self._ready(),
            queue=(
                QueueState(len(queue), queue.delayed, queue.in_progress, queue.oldest_age())
                if leader
                else None
            ),
            held=self._held() if leader else None,
            workloads=self._workloads(),
            workers=tuple(WorkerLiveness(v.name, v.connected, v.lost) for v in views),
            capacity=tuple(self._capacities(views)),
            queues=self._queue_figures(last) if leader else None,
            fairness_error=last.fairness_error if leader and last is not None else None,
            cache_versions=self._cache_versions(),
            api_certificate_expiry=self._api.certificate_expiry() if self._api else None,
            api_service_available=self._api.api_service_available if self._api and leader else None,
        )

    def _cache_versions(self) -> dict[str, int]:
        """Each kind's cache resourceVersion, where it is a number (Kubernetes calls it
        opaque; every etcd-backed apiserver writes a revision)."""
        versions = {name: runtime.objects.resource_version for name, runtime in self._kinds.items()}
        return {name: int(version) for name, version in versions.items() if version.isdigit()}

    def _queue_figures(self, last: AdmissionPlan | None) -> tuple[QueueGaugeFigures, ...] | None:
        """Each queue's figures from the last admission plan (None before one, or without
        queues); resources its quota does not name are summed as ``other``."""
        if last is None or last.fairness_error is None:
            return None
        specs = self._queue_specs()
        return tuple(
            QueueGaugeFigures(
                queue=name,
                fair_share=figures.fair_share,
                actual_share=figures.actual_share,
                pending=figures.pending,
                admitted=figures.admitted,
                demand=labelled_resources(figures.demand, _quota_names(specs.get(name))),
                usage=labelled_resources(figures.usage, _quota_names(specs.get(name))),
            )
            for name, figures in sorted(last.figures.items())
        )

    def _held(self) -> dict[tuple[str, str], int]:
        counts = {(kind, reason): 0 for kind in self._kinds for reason in HELD_REASONS}
        for key in self._memory.held_keys():
            signature = self._memory.held(key)
            if signature is not None:
                at = (key.kind, held_reason(signature))
                counts[at] = counts.get(at, 0) + 1
        return counts

    def _workloads(self) -> dict[tuple[str, str], int]:
        counts = {(kind, state.value): 0 for kind in self._kinds for state in State}
        before: dict[tuple[str, str], tuple[str, State]] = self._states
        now: dict[tuple[str, str], tuple[str, State]] = {}
        for name, runtime in self._kinds.items():
            tally: Counter[State] = Counter()
            for key, obj in runtime.objects.items():
                # Read at every scrape for every object: plain lookups, no Meta.
                version = (obj.get("metadata") or {}).get("resourceVersion") or ""
                known = before.get((name, key))
                if known is not None and known[0] == version and version:
                    state = known[1]
                else:
                    state = standing(runtime.kind, obj).state
                now[name, key] = (version, state)
                tally[state] += 1
            for state, count in tally.items():
                counts[name, state.value] = count
        self._states = now
        return counts

    @staticmethod
    def _capacities(views: Iterable[WorkerView]) -> Iterable[WorkerCapacityFigures]:
        for view in views:
            capacity = None if view.worker is None else view.worker.capacity()
            if capacity is not None:
                yield capacity_figures(view.name, capacity)
