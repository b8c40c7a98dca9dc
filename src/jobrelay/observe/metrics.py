"""The controller's Prometheus metrics: every name in one place, no I/O.

Each :class:`Metrics` has a registry of its own (never prometheus-client's
global one), so several controllers can run in one process (tests) and a
scrape shows one controller only; the process and Python collectors are added
to it. Counters and histograms are updated by thin hooks in the controller;
gauges describing state (queue, workers, workloads, leader) are read at scrape
time from a :class:`ControllerState` snapshot (observe/state_metrics.py), so
nothing has to keep them current.

Names follow Prometheus conventions: ``jobrelay_`` prefix, ``_total`` for
counters, ``_seconds`` for durations, base units. ``worker`` is a
WorkerCluster's name (not ``cluster``: Thanos, Mimir and kube-prometheus use
that as an external label); the management cluster's own series (apiserver
requests, watches) carry ``worker=""``, which Prometheus stores as no
``worker`` label at all. prometheus-client's ``_created`` series are off.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from importlib import metadata
from typing import Generic, TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from jobrelay.observe.state_metrics import (
    ControllerState,
    QueueGaugeFigures,
    QueueState,
    StateCollector,
    WorkerCapacityFigures,
    WorkerLiveness,
)

__all__ = [
    "CONTENT_TYPE",
    "MANAGER",
    "ControllerState",
    "Metrics",
    "QueueGaugeFigures",
    "QueueState",
    "StatusCopyClock",
    "Stopwatches",
    "WorkerCapacityFigures",
    "WorkerLiveness",
    "exposed_names",
    "jobrelay_version",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# The ``worker`` label of the management cluster's own series (requests, watches): empty,
# which no WorkerCluster can be named (and Prometheus stores as no label).
MANAGER = ""

# From a burst dispatched in milliseconds to a workload held for minutes.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# One apiserver request, or one reconcile (a few requests).
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# ``_created`` series double every counter's and histogram's series for a value only
# rate() over a restart could use (and it does not): off, process-wide.
disable_created_metrics()  # type: ignore[no-untyped-call]

K = TypeVar("K", bound=Hashable)


def jobrelay_version() -> str:
    """The installed jobrelay's version (``unknown`` when run from a bare source tree)."""
    try:
        return metadata.version("jobrelay")
    except metadata.PackageNotFoundError:
        return "unknown"


class Metrics:
    """One controller's metrics and the hooks that update them."""

    def __init__(self, state: Callable[[], ControllerState] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        if GC_COLLECTOR is not None:
            GCCollector(registry=registry)
        Gauge(
            "jobrelay_build_info",
            "1, labelled with the version of jobrelay this replica runs.",
            ["version"],
            registry=registry,
        ).labels(jobrelay_version()).set(1)
        self.dispatched = Counter(
            "jobrelay_dispatched_total",
            "Mirrors created on worker clusters, by worker and kind (a re-dispatch creates "
            "one more).",
            ["worker", "kind"],
            registry=registry,
        )
        self.finished = Counter(
            "jobrelay_finished_total",
            "Workloads finished, by the worker they ran on last, kind and outcome "
            "(succeeded, failed).",
            ["worker", "kind", "outcome"],
            registry=registry,
        )
        self.redispatched = Counter(
            "jobrelay_redispatched_total",
            "Workloads placed again on another worker (worker lost, drained, pods "
            "unschedulable, mirror gone), by the worker they left and kind.",
            ["from_worker", "kind"],
            registry=registry,
        )
        self.capacity_wait = Histogram(
            "jobrelay_capacity_wait_seconds",
            "From the management object first seen unplaced (not suspended) to its placement "
            "decided: the time it waited for a worker with room, by kind.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.mirror_creation = Histogram(
            "jobrelay_mirror_creation_seconds",
            "From a placement decided to the mirror created on its worker (the POST "
            "answered), by kind: jobrelay's own dispatch time, capacity waits excluded.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.dispatch_latency = Histogram(
            "jobrelay_dispatch_latency_seconds",
            "From the management object first seen by its informer (unplaced, not suspended) "
            "to its mirror created on a worker: capacity wait plus mirror creation.",
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
            'Requests sent to apiservers, by worker ("": the management cluster), '
            "Kubernetes verb and HTTP code (0: no answer).",
            ["worker", "verb", "code"],
            registry=registry,
        )
        self.api_errors = Counter(
            "jobrelay_apiserver_request_errors_total",
            "Requests that got no answer, 429 or a 5xx, by worker and verb.",
            ["worker", "verb"],
            registry=registry,
        )
        self.api_latency = Histogram(
            "jobrelay_apiserver_request_duration_seconds",
            "Apiserver request latency by worker and verb (watches: until the response headers).",
            ["worker", "verb"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self._requests_by: dict[tuple[str, str, int], Counter] = {}
        self._latency_by: dict[tuple[str, str], Histogram] = {}
        self.watch_restarts = Counter(
            "jobrelay_watch_restarts_total",
            "Informer watches started again after a failure (reason rewatch) or from a new "
            "list (reason relist: 410 Gone, an answer too large, an error), by worker "
            '("": the management cluster) and kind.',
            ["worker", "kind", "reason"],
            registry=registry,
        )
        self.dependency_copies = Counter(
            "jobrelay_dependency_copies_total",
            "Copies of workloads' ConfigMaps, Secrets and ServiceAccounts written on workers, "
            "by worker and action (created; updated: new content or a new owner).",
            ["worker", "action"],
            registry=registry,
        )
        self.worker_events_relayed = Counter(
            "jobrelay_worker_events_relayed_total",
            "Occurrences of worker Events relayed onto management objects, by worker.",
            ["worker"],
            registry=registry,
        )
        self.worker_events_suppressed = Counter(
            "jobrelay_worker_events_suppressed_total",
            "Occurrences of worker Events held back by the per-workload rate limit (told "
            "in a summary Event instead), by worker.",
            ["worker"],
            registry=registry,
        )
        if state is not None:
            registry.register(StateCollector(state))

    def api_request(self, worker: str, verb: str, code: int, seconds: float) -> None:
        # Every request passes here: the labelled children are looked up once each.
        counted = self._requests_by.get((worker, verb, code))
        if counted is None:
            counted = self._requests_by[(worker, verb, code)] = self.api_requests.labels(
                worker, verb, str(code)
            )
        counted.inc()
        if code == 0 or code == 429 or code >= 500:
            self.api_errors.labels(worker, verb).inc()
        timed = self._latency_by.get((worker, verb))
        if timed is None:
            timed = self._latency_by[(worker, verb)] = self.api_latency.labels(worker, verb)
        timed.observe(seconds)

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
                names.add(f"{family.name}_total")
            case "histogram":
                names.update(f"{family.name}{suffix}" for suffix in ("_bucket", "_count", "_sum"))
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
