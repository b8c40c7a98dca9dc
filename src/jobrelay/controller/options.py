"""Everything an operator can tune about the controller, grouped by concern, with defaults.

One name per setting from flag to use: ``ControllerOptions`` composes the
option dataclasses of the layers that use them (the work queue's
:class:`~jobrelay.kube.queueing.QueueOptions`, the worker pool's
:class:`~jobrelay.fleet.workers.PoolOptions`, the relay's
:class:`~jobrelay.controller.relay.snapshot.Settings`), not copies of them, and
each field is named like its flag (``--retry-qps`` is ``queue.retry_qps``,
``--worker-sync-timeout`` is ``workers.sync_timeout``). The controller's
defaults are written here only: ``jobrelay run`` takes its flags' defaults from
:data:`DEFAULTS`, and docs/architecture.md's settings table lists them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from jobrelay.controller.relay.snapshot import Settings
from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.fleet.workers import PoolOptions
from jobrelay.kinds.catalog import DEFAULT_FINISHED_CONDITIONS, DEFAULT_KINDS
from jobrelay.kube.queueing import QueueOptions
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.vocabulary.leases import lease_name_for
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME


def queue_defaults() -> QueueOptions:
    """The controller's work queue pacing (a bare queue's differ)."""
    return QueueOptions(
        # Per-key backoff of retries (conflicts, caches not synced, errors): the first
        # delay, doubled on each further retry of the key, up to the maximum. A conflict
        # means a newer version is on its way through the watch, which brings the key
        # back by itself: retrying sooner than that only buys another conflict.
        retry_base_delay=0.1,
        retry_max_delay=60.0,
        # Global token bucket over all retries: sustained retries per second, and burst.
        retry_qps=50.0,
        retry_burst=200,
    )


def worker_defaults() -> PoolOptions:
    """The worker pool's options (its controller_name and origin: ControllerOptions')."""
    return PoolOptions(
        # Where WorkerCluster kubeconfig Secrets live, and the leader Lease (--namespace).
        namespace=DEFAULT_NAMESPACE,
        controller_name=DEFAULT_CONTROLLER_NAME,
        origin="",
        # How long start-up waits for workers to list their mirrors before dispatching,
        # and how long one worker may take to list before it counts as not connected.
        sync_timeout=20.0,
        # How often each worker's status (Connected, activeMirrors) is refreshed at most.
        status_interval=10.0,
        # A worker that fails or stops answering shows Connected=False (and takes no new
        # workloads) within this many seconds; it is probed every sixth of it.
        health_timeout=30.0,
        # A worker not connected for this many seconds is declared lost: its unfinished
        # workloads run elsewhere, counters carried over (MultiKueue's workerLostTimeout).
        lost_timeout=900.0,
        # Let worker kubeconfigs use exec credential plugins: anyone who may write Secrets
        # in the namespace can then run commands in the controller. Files stay refused.
        allow_exec_credentials=False,
    )


def relay_defaults() -> Settings:
    """The relay's options (its controller_name and origin: ControllerOptions')."""
    return Settings(
        controller_name=DEFAULT_CONTROLLER_NAME,
        origin="",
        # Keep finished mirrors (and their pods, with their logs) on the workers for
        # ever; by default each is deleted this many seconds after its workload finished
        # (0: once its final status has been copied), or sooner when the workload's own
        # ttlSecondsAfterFinished asks.
        keep_finished_mirrors=False,
        finished_mirror_ttl=3600.0,
        # Retry pacing for a workload no worker can take now.
        unplaceable_retry=15.0,
        # Seconds a mirror's pods may stay unschedulable before it moves elsewhere (0: never).
        pending_timeout=300.0,
        # A status step the next one soon carries (only ready/terminating counts moved, a
        # run's start, a target condition before its final one) waits up to this many seconds to be
        # copied in a batch with it: fewer writes, as the built-in Job controller
        # batches (0: never).
        status_batch_period=1.0,
        # Create a workload's namespace on the worker when it is missing there.
        create_namespaces=True,
        # Retry pacing for a mirror a worker rejects (quota, admission, unreachable).
        rejected_retry=30.0,
        # A Normal Completed Event on each workload that succeeds: its finished condition
        # says the same, so off (a manager write per Job less).
        completed_events=False,
        # Moves after worker-side failures a workload may make, unless it says otherwise
        # (jobrelay.dev/max-moves), and how long a worker that failed it is avoided.
        max_moves=3,
        failed_worker_avoid_for=600.0,
        # Autoscaled workers asked at once for capacity a workload fits nowhere now.
        provisioning_candidates=2,
    )


@dataclass(frozen=True)
class KindSettings:
    # Kind.version.group of each workload kind to dispatch; a kind without a
    # dedicated adapter gets the generic one.
    names: tuple[str, ...] = DEFAULT_KINDS
    # Condition types that, once True, finish a workload of a generic kind.
    finished_conditions: tuple[str, ...] = DEFAULT_FINISHED_CONDITIONS
    # (Kind.version.group, value): the managedBy value a kind claims (`--kind NAME=VALUE`);
    # a kind not named here claims the controller's name.
    managed_by: tuple[tuple[str, str], ...] = ()
    # (Kind.version.group, spec.runPolicy.managedBy or spec.managedBy): where a kind
    # without an adapter keeps managedBy (`--managed-by-field`); default spec.managedBy.
    managed_by_fields: tuple[tuple[str, str], ...] = ()

    def claimed(self, name: str, controller_name: str) -> str:
        """The managedBy value the kind ``name`` dispatches."""
        return dict(self.managed_by).get(name) or controller_name


@dataclass(frozen=True)
class LeaderElectionSettings:
    # Two replicas may run; only the one holding the Lease acts, the other keeps
    # warm caches. Off: this process acts alone (never run two so).
    enabled: bool = True
    # The Lease's name in the workers' namespace; None: lease_name_for(controller name).
    lease_name: str | None = None
    # Seconds (client-go's defaults). A standby takes over a lease not renewed for
    # lease_duration; the leader stops acting when it could not renew it within
    # renew_deadline (< lease_duration); both try every retry_period.
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class ControllerOptions:
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # Which management cluster this is, as the label jobrelay.dev/origin on every mirror:
    # only mirrors of this origin are watched, adopted, copied or deleted. "" means the
    # origin recorded in the controller's namespace, else (the first start) the UID of
    # the manager's kube-system namespace, then recorded (fleet/origin_rules.py).
    origin: str = ""
    # Reconciles running at once; each is I/O-bound (waiting on one apiserver or
    # another). 32 kept a 2-core fleet's apiservers busy without queueing on them.
    concurrency: int = 32
    # Every this many seconds the keys that could need work without a watch event
    # (every mirror's; every unfinished workload's but those suspended and never
    # placed) are reconciled again from the caches (no API reads): a safety net
    # that bounds how long an orphaned mirror can live.
    gc_interval: float = 60.0
    queue: QueueOptions = field(default_factory=queue_defaults)
    # The pool's and the relay's controller_name and origin are always the two above.
    workers: PoolOptions = field(default_factory=worker_defaults)
    relay: Settings = field(default_factory=relay_defaults)
    kinds: KindSettings = field(default_factory=KindSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    # HOST:PORT of /healthz and /readyz; "" serves none (two local replicas never
    # collide by default); port 0 picks a free port, logged at start.
    health_address: str = ""
    # HOST:PORT of /metrics, /healthz and /readyz; "" serves none; port 0 picks a free
    # port, logged at start (tests and two replicas on one machine).
    metrics_address: str = ":8080"
    api: ApiSettings = field(default_factory=ApiSettings)
    # Apply the WorkerCluster CRD at start (the local fleet and tests). Off: the chart's
    # crds/ ship it and the controller needs no cluster-wide write on CRDs; it checks
    # the CRD is served and stops with what to do when it is not.
    install_crds: bool = False
    # The namespaces whose Secrets the controller reads, to copy them to workers
    # (docs/dependencies.md): an admin opened each to Secret copying (the chart's Role
    # there). None reads them in every namespace (`jobrelay run` with an admin's
    # kubeconfig); a workload elsewhere that needs a Secret is held (MissingDependency).
    dependency_secret_namespaces: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # One name, one value: the controller's identity is the pool's and the relay's.
        for part in ("workers", "relay"):
            options = getattr(self, part)
            if (options.controller_name, options.origin) != (self.controller_name, self.origin):
                identity = {"controller_name": self.controller_name, "origin": self.origin}
                object.__setattr__(self, part, dataclasses.replace(options, **identity))

    @property
    def lease_name(self) -> str:
        return self.leader_election.lease_name or lease_name_for(self.controller_name)


# The defaults, as ``jobrelay run`` shows them.
DEFAULTS = ControllerOptions()
