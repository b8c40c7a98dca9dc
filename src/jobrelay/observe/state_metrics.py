"""The controller's state gauges: read afresh from a :class:`ControllerState` at each scrape.

What a standby reports: it keeps warm caches (workers, capacity, workloads by
state are true there too) but it does not drain its work queue and decides
nothing, so the queue gauges and the held workloads are the leader's alone: a
standby does not expose them at all, as a controller-runtime standby has no
work queue metrics (its controllers start only once it leads). A query or an
alert on ``jobrelay_workqueue_*`` therefore sees the leader only, and
``max()`` over replicas never reads a standby's ever-growing queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "ControllerState",
    "QueueGaugeFigures",
    "QueueState",
    "StateCollector",
    "WorkerCapacityFigures",
    "WorkerLiveness",
]


@dataclass(frozen=True, slots=True)
class WorkerLiveness:
    name: str
    connected: bool
    lost: bool


@dataclass(frozen=True, slots=True)
class QueueState:
    depth: int  # keys ready to be reconciled now
    delayed: int  # keys waiting out a backoff or a requeue-after
    in_progress: int  # keys being reconciled
    oldest_age: float  # seconds the oldest ready key has waited (0: none)


@dataclass(frozen=True, slots=True)
class WorkerCapacityFigures:
    """One worker's totals over its nodes, in base units (CPU cores, bytes, counts)."""

    worker: str
    allocatable: Mapping[str, float]
    requested: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class QueueGaugeFigures:
    """One RelayQueue's figures from the last fair-share pass (resources in base units)."""

    queue: str
    fair_share: float
    actual_share: float
    pending: int
    admitted: int
    demand: Mapping[str, float]
    usage: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class ControllerState:
    """What the state gauges show, read afresh at every scrape."""

    leader: bool  # holds the Lease (always, without leader election)
    ready: bool  # caches synced
    # The leader's work queue; None on a standby (it fills its queue, never drains it).
    queue: QueueState | None = None
    # Workloads held unplaced, by (kind, reason): the leader's decisions (None: standby).
    held: Mapping[tuple[str, str], int] | None = None
    # Management objects by (kind, state), as `jobrelay get` shows their state.
    workloads: Mapping[tuple[str, str], int] = field(default_factory=dict)
    workers: tuple[WorkerLiveness, ...] = ()
    capacity: tuple[WorkerCapacityFigures, ...] = ()
    # The RelayQueues' figures and the fleet's fairness error: the leader's fair-share
    # pass (None: a standby, or no pass yet).
    queues: tuple[QueueGaugeFigures, ...] | None = None
    fairness_error: float | None = None
    # Each kind's management cache: the resourceVersion up to which its watch delivered
    # every event to the handlers, where it reads as a number (an etcd revision).
    cache_versions: Mapping[str, int] = field(default_factory=dict)
    # When the aggregated API's serving certificate (the one new connections get) expires,
    # in unix seconds (None: no API served).
    api_certificate_expiry: float | None = None
    # APIService v1alpha1.api.jobrelay.dev's Available condition as the leader last read
    # it (None: a standby, not read yet, or no condition).
    api_service_available: bool | None = None


