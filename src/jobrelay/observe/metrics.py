"""The controller's Prometheus metrics: every name in one place, no I/O.

Each :class:`Metrics` has a registry of its own (never prometheus-client's
global one), so several controllers can run in one process (tests) and a
scrape shows one controller only. Counters and histograms are updated by thin
hooks in the controller; gauges describing state (queue, workers, leader) are
read at scrape time from a :class:`ControllerState` snapshot, so nothing has to
keep them current.

Names follow Prometheus conventions: ``jobrelay_`` prefix, ``_total`` for
counters, ``_seconds`` for durations. ``cluster`` is a WorkerCluster's name,
or ``manager`` for the management cluster's apiserver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "MANAGER",
    "ControllerState",
    "Metrics",
    "StatusCopyClock",
    "Stopwatches",
    "WorkerLiveness",
    "exposed_names",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# The ``cluster`` label of the management cluster's apiserver.
MANAGER = "manager"

# From a burst dispatched in milliseconds to a workload held for minutes.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# One apiserver request, or one reconcile (a few requests).
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class WorkerLiveness:
    name: str
    connected: bool
    lost: bool


@dataclass(frozen=True, slots=True)
class ControllerState:
    """What the state gauges show, read afresh at every scrape."""

    leader: bool  # holds the Lease (always, without leader election)
    ready: bool  # caches synced
    queue_depth: int  # keys ready to be reconciled now
    queue_delayed: int  # keys waiting out a backoff or a requeue-after
    queue_in_progress: int  # keys being reconciled
    queue_oldest_age: float  # seconds the oldest ready key has waited (0: none)
    held: int  # workloads no worker can take now
    workers: tuple[WorkerLiveness, ...] = ()


def _gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


class _StateCollector(Collector):
    """The gauges, from ``state()`` at scrape time."""

    def __init__(self, state: Callable[[], ControllerState]) -> None:
        self._state = state

    def describe(self) -> Iterator[Metric]:
        # Names only: the registry checks them for clashes without reading any state.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        (leader, ready, depth, delayed, in_progress, oldest, held, connected, lost) = (
            self._families()
        )
        leader.add_metric([], float(state.leader))
        ready.add_metric([], float(state.ready))
        depth.add_metric([], state.queue_depth)
        delayed.add_metric([], state.queue_delayed)
        in_progress.add_metric([], state.queue_in_progress)
        oldest.add_metric([], state.queue_oldest_age)
        held.add_metric([], state.held)
        for worker in state.workers:
            connected.add_metric([worker.name], float(worker.connected))
            lost.add_metric([worker.name], float(worker.lost))
        yield from (leader, ready, depth, delayed, in_progress, oldest, held, connected, lost)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            _gauge(
                "jobrelay_leader", "1 while this replica holds the leader Lease (acts), else 0."
            ),
            _gauge("jobrelay_ready", "1 once the caches have synced (/readyz answers 200)."),
            _gauge("jobrelay_workqueue_depth", "Keys waiting to be reconciled now."),
            _gauge("jobrelay_workqueue_delayed", "Keys waiting out a backoff or requeue delay."),
            _gauge("jobrelay_workqueue_in_progress", "Keys being reconciled."),
            _gauge(
                "jobrelay_workqueue_oldest_item_age_seconds",
                "How long the oldest key waiting to be reconciled has waited.",
            ),
            _gauge("jobrelay_held_workloads", "Workloads no worker cluster can take now."),
            _gauge(
                "jobrelay_worker_connected",
                "1 while the worker cluster is connected (its status Connected=True), else 0.",
                ["cluster"],
            ),
            _gauge(
                "jobrelay_worker_lost",
                "1 once the worker cluster is declared lost (its workloads run elsewhere).",
                ["cluster"],
            ),
        )


class Metrics:
    """One controller's metrics and the hooks that update them."""

    def __init__(self, state: Callable[[], ControllerState] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.dispatched = Counter(
            "jobrelay_dispatched_total",
            "Mirrors created on worker clusters (a re-dispatch creates one more).",
            ["cluster"],
            registry=registry,
        )
        self.finished = Counter(
            "jobrelay_finished_total",
            "Workloads finished, by the cluster they ran on last and outcome (succeeded, failed).",
            ["cluster", "outcome"],
            registry=registry,
        )
        self.redispatched = Counter(
            "jobrelay_redispatched_total",
            "Workloads placed again on another cluster (worker lost, drained, pods "
            "unschedulable, mirror gone), by the cluster they left.",
            ["from_cluster"],
            registry=registry,
        )
        self.dispatch_latency = Histogram(
            "jobrelay_dispatch_latency_seconds",
            "From the management object first seen by its informer (unplaced, not suspended) "
            "to its mirror created on a worker.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.status_copy_latency = Histogram(
            "jobrelay_status_copy_latency_seconds",
            "From the mirror's final change seen by the worker's informer to the management "
            "object's finishing status written: one observation per finished workload.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.status_update_latency = Histogram(
            "jobrelay_status_update_latency_seconds",
            "From a mirror change seen by the worker's informer to the management object's "
            "status written: every status copy (running, progress, finish).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.reconcile_duration = Histogram(
            "jobrelay_reconcile_duration_seconds",
            "Time of one reconcile, by kind and result (done, requeue, retry, terminal, error).",
            ["kind", "result"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "jobrelay_reconcile_errors_total",
            "Reconciles that raised an error (retried with backoff).",
            ["kind"],
            registry=registry,
        )
        self.api_requests = Counter(
            "jobrelay_apiserver_requests_total",
            "Requests sent to apiservers, by cluster, Kubernetes verb and HTTP code "
            "(0: no answer).",
            ["cluster", "verb", "code"],
            registry=registry,
        )
        self.api_errors = Counter(
            "jobrelay_apiserver_request_errors_total",
            "Requests that got no answer, 429 or a 5xx, by cluster and verb.",
            ["cluster", "verb"],
            registry=registry,
        )
        self.api_latency = Histogram(
            "jobrelay_apiserver_request_duration_seconds",
            "Apiserver request latency by cluster and verb (watches: until the response headers).",
            ["cluster", "verb"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        if state is not None:
            registry.register(_StateCollector(state))

    def api_request(self, cluster: str, verb: str, code: int, seconds: float) -> None:
        self.api_requests.labels(cluster, verb, str(code)).inc()
        if code == 0 or code == 429 or code >= 500:
            self.api_errors.labels(cluster, verb).inc()
        self.api_latency.labels(cluster, verb).observe(seconds)

    def reconciled(self, kind: str, result: str, seconds: float) -> None:
        self.reconcile_duration.labels(kind, result).observe(seconds)
        if result == "error":
            self.reconcile_errors.labels(kind).inc()

    def render(self) -> bytes:
        """The text exposition format of every metric (``/metrics``)."""
        return generate_latest(self.registry)


def exposed_names(registry: CollectorRegistry) -> frozenset[str]:
    """Every sample name the registry can expose (``_bucket``, ``_count``, ``_sum`` of
    histograms, ``_total`` of counters), whether or not it has a sample yet."""
    names: set[str] = set()
    for family in registry.collect():
        match family.type:
            case "counter":
                names.update({f"{family.name}_total", f"{family.name}_created"})
            case "histogram":
                names.update(
                    f"{family.name}{suffix}" for suffix in ("_bucket", "_count", "_sum", "_created")
                )
            case _:
                names.add(family.name)
    return frozenset(names)


class Stopwatches(Generic[K]):
    """When each key's wait began: its first start counts until it is stopped."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started: dict[K, float] = {}

    def __len__(self) -> int:
        return len(self._started)

    def start(self, key: K) -> None:
        self._started.setdefault(key, self._clock())

    def stop(self, key: K) -> float | None:
        """Seconds since ``key`` was started, forgetting it; None when it was not."""
        started = self._started.pop(key, None)
        return None if started is None else self._clock() - started

    def discard(self, key: K) -> None:
        self._started.pop(key, None)


class StatusCopyClock(Generic[K]):
    """Times mirror changes until the status they lead to is written.

    A change seen while no reconcile of its key runs waits (the earliest
    one counts); a reconcile takes it at its start (``begin``); the first
    status it writes is timed from it (``written``); a reconcile that writes
    nothing drops it (nothing to copy), unless it is to be retried (``end``),
    when the change waits for the next one.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending: dict[K, float] = {}
        self._in_flight: dict[K, float | None] = {}

    def changed(self, key: K) -> None:
        self._pending.setdefault(key, self._clock())

    def begin(self, key: K) -> None:
        self._in_flight[key] = self._pending.pop(key, None)

    def written(self, key: K) -> float | None:
        """Seconds since the change this reconcile copies; None when there is none."""
        since = self._in_flight.get(key)
        if since is None:
            return None
        self._in_flight[key] = None
        return self._clock() - since

    def end(self, key: K, *, retry: bool) -> None:
        since = self._in_flight.pop(key, None)
        if retry and since is not None:
            self._pending[key] = min(since, self._pending.get(key, since))

    def __len__(self) -> int:
        return len(self._pending) + len(self._in_flight)
