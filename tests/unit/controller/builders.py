"""Small builders for the decision's input: management objects, mirrors, workers, snapshots.

Everything is a plain JSON object as the caches hold it, so a test reads like
the state it sets up: ``job(placed="w1")``, ``mirror(job(), status=RUNNING)``,
``worker("w1", mirror=...)``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    CreateMirror,
    DeleteMirror,
    Log,
    Outcome,
    PatchMirror,
    Place,
    RecordEvent,
    RequeueAfter,
    Retry,
    Terminal,
    WriteStatus,
)
from jobrelay.controller.relay.snapshot import Settings, Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.mirror_record import RECORD_AFTER
from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kinds.generic import GenericKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kinds.mirrors import mirror_metadata, origin_uid, run_of
from jobrelay.placement.admission_probes import ALLOWED, AdmissionVerdict
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.vocabulary.failure_ages import worker_failure_ages
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    MIRROR_LABEL,
    MIRRORS_ANNOTATION,
    ORIGIN_UID_LABEL,
    PLACEMENTS_ANNOTATION,
)
from jobrelay.vocabulary.outcome import Lane
from jobrelay.vocabulary.placement import placements_of
from jobrelay.vocabulary.resource import Resource
from jobrelay.vocabulary.workercluster import drain_mode

CONTROLLER = "jobrelay.dev/relay"
NAMESPACE = "team-a"
NAME = "train"
UID = "uid-1"
OLD_UID = "uid-0"  # an earlier object of the same name
RV = "10"
NOW = "2026-03-01T12:10:00Z"
T_START = "2026-03-01T12:00:00Z"
T_END = "2026-03-01T12:05:00Z"

JOB = JobKind()
JOBSET = JobSetKind()
WIDGET = GenericKind(Resource("example.com", "v1", "widgets", "Widget"))

SETTINGS = Settings(
    controller_name=CONTROLLER,
    origin="manager",
    keep_finished_mirrors=False,
    # Most rule tables read a finished mirror deleted at once (ttl tables set their own).
    finished_mirror_ttl=0.0,
    unplaceable_retry=15.0,
    pending_timeout=300.0,
    status_batch_period=0.0,
    create_namespaces=True,
    rejected_retry=30.0,
)
KEEP = dataclasses.replace(SETTINGS, keep_finished_mirrors=True)


def key_of(kind: WorkloadKind = JOB) -> WorkloadKey:
    return WorkloadKey(kind.name, f"{NAMESPACE}/{NAME}")


# -- statuses (Job) -------------------------------------------------------------


def condition(kind: str, status: str = "True", reason: str = "", message: str = "") -> JsonObj:
    return {
        "type": kind,
        "status": status,
        "reason": reason or kind,
        "message": message,
        "lastProbeTime": T_END,
        "lastTransitionTime": T_END,
    }


RUNNING: JsonObj = {"startTime": T_START, "active": 1, "ready": 1}
COMPLETE: JsonObj = {
    "startTime": T_START,
    "completionTime": T_END,
    "succeeded": 1,
    "conditions": [
        condition("SuccessCriteriaMet", reason="CompletionsReached"),
        condition("Complete", reason="CompletionsReached"),
    ],
}
FAILED: JsonObj = {
    "startTime": T_START,
    "failed": 7,
    "conditions": [
        condition("FailureTarget", reason="BackoffLimitExceeded", message="too many failures"),
        condition("Failed", reason="BackoffLimitExceeded", message="too many failures"),
    ],
}


# -- objects --------------------------------------------------------------------


def job(
    *,
    uid: str = UID,
    rv: str = RV,
    placed: str | None = None,
    history: tuple[str, ...] = (),
    suspend: bool = False,
    parallelism: int = 1,
    completions: int | None = 1,
    status: JsonObj | None = None,
    deleting: bool = False,
    annotations: dict[str, str] | None = None,
) -> JsonObj:
    """A management Job as its cache holds it; ``history``: every placement, in order."""
    metadata: JsonObj = {
        "name": NAME,
        "namespace": NAMESPACE,
        "uid": uid,
        "resourceVersion": rv,
        "labels": {"team": "a"},
    }
    if placed is not None:
        # As jobrelay places (a cluster without its history is a preset placement).
        metadata["annotations"] = {CLUSTER_ANNOTATION: placed}
        if placed:
            metadata["annotations"][PLACEMENTS_ANNOTATION] = placed
    if history:
        metadata.setdefault("annotations", {})[PLACEMENTS_ANNOTATION] = ",".join(history)
    if annotations:
        metadata.setdefault("annotations", {}).update(annotations)
    if deleting:
        metadata["deletionTimestamp"] = NOW
    obj: JsonObj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "managedBy": CONTROLLER,
            "suspend": suspend,
            "parallelism": parallelism,
            "completions": completions,
            "backoffLimit": 6,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def jobset(
    *,
    uid: str = UID,
    placed: str | None = None,
    suspend: bool = False,
    status: JsonObj | None = None,
) -> JsonObj:
    metadata: JsonObj = {"name": NAME, "namespace": NAMESPACE, "uid": uid, "resourceVersion": RV}
    if placed is not None:
        metadata["annotations"] = {CLUSTER_ANNOTATION: placed}
        if placed:
            metadata["annotations"][PLACEMENTS_ANNOTATION] = placed
    obj: JsonObj = {
        "apiVersion": JOBSET.ref.api_version,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "managedBy": CONTROLLER,
            "suspend": suspend,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"spec": {"parallelism": 2, "template": {"spec": {}}}},
                }
            ],
        },
    }
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def widget(
    *,
    uid: str = UID,
    placed: str | None = None,
    spec: JsonObj | None = None,
    status: JsonObj | None = None,
) -> JsonObj:
    metadata: JsonObj = {"name": NAME, "namespace": NAMESPACE, "uid": uid, "resourceVersion": RV}
    if placed is not None:
        metadata["annotations"] = {CLUSTER_ANNOTATION: placed}
        if placed:
            metadata["annotations"][PLACEMENTS_ANNOTATION] = placed
    obj: JsonObj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": metadata,
        "spec": {"managedBy": CONTROLLER, "size": 3, **(spec or {})},
    }
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def mirror(
    obj: JsonObj,
    *,
    kind: WorkloadKind = JOB,
    uid: str = "m-1",
    origin_uid: str | None = None,
    status: JsonObj | None = None,
    spec: JsonObj | None = None,
    deleting: bool = False,
    run: int = 1,
) -> JsonObj:
    """Our mirror of ``obj`` (run ``run``) as a worker's cache holds it (slimmed by the kind).

    ``origin_uid`` makes it the mirror of another object of the same name; the
    mirror carries over what ``obj``'s status shows, as a real one would.
    """
    body = kind.build_mirror(obj, controller_name=CONTROLLER, origin="manager", run=run, now=NOW)
    metadata = body["metadata"]
    metadata["uid"] = uid
    metadata["resourceVersion"] = "500"
    if origin_uid is not None:
        metadata["labels"][ORIGIN_UID_LABEL] = origin_uid
    if deleting:
        metadata["deletionTimestamp"] = NOW
    if spec:
        body["spec"] = {**body["spec"], **spec}
    if status is not None:
        body["status"] = copy.deepcopy(status)
    return kind.slim_mirror(body)


def foreign(obj: JsonObj, *, uid: str = "f-1") -> JsonObj:
    """A namesake on a worker that jobrelay did not create (no mirror label)."""
    metadata = mirror_metadata(obj, controller_name=CONTROLLER, origin="manager")
    labels = {
        k: v for k, v in metadata["labels"].items() if k not in (MIRROR_LABEL, ORIGIN_UID_LABEL)
    }
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": uid, "labels": labels},
        "spec": {},
    }


_NOT_READ = object()


def worker(
    name: str,
    *,
    synced: bool = True,
    connected: bool = True,
    cordoned: bool = False,
    load: int = 0,
    mirror: JsonObj | None = None,
    read: Any = _NOT_READ,
    create_pending: bool = False,
    lost: bool = False,
    lost_in: float | None = None,
    drain: str = "",
    vanished: JsonObj | None = None,
    capacity: WorkerCapacity | None = None,
    pods_started: bool = False,
    unschedulable_for: float | None = None,
    namespaces: WorkerNamespaces | None = None,
    worker_fault: str | None = None,
) -> WorkerSnapshot:
    """A worker; pass ``read=`` (an object or None) for a fresh read of the name there.

    ``lost=True`` is a worker declared lost (so not connected); ``lost_in`` one not
    connected that will be in that many seconds. Without ``capacity`` the worker is
    blind (its nodes unread): placement there is by load alone.
    """
    read_done = read is not _NOT_READ
    return WorkerSnapshot(
        name=name,
        synced=synced,
        connected=connected and not lost and lost_in is None,
        cordoned=cordoned,
        lost=lost,
        lost_in=0.0 if lost else lost_in,
        drain=drain_mode(drain),
        vanished=vanished,
        load=load,
        capacity=capacity,
        blind=capacity is None,
        pods_started=pods_started,
        unschedulable_for=unschedulable_for,
        worker_fault=worker_fault,
        mirror=mirror,
        read=read if read_done else None,
        read_done=read_done,
        create_pending=create_pending,
        namespaces=namespaces,
    )


def snapshot(
    obj: JsonObj | None,
    *workers: WorkerSnapshot,
    kind: WorkloadKind = JOB,
    settings: Settings = SETTINGS,
    fresh: bool = False,
    probed: bool = False,
    deleting: frozenset[str] = frozenset(),
    admission: AdmissionVerdict | None = ALLOWED,
    record: bool = True,
) -> Snapshot:
    """A snapshot whose workload's pods the manager admits, unless ``admission`` says
    otherwise (None: not asked yet).

    With ``record`` (and no ``jobrelay.dev/mirrors`` of its own), the object records
    the mirrors of it the workers show as the ones jobrelay created (one per run, the
    one on its placed worker first): what it would say had jobrelay made them."""
    if record and obj is not None and MIRRORS_ANNOTATION not in Meta(obj).annotations:
        obj = recording(obj, *workers)
    return Snapshot(
        key=key_of(kind),
        kind=kind,
        settings=settings,
        obj=obj,
        workers=tuple(workers),
        now=NOW,
        failure_ages=worker_failure_ages(obj, NOW),  # as the reconciler reads them
        fresh=fresh,
        deleting=deleting,
        probed=probed,
        admission=admission,
    )


def recording(obj: JsonObj, *workers: WorkerSnapshot) -> JsonObj:
    """``obj`` recording the workers' mirrors of it as created by jobrelay (see snapshot)."""
    history = placements_of(obj)
    placed_first = sorted(workers, key=lambda w: not history or w.name != history[-1])
    records: dict[int, str] = {}
    for w in placed_first:
        for seen in (w.mirror, w.read, w.vanished):
            if seen is not None and origin_uid(seen) == Meta(obj).uid:
                records.setdefault(run_of(seen), f"{w.name}:{Meta(seen).uid}")
    if not records:
        return obj
    text = ",".join(f"{run}:{entry}" for run, entry in sorted(records.items()))
    metadata = dict(obj["metadata"])
    metadata["annotations"] = {**(metadata.get("annotations") or {}), MIRRORS_ANNOTATION: text}
    return {**obj, "metadata": metadata}


