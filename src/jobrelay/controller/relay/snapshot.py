"""What one reconcile knows: the management object, its mirrors, the workers, the time.

Built by the reconciler from the caches (plus fresh reads when a decision asks
for them); read by :func:`~jobrelay.controller.relay.decide.decide`, which is
pure. Frozen, so a decision cannot change what it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Fleet-wide queueing's verdicts are admission's; the snapshot carries them.
from jobrelay.admission.queue_model import Preempt, QueueHold
from jobrelay.controller.relay.leaving import Leaving
from jobrelay.dependencies.copy_rules import Copy, Source
from jobrelay.dependencies.template_references import Dependency
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.finished_mirrors import FinishedMirrorTtl
from jobrelay.placement.admission_probes import AdmissionVerdict
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.claims import WorkerClaims
from jobrelay.placement.model import Cluster
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.placement.workload import Choice, Invalid
from jobrelay.vocabulary.autoscaling_spec import WorkerAutoscaling
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.workercluster import DrainMode

__all__ = [
    "Needed", "Preempt", "ProvisioningRequestSeen", "QueueHold", "Settings", "Snapshot",
    "WorkerSnapshot", "placement_cluster",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Settings:
    """The relay's options: what decisions (and the executor) depend on, each named like
    its flag. ``ControllerOptions.relay`` is one (its defaults are written in
    controller/options.py only), with the controller's own name and origin."""

    controller_name: str
    origin: str
    # A finished mirror is kept for ever, or this many seconds after its workload
    # finished (0: deleted at once): kinds/finished_mirrors.py.
    keep_finished_mirrors: bool
    finished_mirror_ttl: float
    # Requeue delay, in seconds, for a workload no worker can take now.
    unplaceable_retry: float
    # Seconds a mirror's pods may stay unschedulable before it moves to a cluster
    # that fits (0: never).
    pending_timeout: float
    # Seconds a passing status step may wait to be copied in a batch with the next (0: never).
    status_batch_period: float
    # The executor's: create a workload's namespace on a worker that lacks it, and the
    # retry pacing (seconds) of a mirror a worker rejects.
    create_namespaces: bool
    rejected_retry: float
    # A Normal ``Completed`` Event on each workload that succeeds (the status's finished
    # condition says it already; off by default: it cost every Job a manager write).
    completed_events: bool = False
    # Moves after worker-side failures (kinds/pod_faults.py) a workload may make unless its
    # jobrelay.dev/max-moves says otherwise, and seconds a worker that failed it is avoided.
    max_moves: int = 3
    failed_worker_avoid_for: float = 600.0
    # Autoscaled workers asked at once for capacity a workload fits nowhere now.
    provisioning_candidates: int = 2

    @property
    def finished_mirrors(self) -> FinishedMirrorTtl:
        """How long a finished mirror is kept (both flags in one)."""
        return FinishedMirrorTtl(self.finished_mirror_ttl, forever=self.keep_finished_mirrors)


@dataclass(frozen=True, slots=True)
class UnrecordedMirror:
    """A mirror this process created whose record (``jobrelay.dev/mirrors``) is not
    written yet: the create's own answer names the one followed meanwhile."""

    run: int
    uid: str
    # Seconds since it was created.
    age: float


@dataclass(frozen=True, slots=True)
class ProvisioningRequestSeen:
    """One of jobrelay's ProvisioningRequests for this workload on a worker, as its feed
    has it (controller/relay/provisioning_view.py builds it)."""

    name: str
    namespace: str
    # The UID of the workload it was made for (an earlier object of the name: not this one).
    workload_uid: str
    class_name: str
    # Its PodTemplates' names, deleted with it.
    templates: tuple[str, ...]
    # The slim request, for its answer (steps/provisioning.py ``answer_of``).
    request: JsonObj
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class WorkerSnapshot:
    """One registered worker as this reconcile sees it."""

    name: str
    # This kind's mirror cache has listed: what it lacks is really absent.
    synced: bool
    # Usable for new placements: its client works and its caches are synced.
    connected: bool
    cordoned: bool = False
    # Not connected for longer than the lost timeout: its workloads move elsewhere.
    lost: bool = False
    # Not connected, not lost yet: seconds until it is declared lost.
    lost_in: float | None = None
    # Its WorkerCluster's spec.drain (None when not draining).
    drain: DrainMode | None = None
    # Unfinished mirrors there (every kind) plus placements not visible yet.
    load: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    # The cached mirror with this key (the cache holds only objects labelled ours).
    mirror: JsonObj | None = None
    # A fresh read of the same name on this worker, when one was asked for:
    # ``read_done`` tells an absent object (None) from "not read".
    read: JsonObj | None = None
    read_done: bool = False
    # We created the mirror of this management object there; the cache does not show it yet.
    create_pending: bool = False
    # The mirror of this key this process created there, not recorded on the object yet.
    unrecorded: UnrecordedMirror | None = None
    # The last state of a mirror with this key that was deleted there (its watch's
    # delete event), for the work it did before it went.
    vanished: JsonObj | None = None
    # Its nodes and what is requested and reserved on them (None: not known yet, or
    # ``blind``: its nodes cannot be read, so placement there skips the fit check).
    capacity: WorkerCapacity | None = None
    blind: bool = False
    # The pods of this key's mirror there: whether one is on a node or running now, and
    # for how many seconds the earliest unbound one has been unschedulable.
    pods_started: bool = False
    unschedulable_for: float | None = None
    # Why one of this key's pods there cannot run for a worker-side cause (kinds/pod_faults.py).
    worker_fault: str | None = None
    # Its namespaces, and which are open to this manager (placement/namespaces.py); the
    # reconciler always sets it (None: not judged, as in tests of other rules).
    namespaces: WorkerNamespaces | None = None
    # Our copies there of this workload's dependencies, by name (``configmap/settings``).
    copies: Mapping[str, Copy] = field(default_factory=dict)
    # Those of its dependencies a copy found held there by an object jobrelay did not make.
    foreign_dependencies: tuple[str, ...] = ()
    # Its PersistentVolumeClaims (placement/claims.py); the reconciler always sets it.
    claims: WorkerClaims | None = None
    # Its WorkerCluster's spec.autoscaling (None: it does not grow), this workload's
    # ProvisioningRequests there, and how many of jobrelay's requests are there in all.
    autoscaling: WorkerAutoscaling | None = None
    provisioning: tuple[ProvisioningRequestSeen, ...] = ()
    open_requests: int = 0

    @property
    def seen(self) -> JsonObj | None:
        """The object of this name there: the fresh read if there was one, else the cache."""
        return self.read if self.read_done else self.mirror


