"""Everything an operator can tune about the controller, grouped by concern, with defaults.

These dataclasses are the one place a default is written: ``jobrelay run``
takes its flags' defaults from here, and docs/architecture.md's settings
table lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kinds.catalog import DEFAULT_FINISHED_CONDITIONS, DEFAULT_KINDS
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME


@dataclass(frozen=True)
class QueueSettings:
    # Reconciles running at once; each is I/O-bound (waiting on one apiserver or
    # another). 32 kept a 2-core fleet's apiservers busy without queueing on them.
    concurrency: int = 32
    # Every this many seconds the keys that could need work without a watch event
    # (every mirror's; every unfinished workload's but those suspended and never
    # placed) are reconciled again from the caches (no API reads): a safety net
    # that bounds how long an orphaned mirror can live.
    gc_interval: float = 60.0
    # Per-key backoff of retries (conflicts, caches not synced, errors): the first
    # delay, doubled on each further retry of the key, up to the maximum. A conflict
    # means a newer version is on its way through the watch, which brings the key
    # back by itself: retrying sooner than that only buys another conflict.
    retry_base_delay: float = 0.1
    retry_max_delay: float = 60.0
    # Global token bucket over all retries: sustained retries per second, and burst.
    retry_qps: float = 50.0
    retry_burst: int = 200


@dataclass(frozen=True)
class WorkerSettings:
    # Where WorkerCluster kubeconfig Secrets live, and the leader Lease.
    namespace: str = DEFAULT_NAMESPACE
    # Create a workload's namespace on the worker when it is missing there.
    create_namespaces: bool = True
    # Keep finished mirrors on the workers (for debugging); by default they are
    # deleted once their final status has been copied.
    keep_finished_mirrors: bool = False
    # How long start-up waits for workers to list their mirrors before dispatching,
    # and how long one worker may take to list before it counts as not connected.
    sync_timeout: float = 20.0
    # How often each worker's status (Connected, activeMirrors) is refreshed at most.
    status_interval: float = 10.0
    # A worker that fails or stops answering shows Connected=False (and takes no new
    # workloads) within this many seconds; it is probed every sixth of it.
    health_timeout: float = 30.0
    # A worker not connected for this many seconds is declared lost: its unfinished
    # workloads run elsewhere, counters carried over (MultiKueue's workerLostTimeout).
    lost_timeout: float = 900.0
    # A status step the next one soon carries (only ready/terminating counts moved, a
    # target condition before its final one) waits up to this many seconds to be
    # copied with it: fewer writes, as the built-in Job controller batches (0: never).
    status_batch_period: float = 1.0
    # Retry pacing for a mirror a worker rejects (quota, admission, unreachable).
    rejected_retry: float = 30.0
    # Let worker kubeconfigs use exec credential plugins: anyone who may write Secrets
    # in the namespace can then run commands in the controller. Files stay refused.
    allow_exec_credentials: bool = False


@dataclass(frozen=True)
class KindSettings:
    # Kind.version.group of each workload kind to dispatch; a kind without a
    # dedicated adapter gets the generic one.
    names: tuple[str, ...] = DEFAULT_KINDS
    # Condition types that, once True, finish a workload of a generic kind.
    finished_conditions: tuple[str, ...] = DEFAULT_FINISHED_CONDITIONS


@dataclass(frozen=True)
class PlacementSettings:
    # Retry pacing for a workload no worker can take now.
    unplaceable_retry: float = 15.0
    # Seconds a mirror's pods may stay unschedulable before it moves elsewhere (0: never).
    pending_timeout: float = 300.0


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


_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def lease_name_for(controller_name: str) -> str:
    """A DNS-safe Lease name from a controller name: ``jobrelay.dev/relay`` -> ``jobrelay-relay``.

    The domain's first label and the path, so each controller name on one
    manager has a Lease of its own.
    """
    domain, _, path = controller_name.lower().partition("/")
    parts = [domain.split(".", 1)[0], path] if path else [domain]
    name = _NOT_DNS.sub("-", "-".join(parts)).strip("-")[:63].strip("-")
    return name or "jobrelay"


@dataclass(frozen=True)
class ControllerOptions:
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # Which management cluster this is, as the label jobrelay.dev/origin on every mirror:
    # only mirrors of this origin are watched, adopted, copied or deleted. "" means the
    # UID of the manager's kube-system namespace, looked up at start.
    origin: str = ""
    queue: QueueSettings = field(default_factory=QueueSettings)
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    kinds: KindSettings = field(default_factory=KindSettings)
    placement: PlacementSettings = field(default_factory=PlacementSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    # HOST:PORT of /healthz and /readyz; "" serves none (two local replicas never
    # collide by default); port 0 picks a free port, logged at start.
    health_address: str = ""
    # HOST:PORT of /metrics, /healthz and /readyz; "" serves none; port 0 picks a free
    # port, logged at start (tests and two replicas on one machine).
    metrics_address: str = ":8080"
    api: ApiSettings = field(default_factory=ApiSettings)

    @property
    def lease_name(self) -> str:
        return self.leader_election.lease_name or lease_name_for(self.controller_name)