# -- reading plans ----------------------------------------------------------------


def summary(action: Action) -> tuple[Any, ...]:
    """An action's key fields: what a table row states about it."""
    match action:
        case Place():
            if action.history and action.history != (action.cluster,):
                return ("Place", action.cluster, action.resource_version, action.history)
            return ("Place", action.cluster, action.resource_version)
        case CreateMirror():
            return ("Create", action.cluster, action.origin_uid)
        case PatchMirror():
            return ("Patch", action.cluster, action.patch)
        case DeleteMirror():
            return ("Delete", action.cluster, action.uid)
        case WriteStatus():
            true = sorted(
                c["type"]
                for c in action.status.get("conditions") or []
                if c.get("status") == "True"
            )
            return ("Status", *true)
        case RecordEvent():
            return ("Event", action.type, action.reason)
        case Log():
            return ("Log", action.level)
        case Annotate():
            return ("Annotate", *sorted(action.annotations))
    raise AssertionError(f"unknown action {action!r}")


# What a plan that creates a mirror ends with: a look when its record is due (its
# create's echo is not looked at).
CREATED_LOOK = RequeueAfter(RECORD_AFTER, Lane.BACKGROUND)


def outcome_summary(outcome: Outcome) -> Any:
    """An outcome, with free text (a Retry's why, a Terminal's message) left out."""
    match outcome:
        case Retry():
            return Retry("")
        case Terminal():
            return Terminal(outcome.reason, "", outcome.retry_after)
    return outcome