def _gauge(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _families() -> dict[str, GaugeMetricFamily]:
    families = (
        _gauge("jobrelay_leader", "1 while this replica holds the leader Lease (acts), else 0."),
        _gauge("jobrelay_ready", "1 once the caches have synced (/readyz answers 200)."),
        _gauge(
            "jobrelay_cache_resource_version",
            "The resourceVersion up to which each kind's management cache has handed every "
            "watch event to the work queue (a watch that lags shows here).",
            "kind",
        ),
        _gauge("jobrelay_workqueue_depth", "Keys waiting to be reconciled now (leader only)."),
        _gauge(
            "jobrelay_workqueue_delayed",
            "Keys waiting out a backoff or requeue delay (leader only).",
        ),
        _gauge("jobrelay_workqueue_in_progress", "Keys being reconciled (leader only)."),
        _gauge(
            "jobrelay_workqueue_oldest_item_age_seconds",
            "How long the oldest key waiting to be reconciled has waited (leader only).",
        ),
        _gauge(
            "jobrelay_held_workloads",
            "Workloads no worker can take now, by kind and reason (NotPlaced, NeverFits); "
            "leader only.",
            "kind",
            "reason",
        ),
        _gauge(
            "jobrelay_workloads",
            "Management objects jobrelay manages, by kind and state (as `jobrelay get`).",
            "kind",
            "state",
        ),
        _gauge(
            "jobrelay_worker_connected",
            "1 while the worker cluster is connected (its status Connected=True), else 0.",
            "worker",
        ),
        _gauge(
            "jobrelay_worker_lost",
            "1 once the worker cluster is declared lost (its workloads run elsewhere).",
            "worker",
        ),
        _gauge(
            "jobrelay_worker_allocatable",
            "Allocatable resources summed over a worker's nodes (cpu in cores, memory in "
            "bytes, others in units).",
            "worker",
            "resource",
        ),
        _gauge(
            "jobrelay_worker_requested",
            "Requests of the pods bound to a worker's nodes, summed (units as allocatable).",
            "worker",
            "resource",
        ),
        *_queue_families(),
        *_api_families(),
    )
    return {family.name: family for family in families}


def _api_families() -> tuple[GaugeMetricFamily, ...]:
    return (
        _gauge(
            "jobrelay_api_certificate_expiry_timestamp_seconds",
            "When the serving certificate of the aggregated API this replica serves expires "
            "(its notAfter), in unix seconds.",
        ),
        _gauge(
            "jobrelay_api_service_available",
            "1 while APIService v1alpha1.api.jobrelay.dev is Available as the leader last "
            "read it, else 0 (leader only).",
        ),
    )


def _add_api(f: dict[str, GaugeMetricFamily], state: ControllerState) -> None:
    if state.api_certificate_expiry is None:
        del f["jobrelay_api_certificate_expiry_timestamp_seconds"]
    else:
        f["jobrelay_api_certificate_expiry_timestamp_seconds"].add_metric(
            [], state.api_certificate_expiry
        )
    if state.api_service_available is None:
        del f["jobrelay_api_service_available"]
    else:
        f["jobrelay_api_service_available"].add_metric([], float(state.api_service_available))


def _queue_families() -> tuple[GaugeMetricFamily, ...]:
    return (
        _gauge(
            "jobrelay_queue_fair_share",
            "The dominant share of the fleet a RelayQueue is entitled to now (0 to 1; "
            "leader only).",
            "queue",
        ),
        _gauge(
            "jobrelay_queue_actual_share",
            "A RelayQueue's dominant share of the fleet in use now (0 to 1; leader only).",
            "queue",
        ),
        _gauge(
            "jobrelay_queue_demand",
            "Requests of a RelayQueue's admitted and pending workloads, summed (cpu in "
            "cores, memory in bytes, others in units; leader only).",
            "queue",
            "resource",
        ),
        _gauge(
            "jobrelay_queue_usage",
            "Requests of a RelayQueue's admitted workloads, summed (units as demand; leader only).",
            "queue",
            "resource",
        ),
        _gauge(
            "jobrelay_queue_pending",
            "Workloads of a RelayQueue waiting for admission (leader only).",
            "queue",
        ),
        _gauge(
            "jobrelay_queue_admitted",
            "Workloads of a RelayQueue admitted, not finished (leader only).",
            "queue",
        ),
        _gauge(
            "jobrelay_fairness_error",
            "The summed shortfall of the RelayQueues below their fair share (0: every "
            "queue has its share; leader only).",
        ),
    )


def _add_queues(f: dict[str, GaugeMetricFamily], state: ControllerState) -> None:
    if state.queues is None:
        for family in _queue_families():
            del f[family.name]
        return
    for q in state.queues:
        f["jobrelay_queue_fair_share"].add_metric([q.queue], q.fair_share)
        f["jobrelay_queue_actual_share"].add_metric([q.queue], q.actual_share)
        f["jobrelay_queue_pending"].add_metric([q.queue], q.pending)
        f["jobrelay_queue_admitted"].add_metric([q.queue], q.admitted)
        for resource, amount in sorted(q.demand.items()):
            f["jobrelay_queue_demand"].add_metric([q.queue, resource], amount)
        for resource, amount in sorted(q.usage.items()):
            f["jobrelay_queue_usage"].add_metric([q.queue, resource], amount)
    if state.fairness_error is None:
        del f["jobrelay_fairness_error"]
    else:
        f["jobrelay_fairness_error"].add_metric([], state.fairness_error)


class StateCollector(Collector):
    """The gauges, from ``state()`` at scrape time."""

    def __init__(self, state: Callable[[], ControllerState]) -> None:
        self._state = state

    def describe(self) -> Iterator[Metric]:
        # Names only: the registry checks them for clashes without reading any state.
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        f = _families()
        f["jobrelay_leader"].add_metric([], float(state.leader))
        f["jobrelay_ready"].add_metric([], float(state.ready))
        for kind, version in sorted(state.cache_versions.items()):
            f["jobrelay_cache_resource_version"].add_metric([kind], version)
        if state.queue is None:
            for name in list(f):
                if name.startswith("jobrelay_workqueue_"):
                    del f[name]
        else:
            f["jobrelay_workqueue_depth"].add_metric([], state.queue.depth)
            f["jobrelay_workqueue_delayed"].add_metric([], state.queue.delayed)
            f["jobrelay_workqueue_in_progress"].add_metric([], state.queue.in_progress)
            f["jobrelay_workqueue_oldest_item_age_seconds"].add_metric([], state.queue.oldest_age)
        if state.held is None:
            del f["jobrelay_held_workloads"]
        else:
            for (kind, reason), count in sorted(state.held.items()):
                f["jobrelay_held_workloads"].add_metric([kind, reason], count)
        for (kind, name), count in sorted(state.workloads.items()):
            f["jobrelay_workloads"].add_metric([kind, name], count)
        for worker in state.workers:
            f["jobrelay_worker_connected"].add_metric([worker.name], float(worker.connected))
            f["jobrelay_worker_lost"].add_metric([worker.name], float(worker.lost))
        for figures in state.capacity:
            for resource, amount in sorted(figures.allocatable.items()):
                f["jobrelay_worker_allocatable"].add_metric([figures.worker, resource], amount)
            for resource, amount in sorted(figures.requested.items()):
                f["jobrelay_worker_requested"].add_metric([figures.worker, resource], amount)
        _add_queues(f, state)
        _add_api(f, state)
        yield from f.values()