def placement_cluster(worker: WorkerSnapshot) -> Cluster:
    """The worker as placement's filters and scores see it: the one mapping, read by a
    reconcile's decision and by the pass over held workloads alike, so the pass wakes
    exactly the workloads a decision would place.

    Connected (placement's ``Connected`` filter) means it may take new work now: its
    client answers, this kind's mirror cache has listed (what it lacks is really absent)
    and it is not lost.
    """
    return Cluster(
        name=worker.name,
        labels=worker.labels,
        connected=worker.connected and worker.synced and not worker.lost,
        lost=worker.lost,
        cordoned=worker.cordoned,
        draining=bool(worker.drain),
        capacity=worker.capacity,
        blind=worker.blind,
        load=worker.load,
        namespaces=worker.namespaces,
        foreign_dependencies=worker.foreign_dependencies,
        claims=worker.claims,
    )


@dataclass(frozen=True, slots=True)
class Needed:
    """One object the workload's pods need in their namespace, and the manager's (None:
    missing there, or ``closed``)."""

    dependency: Dependency
    source: Source | None
    # The controller does not read that kind in that namespace (a Secret in a namespace no
    # admin opened to Secret copying): it cannot know it, nor copy it.
    closed: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    key: WorkloadKey
    kind: WorkloadKind
    settings: Settings
    # The management object (None: gone); from the cache unless ``fresh``.
    obj: JsonObj | None
    workers: tuple[WorkerSnapshot, ...]
    now: str  # RFC 3339, for any timestamp a status needs
    fresh: bool = False
    # UIDs of mirrors we deleted that the caches still show.
    deleting: frozenset[str] = frozenset()
    # Whether a fresh read of this name on every connected worker was made
    # (after a create met a namesake): then ``read`` says who holds what.
    probed: bool = False
    # What the manager's admission says of pods made from the object's pod templates
    # (a dry-run create), once asked: a workload is first placed only when allowed.
    admission: AdmissionVerdict | None = None
    # The namespace's placement policy (its annotations), or why it cannot be read.
    policy: Choice | Invalid = field(default_factory=Choice)
    # Why the workload was last reported held (a signature of the decision), so the
    # user is told again only when the reason changes.
    held: str | None = None
    # A move this controller began (the mirror is being deleted): from which worker, why.
    leaving: Leaving | None = None
    # Seconds a passing status step of this workload has waited to be copied in a batch
    # (since the first decision that let it wait); None when none waits.
    batching_for: float | None = None
    # What its pod templates name (dependencies/template_references.py), each as the manager has it;
    # None: not judged (as in tests of other rules).
    dependencies: tuple[Needed, ...] | None = None
    # The manager's caches of ConfigMaps, Secrets and ServiceAccounts have listed: what
    # they lack is really missing.
    dependencies_listed: bool = True
    # Fleet-wide queues and the namespace's ResourceQuota, for a workload not placed yet:
    # why they hold it (None: admitted, or not queued and under no quota).
    queue_hold: QueueHold | None = None
    # A placed workload an admission pass chose to preempt (None: none did).
    preempt: Preempt | None = None
    # Whether this process marked it preempted and told it so (a Warning Event); when not,
    # a controller restarted since the mark tells it as its run ends.
    told_preempted: bool = False
    # Seconds since the management object finished, by the time its status gives
    # (None: not finished, or no time given): when its kept mirror goes.
    finished_for: float | None = None
    # Seconds since it moved away from each worker after a worker-side failure there
    # (its jobrelay.dev/worker-failures record, vocabulary/failure_ages.py).
    failure_ages: Mapping[str, float] = field(default_factory=dict)

    def worker(self, name: str) -> WorkerSnapshot | None:
        for found in self.workers:  # a loop, not next(genexpr): asked several times a decision
            if found.name == name:
                return found
        return None
