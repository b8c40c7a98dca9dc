"""Table tests of decide(): one row per situation a management object and its mirrors can be in.

In the style of Kueue's multikueue workload_test.go: each row names the
workers as the reconcile sees them (connected, synced, cordoned, load, the
cached mirror, a fresh read), the management object, the flags (fresh,
probed, deleting) and what the decision must ask for: the actions (by type
and key fields, see builders.summary), the Events, and the outcome.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from tests.unit.controller.builders import (
    COMPLETE,
    CREATED_LOOK,
    FAILED,
    JOB,
    JOBSET,
    KEEP,
    NOW,
    OLD_UID,
    RUNNING,
    RV,
    SETTINGS,
    T_END,
    T_START,
    UID,
    WIDGET,
    foreign,
    job,
    jobset,
    mirror,
    outcome_summary,
    snapshot,
    summary,
    widget,
    worker,
)

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    CreateMirror,
    DeleteMirror,
    Done,
    Outcome,
    PatchMirror,
    Place,
    Plan,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
    Terminal,
    WriteStatus,
)
from jobrelay.controller.relay.snapshot import Settings, WorkerSnapshot
from jobrelay.controller.relay.steps.mirror_creation import CREATE_PENDING_LOOK
from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.placement.admission_probes import ALLOWED, AdmissionVerdict
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.merge_patch import apply_merge_patch
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    MIRRORS_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    ORIGIN_UID_LABEL,
)
from jobrelay.vocabulary.placement import placement_of, placements_of, with_placement

UNPLACEABLE = RequeueAfter(SETTINGS.unplaceable_retry)
# What a held workload's plan does besides its Event: a log line, and the reason on the object.
HELD = (("Annotate", NOT_PLACED_ANNOTATION), ("Log", "info"))
# Its namespace (team-a) on a worker: labelled by a tenant there, or open to this manager.
CLOSED = WorkerNamespaces("manager", synced=True, origins={"team-a": None})
OPEN = WorkerNamespaces("manager", synced=True, origins={"team-a": "manager"})


class RefusingJobKind(JobKind):
    """A Job kind whose status rules refuse every write: only a jobrelay bug could lead there."""

    def status_violations(self, old: JsonObj, new: JsonObj) -> list[str]:
        del old, new
        return ["status.startTime: cannot be changed [rule 14]"]


@dataclass(frozen=True)
class Case:
    obj: JsonObj | None
    workers: tuple[WorkerSnapshot, ...]
    actions: tuple[tuple[Any, ...], ...]  # every action but RecordEvent, in order
    outcome: Outcome
    events: tuple[tuple[str, str], ...] = ()  # (type, reason), in order
    kind: WorkloadKind = JOB
    settings: Settings = SETTINGS
    fresh: bool = False
    probed: bool = False
    deleting: frozenset[str] = frozenset()
    release: bool | None = None  # None: not stated by the row
    admission: AdmissionVerdict | None = ALLOWED
    # The object records the workers' mirrors of it as jobrelay's (builders.snapshot).
    record: bool = True


w = worker


def condition_true(kind: str) -> JsonObj:
    return {"type": kind, "status": "True", "reason": kind, "lastTransitionTime": T_END}


PLACED = job(placed="w1", status=RUNNING)
AT_REST: JsonObj = {"startTime": T_START, "active": 0}
PENDING: JsonObj = {"startTime": T_START, "active": 1, "ready": 0}
ONE_DONE_OF_THREE: JsonObj = {"startTime": T_START, "active": 1, "ready": 1, "succeeded": 1}
AT_REST_ONE_DONE: JsonObj = {"startTime": T_START, "active": 0, "ready": 0, "succeeded": 1}
FAILURE_TARGET_ONLY: JsonObj = {
    "startTime": T_START,
    "failed": 2,
    "conditions": [condition_true("FailureTarget")],
}
PLACED_FRESH_NEVER_RAN = job(placed="w1")
OLD_MIRROR = mirror(job(uid=OLD_UID), uid="m-0")
NAMESAKE = job()  # created again after OLD_MIRROR's Job was deleted: not placed yet

REFUSED = AdmissionVerdict(
    allowed=False,
    reason="PodSecurityViolation",
    message='... violates PodSecurity "restricted:latest": privileged (container "main" ...)',
)
UNCHECKED = AdmissionVerdict(allowed=False, reason="PodAdmissionUnchecked", message="...")


def _edited_while_suspended() -> JsonObj:
    """Placed, suspended, and its pod template's scheduling directives edited."""
    edited = job(placed="w1", suspend=True)
    edited["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "b"}
    return edited


EDITED_WHILE_SUSPENDED = _edited_while_suspended()

CASES: dict[str, Case] = {
    "not placed, admission not asked yet: ask the manager's admission before placing": Case(
        obj=job(),
        workers=(w("w1"),),
        actions=(),
        outcome=ReadFresh(admission=True),
        admission=None,
    ),
    "not placed, the manager's Pod Security refuses its pods: held, told why, asked again": Case(
        obj=job(),
        workers=(w("w1"), w("w2")),
        actions=(("Log", "warning"),),
        events=(("Warning", "PodSecurityViolation"),),
        outcome=RequeueAfter(SETTINGS.unplaceable_retry),
        admission=REFUSED,
    ),
    "not placed, admission cannot be asked (RBAC): held, told why": Case(
        obj=job(),
        workers=(w("w1"),),
        actions=(("Log", "warning"),),
        events=(("Warning", "PodAdmissionUnchecked"),),
        outcome=RequeueAfter(SETTINGS.unplaceable_retry),
        admission=UNCHECKED,
    ),
    "not placed, suspended: admission not asked until it is resumed": Case(
        obj=job(suspend=True),
        workers=(w("w1"),),
        actions=(("Status", "Suspended"),),
        outcome=Done(),
        admission=None,
    ),
    "placed by hand (no admission policy stopped it), not asked yet: asked before the mirror": Case(
        obj=job(placed="w1"),
        workers=(w("w1"),),
        actions=(),
        outcome=ReadFresh(admission=True),
        fresh=True,
        admission=None,
    ),
    "placed by hand, pods the manager's Pod Security refuses: no mirror anywhere": Case(
        obj=job(placed="w1"),
        workers=(w("w1"), w("w2")),
        actions=(("Log", "warning"),),
        events=(("Warning", "PodSecurityViolation"),),
        outcome=RequeueAfter(SETTINGS.unplaceable_retry),
        fresh=True,
        admission=REFUSED,
    ),
    "placed by hand on a cordoned worker, no mirror yet: placed again where mirrors may go": Case(
        obj=job(placed="w1"),
        workers=(w("w1", cordoned=True), w("w2")),
        actions=(("Place", "w2", RV, ("w1", "w2")), ("Log", "info")),
        events=(("Normal", "Redispatched"),),
        outcome=Done(),
        fresh=True,
    ),
    "placed by hand where its namespace is not open to this manager: placed again elsewhere": Case(
        obj=job(placed="w1"),
        workers=(w("w1", namespaces=CLOSED), w("w2", namespaces=OPEN)),
        actions=(("Place", "w2", RV, ("w1", "w2")), ("Log", "info")),
        events=(("Normal", "Redispatched"),),
        outcome=Done(),
        fresh=True,
    ),
    "placed where the namespaces are not listed yet: no mirror until they are": Case(
        obj=job(placed="w1"),
        workers=(w("w1", namespaces=dataclasses.replace(OPEN, synced=False)),),
        actions=(),
        outcome=Retry(""),
        fresh=True,
    ),
    "not placed: a worker whose namespace is not open is passed over": Case(
        obj=job(),
        workers=(w("w1", namespaces=CLOSED), w("w2", load=5, namespaces=OPEN)),
        actions=(("Place", "w2", RV), ("Create", "w2", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "placed already: admission is not asked again (a move keeps the admitted pods)": Case(
        obj=job(placed="w1", status=RUNNING),
        workers=(w("w1", mirror=mirror(job(placed="w1"), status=RUNNING)),),
        actions=(),
        outcome=Done(),
        admission=None,
    ),
    # -- not placed --------------------------------------------------------------
    "not placed: placed on the least-loaded usable worker, mirror created there": Case(
        obj=job(),
        workers=(
            w("w1", load=2),
            w("w2", load=1),
            w("w3", cordoned=True),
            w("w4", connected=False),
            w("w5", synced=False),
        ),
        actions=(("Place", "w2", RV), ("Create", "w2", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "not placed: load ties go to the first name": Case(
        obj=job(),
        workers=(w("w2", load=1), w("w1", load=1)),
        actions=(("Place", "w1", RV), ("Create", "w1", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "not placed: no worker connected": Case(
        obj=job(),
        workers=(w("w1", connected=False), w("w2", connected=False)),
        actions=HELD,
        events=(("Warning", "NotPlaced"),),
        outcome=UNPLACEABLE,
    ),
    "not placed: every worker cordoned": Case(
        obj=job(),
        workers=(w("w1", cordoned=True), w("w2", cordoned=True)),
        actions=HELD,
        events=(("Warning", "NotPlaced"),),
        outcome=UNPLACEABLE,
    ),
    "not placed: no worker registered": Case(
        obj=job(),
        workers=(),
        actions=HELD,
        events=(("Warning", "NotPlaced"),),
        outcome=UNPLACEABLE,
    ),
    "not placed: its live mirror (annotation lost) is kept where it is": Case(
        obj=job(status=RUNNING),
        workers=(w("w1"), w("w2", load=9, mirror=mirror(job(), status=RUNNING))),
        actions=(("Place", "w2", RV),),
        outcome=Done(),
        release=True,
    ),
    "not placed: created suspended: its status only, no placement": Case(
        obj=job(suspend=True),
        workers=(w("w1"),),
        actions=(("Status", "Suspended"),),
        outcome=Done(),
    ),
    "not placed: created suspended, status already says so: nothing": Case(
        obj=job(
            suspend=True,
            status={
                "conditions": [
                    {
                        "type": "Suspended",
                        "status": "True",
                        "reason": "JobSuspended",
                        "message": "Job suspended",
                        "lastProbeTime": T_START,
                        "lastTransitionTime": T_START,
                    }
                ]
            },
        ),
        workers=(w("w1"),),
        actions=(),
        outcome=Done(),
    ),
    # -- placed, mirror missing ----------------------------------------------------
    "placed, mirror missing, from the cache: read the object afresh first": Case(
        obj=PLACED,
        workers=(w("w1"),),
        actions=(),
        outcome=ReadFresh(obj=True),
    ),
    "placed, mirror missing, fresh, never ran: created": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1"), w("w2")),
        fresh=True,
        actions=(("Create", "w1", UID),),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "placed, mirror missing, fresh, it ran: no pods shown, created again with a warning": Case(
        obj=PLACED,
        workers=(w("w1"),),
        fresh=True,
        actions=(("Status",), ("Log", "warning"), ("Create", "w1", UID)),
        events=(("Warning", "MirrorVanished"), ("Normal", "Dispatched")),
        outcome=CREATED_LOOK,
    ),
    "placed, mirror missing, fresh read says finished: leftovers deleted, done": Case(
        obj=job(placed="w1", status=COMPLETE),
        workers=(w("w1"), w("w2", mirror=mirror(job(), uid="m-2", status=COMPLETE))),
        fresh=True,
        actions=(("Delete", "w2", "m-2"),),
        outcome=Done(),
        release=True,
    ),
    "placed, mirror missing, fresh read says absent: the cached mirror is stale": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1", mirror=mirror(job()), read=None),),
        fresh=True,
        # The record of the gone mirror goes first: a restart after the create adopts the new.
        actions=(("Annotate", MIRRORS_ANNOTATION), ("Create", "w1", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "placed, mirror created, the cache does not show it yet: wait for its event": Case(
        obj=PLACED,
        workers=(w("w1", create_pending=True),),
        fresh=True,
        actions=(),
        outcome=RequeueAfter(CREATE_PENDING_LOOK),
    ),
    "placed on a worker no longer registered: the status to carry over is read afresh": Case(
        obj=job(placed="w9"),
        workers=(w("w1"),),
        actions=(),
        outcome=ReadFresh(obj=True),
    ),
    "placed on a worker no longer registered, fresh: placed again elsewhere": Case(
        obj=job(placed="w9"),
        workers=(w("w1"),),
        fresh=True,
        actions=(("Place", "w1", RV, ("w9", "w1")), ("Log", "info")),
        events=(("Warning", "WorkerLost"), ("Normal", "Redispatched")),
        outcome=Done(),
    ),
    "placed, the worker's cache has not listed": Case(
        obj=PLACED,
        workers=(w("w1", synced=False), w("w2")),
        actions=(),
        outcome=Retry(""),
    ),
    "placed on one worker while its mirror lives on another: never a second one": Case(
        obj=job(placed="w1"),
        workers=(w("w1"), w("w2", mirror=mirror(job(), status=RUNNING))),
        fresh=True,
        actions=(("Log", "warning"), ("Place", "w2", RV)),
        events=(("Warning", "PlacementConflict"),),
        outcome=Done(),
    ),
    "placed on one worker, its recorded mirror on another is terminating: waits": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1"), w("w2", mirror=mirror(job(), deleting=True))),
        fresh=True,
        actions=(),
        outcome=Retry(""),
    ),
    "placed on one worker, a terminating mirror jobrelay did not record on another": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1"), w("w2", mirror=mirror(job(), deleting=True))),
        fresh=True,
        record=False,
        actions=(("Log", "warning"), ("Create", "w1", UID)),
        events=(("Warning", "ForeignMirror"), ("Normal", "Dispatched")),
        outcome=CREATED_LOOK,
    ),
    "placed, another worker's fresh read shows its live mirror: never a second one": Case(
        obj=job(placed="w1"),
        workers=(w("w1"), w("w2", read=mirror(job(), status=RUNNING))),
        fresh=True,
        actions=(("Log", "warning"), ("Place", "w2", RV)),
        events=(("Warning", "PlacementConflict"),),
        outcome=Done(),
    ),
    "not placed, its live mirror seen only by a fresh read: kept where it is": Case(
        obj=job(status=RUNNING),
        workers=(w("w1"), w("w2", load=3, read=mirror(job(), status=RUNNING))),
        fresh=True,
        actions=(("Place", "w2", RV),),
        outcome=Done(),
    ),
    "not placed, the cached mirror is gone by a fresh read: placed afresh": Case(
        obj=job(),
        workers=(w("w1", load=1), w("w2", connected=False, mirror=mirror(job()), read=None)),
        fresh=True,
        actions=(("Place", "w1", RV), ("Annotate", MIRRORS_ANNOTATION), ("Create", "w1", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "not placed, a fresh read shows a namesake on the least loaded: placed elsewhere": Case(
        obj=job(),
        workers=(w("w1", read=foreign(job())), w("w2", load=4)),
        fresh=True,
        probed=True,
        actions=(("Place", "w2", RV), ("Create", "w2", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    # -- a namesake jobrelay did not create ------------------------------------------
    "namesake without our label: probe every worker before moving": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1", read=foreign(job())), w("w2")),
        fresh=True,
        actions=(),
        outcome=ReadFresh(probe=True),
    ),
    "namesake after the probe: placed elsewhere, away from every foreign holder": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(
            w("w1", read=foreign(job())),
            w("w2", read=foreign(job(), uid="f-2")),
            w("w3", load=5, read=None),
            w("w4", load=2),
        ),
        fresh=True,
        probed=True,
        actions=(("Log", "warning"), ("Place", "w4", RV)),
        events=(("Warning", "NameCollision"),),
        outcome=Done(),
    ),
    "namesake after the probe, no other worker can take it": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(
            w("w1", read=foreign(job())),
            w("w2", read=foreign(job(), uid="f-2")),
            w("w3", cordoned=True),
        ),
        fresh=True,
        probed=True,
        actions=(("Log", "warning"), *HELD),
        events=(("Warning", "NameCollision"), ("Warning", "NotPlaced")),
        outcome=UNPLACEABLE,
    ),
    # -- an earlier object of the same name ---------------------------------------------
    # A namesake created again carries no placement: placed once the old mirror is
    # deleted. (A placed one next to it is a restored copy: test_decide_restored.py.)
    "an earlier object's mirror in the cache blocks the name: deleted, retry": Case(
        obj=NAMESAKE,
        workers=(w("w1", mirror=OLD_MIRROR),),
        actions=(("Delete", "w1", "m-0"), ("Place", "w1", RV)),
        outcome=Retry(""),
    ),
    "an earlier object's mirror found by a fresh read: deleted, retry": Case(
        obj=NAMESAKE,
        workers=(w("w1", read=OLD_MIRROR),),
        fresh=True,
        actions=(("Place", "w1", RV), ("Delete", "w1", "m-0")),
        outcome=Retry(""),
    ),
    "an earlier object's mirror in the cache and the read: deleted once": Case(
        obj=NAMESAKE,
        workers=(w("w1", mirror=OLD_MIRROR, read=OLD_MIRROR),),
        fresh=True,
        actions=(("Delete", "w1", "m-0"), ("Place", "w1", RV)),
        outcome=Retry(""),
    ),
    "placed, an earlier object's mirror going (deletionTimestamp): waited for": Case(
        obj=PLACED,
        workers=(w("w1", mirror=mirror(job(uid=OLD_UID), uid="m-0", deleting=True)),),
        actions=(),
        outcome=Retry(""),
    ),
    "an earlier object's mirror already deleted, the cache lags: retry only": Case(
        obj=PLACED,
        workers=(w("w1", mirror=OLD_MIRROR),),
        deleting=frozenset({"m-0"}),
        actions=(),
        outcome=Retry(""),
    ),
    "an earlier object's mirror elsewhere: deleted, ours created": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1"), w("w2", mirror=OLD_MIRROR)),
        fresh=True,
        actions=(("Delete", "w2", "m-0"), ("Create", "w1", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    # -- running: spec and status follow ---------------------------------------------
    "running, in step: nothing to do": Case(
        obj=PLACED,
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        actions=(),
        outcome=Done(),
        release=True,
    ),
    "running: the mirror's status is copied": Case(
        obj=job(placed="w1"),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        actions=(("Status",),),
        outcome=Done(),
        release=True,
    ),
    "spec drift: suspended": Case(
        obj=job(placed="w1", suspend=True, status=RUNNING),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        actions=(("Patch", "w1", {"spec": {"suspend": True}}), ("Status", "Suspended")),
        events=(("Normal", "Suspended"),),
        outcome=Done(),
    ),
    "spec drift: resumed": Case(
        obj=job(
            placed="w1",
            status={"conditions": [{"type": "Suspended", "status": "True", "reason": "x"}]},
        ),
        workers=(w("w1", mirror=mirror(job(suspend=True))),),
        actions=(("Patch", "w1", {"spec": {"suspend": False}}), ("Status",)),
        events=(("Normal", "Resumed"),),
        outcome=Done(),
    ),
    "spec drift: parallelism, no Event": Case(
        obj=job(placed="w1", parallelism=4, status=RUNNING),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        actions=(("Patch", "w1", {"spec": {"parallelism": 4}}),),
        outcome=Done(),
    ),
    "suspended before its mirror ran, template edited, not asked yet: asked before the patch": Case(
        obj=EDITED_WHILE_SUSPENDED,
        workers=(w("w1", mirror=mirror(job(suspend=True))),),
        actions=(),
        outcome=ReadFresh(admission=True),
        admission=None,
    ),
    "suspended before its mirror ran, template edited, refused: the mirror keeps its pods": Case(
        obj=EDITED_WHILE_SUSPENDED,
        workers=(w("w1", mirror=mirror(job(suspend=True))),),
        actions=(("Log", "warning"),),
        events=(("Warning", "PodSecurityViolation"),),
        outcome=RequeueAfter(SETTINGS.unplaceable_retry),
        admission=REFUSED,
        release=True,
    ),
    "suspended before its mirror ran, template edited, admitted: patched onto the mirror": Case(
        obj=EDITED_WHILE_SUSPENDED,
        workers=(w("w1", mirror=mirror(job(suspend=True))),),
        actions=(
            ("Patch", "w1", {"spec": {"template": {"spec": {"nodeSelector": {"zone": "b"}}}}}),
            ("Status", "Suspended"),
        ),
        outcome=Done(),
        release=True,
    ),
    "suspended, nothing of the template changed: no admission asked": Case(
        obj=job(placed="w1", suspend=True),
        workers=(w("w1", mirror=mirror(job(suspend=True))),),
        actions=(("Status", "Suspended"),),
        outcome=Done(),
        admission=None,
    ),
    # -- finishing ------------------------------------------------------------------
    "the mirror completed: status written, mirror deleted; its condition says it": Case(
        obj=PLACED,
        workers=(w("w1", mirror=mirror(job(), status=COMPLETE)),),
        actions=(("Status", "Complete", "SuccessCriteriaMet"), ("Delete", "w1", "m-1")),
        outcome=Done(),
        release=True,
    ),
    "the mirror completed, --completed-events: a Normal Completed Event too": Case(
        obj=PLACED,
        workers=(w("w1", mirror=mirror(job(), status=COMPLETE)),),
        settings=dataclasses.replace(SETTINGS, completed_events=True),
        actions=(("Status", "Complete", "SuccessCriteriaMet"), ("Delete", "w1", "m-1")),
        events=(("Normal", "Completed"),),
        outcome=Done(),
        release=True,
    ),
    "the mirror failed: status written, Failed, mirror deleted": Case(
        obj=PLACED,
        workers=(w("w1", mirror=mirror(job(), status=FAILED)),),
        actions=(("Status", "Failed", "FailureTarget"), ("Delete", "w1", "m-1")),
        events=(("Warning", "Failed"),),
        outcome=Done(),
    ),
    "the mirror completed, keep_finished_mirrors: kept": Case(
        obj=PLACED,
        workers=(w("w1", mirror=mirror(job(), status=COMPLETE)),),
        settings=KEEP,
        actions=(("Status", "Complete", "SuccessCriteriaMet"),),
        outcome=Done(),
    ),
    "finished: its mirrors deleted": Case(
        obj=job(placed="w1", status=COMPLETE),
        workers=(w("w1", mirror=mirror(job(), status=COMPLETE)), w("w2", mirror=OLD_MIRROR)),
        actions=(("Delete", "w1", "m-1"), ("Delete", "w2", "m-0")),
        outcome=Done(),
        release=True,
    ),
    "finished, keep_finished_mirrors: only an earlier object's mirror goes": Case(
        obj=job(placed="w1", status=COMPLETE),
        workers=(w("w1", mirror=mirror(job(), status=COMPLETE)), w("w2", mirror=OLD_MIRROR)),
        settings=KEEP,
        actions=(("Delete", "w2", "m-0"),),
        outcome=Done(),
        release=True,
    ),
    "the status the rules refuse is not written": Case(
        obj=job(placed="w1"),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        kind=RefusingJobKind(),
        actions=(),
        outcome=Terminal("StatusNotCopied", ""),
        release=True,
    ),
    "created suspended, the status the rules refuse is not written": Case(
        obj=job(suspend=True),
        workers=(w("w1"),),
        kind=RefusingJobKind(),
        actions=(),
        outcome=Terminal("StatusNotCopied", ""),
    ),
    # -- the management object goes ------------------------------------------------
    "being deleted: every mirror deleted but those already going": Case(
        obj=job(placed="w1", deleting=True, status=RUNNING),
        workers=(
            w("w1", mirror=mirror(job(), status=RUNNING)),
            w("w2", mirror=OLD_MIRROR),
            w("w3", mirror=mirror(job(), uid="m-3", deleting=True)),
            w("w4", mirror=mirror(job(), uid="m-4")),
            w("w5"),
        ),
        deleting=frozenset({"m-4"}),
        actions=(("Delete", "w1", "m-1"), ("Delete", "w2", "m-0")),
        outcome=Done(),
        release=True,
    ),
    "gone: every mirror deleted": Case(
        obj=None,
        workers=(w("w1", mirror=mirror(job())), w("w2", mirror=OLD_MIRROR)),
        actions=(("Delete", "w1", "m-1"), ("Delete", "w2", "m-0")),
        outcome=Done(),
        release=True,
    ),
    "gone, nothing left anywhere": Case(
        obj=None, workers=(w("w1"),), actions=(), outcome=Done(), release=True
    ),
    # -- lost workers, drains and runs -------------------------------------------------
    "its worker does not answer, not lost yet: nothing there, look again soon": Case(
        obj=PLACED,
        workers=(w("w1", lost_in=600.0, mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(),
        outcome=UNPLACEABLE,
    ),
    "its worker was lost: the status to carry over is read afresh first": Case(
        obj=PLACED,
        workers=(w("w1", lost=True, mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(),
        outcome=ReadFresh(obj=True),
    ),
    "its worker was lost, fresh, pods shown running: shown stopped before it moves": Case(
        obj=PLACED,
        workers=(w("w1", lost=True, mirror=mirror(job(), status=RUNNING)), w("w2")),
        fresh=True,
        actions=(("Status",),),
        outcome=Done(),
    ),
    "its worker was lost, fresh, at rest: placed on another with its history": Case(
        obj=job(placed="w1", status=AT_REST),
        workers=(w("w1", lost=True, mirror=mirror(job(), status=RUNNING)), w("w2"), w("w3")),
        fresh=True,
        actions=(("Place", "w2", RV, ("w1", "w2")), ("Log", "info")),
        events=(("Warning", "WorkerLost"), ("Normal", "Redispatched")),
        outcome=Done(),
    ),
    "its worker was lost, no other can take it: says so and waits": Case(
        obj=job(placed="w1", status=AT_REST),
        workers=(w("w1", lost=True), w("w2", cordoned=True)),
        fresh=True,
        actions=HELD,
        events=(("Warning", "NotPlaced"),),
        outcome=UNPLACEABLE,
    ),
    "its worker was lost, redispatch never: failed with WorkerLost": Case(
        obj=job(placed="w1", status=RUNNING, annotations={"jobrelay.dev/redispatch": "never"}),
        workers=(w("w1", lost=True, mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(("Status", "Failed", "FailureTarget"),),
        events=(("Warning", "WorkerLost"),),
        outcome=Done(),
        release=True,
    ),
    "moved, its old worker answers again: the earlier run's mirror goes, uncopied": Case(
        obj=job(placed="w2", history=("w1", "w2"), status=AT_REST),
        workers=(
            w("w1", mirror=mirror(job(), status=COMPLETE)),
            w("w2", mirror=mirror(job(), run=2, uid="m-2", status=RUNNING)),
        ),
        actions=(("Delete", "w1", "m-1"), ("Status",)),
        outcome=Done(),
        release=True,
    ),
    "moved, the earlier run's mirror holds the name on the new worker: deleted first": Case(
        obj=job(placed="w1", history=("w1", "w2", "w1"), status=AT_REST),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(("Delete", "w1", "m-1"),),
        outcome=Retry(""),
    ),
    "the placement annotation edited: set back, with a warning": Case(
        obj=job(placed="w2", history=("w1",), status=RUNNING),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(("Log", "warning"), ("Place", "w1", RV)),
        events=(("Warning", "PlacementRestored"),),
        outcome=Done(),
    ),
    "the placement annotation removed: set back, with a warning": Case(
        obj=job(history=("w1", "w2"), status=RUNNING),
        workers=(w("w1"), w("w2", mirror=mirror(job(), run=2, status=RUNNING))),
        actions=(("Log", "warning"), ("Place", "w2", RV, ("w1", "w2"))),
        events=(("Warning", "PlacementRestored"),),
        outcome=Done(),
    ),
    "drain All, its mirror runs: deleted (pods first), then it moves": Case(
        obj=PLACED,
        workers=(w("w1", drain="All", mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(("Delete", "w1", "m-1"),),
        outcome=Retry(""),
    ),
    "drain All, its worker does not answer: wait, never two runs": Case(
        obj=PLACED,
        workers=(
            w("w1", drain="All", lost_in=100.0, mirror=mirror(job(), status=RUNNING)),
            w("w2"),
        ),
        actions=(),
        outcome=UNPLACEABLE,
    ),
    "drain All, its mirror is going: wait": Case(
        obj=PLACED,
        workers=(w("w1", drain="All", mirror=mirror(job(), deleting=True)), w("w2")),
        actions=(),
        outcome=Retry(""),
    ),
    "drain NotStarted, its pods started: it stays and is followed": Case(
        obj=PLACED,
        workers=(w("w1", drain="NotStarted", mirror=mirror(job(), status=RUNNING)), w("w2")),
        actions=(),
        outcome=Done(),
        release=True,
    ),
    "drain NotStarted, nothing started: deleted, then it moves": Case(
        obj=PLACED_FRESH_NEVER_RAN,
        workers=(w("w1", drain="NotStarted", mirror=mirror(job(), status=PENDING)), w("w2")),
        actions=(("Delete", "w1", "m-1"),),
        outcome=Retry(""),
    ),
    "drain, its mirror gone: its last state counts first": Case(
        obj=job(placed="w1", completions=3, status=RUNNING),
        workers=(
            w("w1", drain="All", vanished=mirror(job(), status=ONE_DONE_OF_THREE)),
            w("w2"),
        ),
        fresh=True,
        actions=(("Status",),),
        outcome=Done(),
    ),
    "a mirror deleted behind our back: its last state counts first": Case(
        obj=job(placed="w1", completions=3, status=RUNNING),
        workers=(w("w1", vanished=mirror(job(), status=ONE_DONE_OF_THREE)),),
        fresh=True,
        actions=(("Status",),),
        outcome=Done(),
    ),
    "a mirror deleted behind our back, its work counted: made again, with a warning": Case(
        obj=job(placed="w1", completions=3, status=AT_REST_ONE_DONE),
        workers=(w("w1", vanished=mirror(job(), status=ONE_DONE_OF_THREE)),),
        fresh=True,
        actions=(("Log", "warning"), ("Annotate", MIRRORS_ANNOTATION), ("Create", "w1", UID)),
        events=(("Warning", "MirrorVanished"), ("Normal", "Dispatched")),
        outcome=CREATED_LOOK,
    ),
    "an earlier run already met its failure target: failed here, not run again": Case(
        obj=job(placed="w2", history=("w1", "w2"), status=FAILURE_TARGET_ONLY),
        workers=(w("w1", lost=True), w("w2")),
        fresh=True,
        actions=(("Status", "Failed", "FailureTarget"),),
        events=(("Warning", "Failed"),),
        outcome=Done(),
        release=True,
    ),
    # -- JobSet ---------------------------------------------------------------------
    "JobSet not placed: placed and created": Case(
        kind=JOBSET,
        obj=jobset(),
        workers=(w("w1", load=1), w("w2")),
        actions=(("Place", "w2", RV), ("Create", "w2", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    "JobSet suspended: mirror suspended, condition shown": Case(
        kind=JOBSET,
        obj=jobset(placed="w1", suspend=True),
        workers=(w("w1", mirror=mirror(jobset(), kind=JOBSET)),),
        actions=(("Patch", "w1", {"spec": {"suspend": True}}), ("Status", "Suspended")),
        events=(("Normal", "Suspended"),),
        outcome=Done(),
    ),
    "JobSet completed: status, Completed, mirror deleted": Case(
        kind=JOBSET,
        obj=jobset(placed="w1"),
        workers=(
            w(
                "w1",
                mirror=mirror(
                    jobset(),
                    kind=JOBSET,
                    status={
                        "terminalState": "Completed",
                        "conditions": [condition_true("Completed")],
                    },
                ),
            ),
        ),
        actions=(("Status", "Completed"), ("Delete", "w1", "m-1")),
        outcome=Done(),
    ),
    "JobSet mirror missing, cache only: read afresh": Case(
        kind=JOBSET,
        obj=jobset(placed="w1"),
        workers=(w("w1"),),
        actions=(),
        outcome=ReadFresh(obj=True),
    ),
    # -- a generic kind ---------------------------------------------------------------
    "generic: the mirror's status is copied as it stands": Case(
        kind=WIDGET,
        obj=widget(placed="w1"),
        workers=(w("w1", mirror=mirror(widget(), kind=WIDGET, status={"phase": "Running"})),),
        actions=(("Status",),),
        outcome=Done(),
    ),
    "generic: finished by a Succeeded condition": Case(
        kind=WIDGET,
        obj=widget(placed="w1", status={"phase": "Running"}),
        workers=(
            w(
                "w1",
                mirror=mirror(
                    widget(),
                    kind=WIDGET,
                    status={"phase": "Done", "conditions": [condition_true("Succeeded")]},
                ),
            ),
        ),
        actions=(("Status", "Succeeded"), ("Delete", "w1", "m-1")),
        outcome=Done(),
    ),
    "generic: a Failed condition is a failure": Case(
        kind=WIDGET,
        obj=widget(placed="w1"),
        workers=(
            w(
                "w1",
                mirror=mirror(
                    widget(), kind=WIDGET, status={"conditions": [condition_true("Failed")]}
                ),
            ),
        ),
        actions=(("Status", "Failed"), ("Delete", "w1", "m-1")),
        events=(("Warning", "Failed"),),
        outcome=Done(),
    ),
    "generic without spec.suspend: nothing to patch": Case(
        kind=WIDGET,
        obj=widget(placed="w1", spec={"size": 5}),
        workers=(w("w1", mirror=mirror(widget(), kind=WIDGET)),),
        actions=(),
        outcome=Done(),
    ),
    "generic with spec.suspend: followed": Case(
        kind=WIDGET,
        obj=widget(placed="w1", spec={"suspend": True}),
        workers=(w("w1", mirror=mirror(widget(spec={"suspend": False}), kind=WIDGET)),),
        actions=(("Patch", "w1", {"spec": {"suspend": True}}),),
        events=(("Normal", "Suspended"),),
        outcome=Done(),
    ),
    "generic created fresh: its mirror built and created": Case(
        kind=WIDGET,
        obj=widget(placed="w1"),
        workers=(w("w1"),),
        fresh=True,
        actions=(("Create", "w1", UID),),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
}


def _snapshot_of(case: Case) -> Any:
    return snapshot(
        case.obj,
        *case.workers,
        kind=case.kind,
        settings=case.settings,
        fresh=case.fresh,
        probed=case.probed,
        deleting=case.deleting,
        admission=case.admission,
        record=case.record,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_decide(name: str) -> None:
    case = CASES[name]
    plan = decide(_snapshot_of(case))
    actions = tuple(summary(a) for a in plan.actions if not isinstance(a, RecordEvent))
    events = tuple((a.type, a.reason) for a in plan.actions if isinstance(a, RecordEvent))
    assert actions == case.actions
    assert events == case.events
    assert outcome_summary(plan.outcome) == case.outcome
    if case.release is not None:
        assert plan.release == case.release


# -- what the rows cannot say in key fields --------------------------------------------


def _plan(obj: JsonObj | None, *workers: WorkerSnapshot, **kwargs: Any) -> Plan:
    return decide(snapshot(obj, *workers, **kwargs))


def _of(plan: Plan, kind: type) -> list[Any]:
    return [a for a in plan.actions if isinstance(a, kind)]


def test_the_placement_is_a_compare_and_swap_written_before_the_create() -> None:
    plan = _plan(job(rv="77"), w("w1"))
    assert [type(a).__name__ for a in plan.actions] == ["Place", "CreateMirror", "RecordEvent"]
    assert plan.actions[0] == Place("w1", "77", ("w1",), plan.actions[0].demand)  # type: ignore[union-attr]
    # The decision goes on from the placement it wrote: its echo needs no look (the
    # mirror's next change brings the key back, or the record's time).
    assert not plan.echo_needed


def test_the_mirror_body_is_the_kinds_mirror_of_the_placed_object() -> None:
    (create,) = _of(_plan(job(), w("w1")), CreateMirror)
    body = create.body
    assert body["kind"] == "Job"
    assert body["metadata"]["labels"][ORIGIN_UID_LABEL] == UID
    assert "managedBy" not in body["spec"]
    # jobrelay's records on the management object are not the mirror's.
    assert CLUSTER_ANNOTATION not in body["metadata"]["annotations"]
    (create,) = _of(_plan(jobset(), w("w1"), kind=JOBSET), CreateMirror)
    assert create.body["kind"] == "JobSet"
    assert create.body["spec"]["replicatedJobs"][0]["replicas"] == 2
    assert "managedBy" not in create.body["spec"]


def test_a_status_write_is_a_compare_and_swap_with_the_patch_to_the_whole_status() -> None:
    obj = job(placed="w1", rv="42", status={"startTime": T_START, "active": 1, "ready": 0})
    plan = _plan(obj, w("w1", mirror=mirror(job(), status=RUNNING)))
    (write,) = _of(plan, WriteStatus)
    assert write.resource_version == "42"
    assert apply_merge_patch(obj["status"], write.patch) == write.status
    assert write.patch["ready"] == 1 and write.status["startTime"] == T_START


def test_events_say_where_and_why() -> None:
    plan = _plan(PLACED, w("w1", mirror=mirror(job(), status=FAILED)))
    (event,) = _of(plan, RecordEvent)
    assert event.message == "Failed on worker cluster w1: BackoffLimitExceeded too many failures"
    plan = _plan(
        PLACED,
        w("w1", mirror=mirror(job(), status=COMPLETE)),
        settings=dataclasses.replace(SETTINGS, completed_events=True),
    )
    assert _of(plan, RecordEvent)[0].message == "Completed on worker cluster w1"
    plan = _plan(job(), w("w1", connected=False), w("w2", cordoned=True))
    assert _of(plan, RecordEvent)[0].message == (
        "no worker cluster can take this Job now: w1: not connected; w2: cordoned. "
        "It waits on the management cluster and is placed as soon as one can"
    )
    plan = _plan(
        PLACED_FRESH_NEVER_RAN, w("w1", read=foreign(job())), w("w2"), fresh=True, probed=True
    )
    assert "worker cluster w1 already has a Job team-a/train that jobrelay did not create" in (
        _of(plan, RecordEvent)[0].message
    )


def test_a_failure_without_reason_or_message_reads_cleanly() -> None:
    status = {"conditions": [{"type": "Failed", "status": "True"}]}
    plan = _plan(
        widget(placed="w1"),
        w("w1", mirror=mirror(widget(), kind=WIDGET, status=status)),
        kind=WIDGET,
    )
    # The generic kind names the condition type when the reason is empty.
    assert _of(plan, RecordEvent)[0].message == "Failed on worker cluster w1: Failed"


def test_warnings_and_terminal_messages_tell_the_user_what_to_do() -> None:
    plan = _plan(
        job(placed="w1"), w("w1"), w("w2", mirror=mirror(job(), status=RUNNING)), fresh=True
    )
    (conflict,) = _of(plan, RecordEvent)
    assert "keeps following the mirror on w2" in conflict.message
    assert not _of(plan, CreateMirror)
    assert all(not isinstance(a, PatchMirror) or a.cluster == "w2" for a in plan.actions)
    plan = _plan(
        job(placed="w1"),
        w("w1", mirror=mirror(job(), status=RUNNING)),
        kind=RefusingJobKind(),
    )
    assert isinstance(plan.outcome, Terminal)
    assert plan.outcome.message.endswith("status.startTime: cannot be changed [rule 14]")
    assert plan.outcome.retry_after is None


def test_deletions_say_why() -> None:
    plan = _plan(None, w("w1", mirror=mirror(job())))
    assert [d.why for d in _of(plan, DeleteMirror)] == ["its management Job is gone"]
    plan = _plan(job(placed="w1", status=COMPLETE), w("w1", mirror=mirror(job())))
    assert [d.why for d in _of(plan, DeleteMirror)] == ["its Job has finished"]
    plan = _plan(NAMESAKE, w("w1", mirror=OLD_MIRROR))
    assert [d.why for d in _of(plan, DeleteMirror)] == [
        "it belongs to an earlier object of this name"
    ]
    (delete,) = _of(plan, DeleteMirror)
    assert (delete.name, delete.namespace) == ("train", "team-a")


def test_requeue_delays_come_from_the_settings() -> None:
    settings = dataclasses.replace(SETTINGS, unplaceable_retry=3.5)
    assert _plan(job(), settings=settings).outcome == RequeueAfter(3.5)
    not_answering = w("w1", lost_in=100.0)
    assert _plan(job(placed="w1"), not_answering, settings=settings).outcome == RequeueAfter(3.5)


def test_a_mirror_of_another_controller_is_a_namesake() -> None:
    theirs = mirror(job())
    other = dataclasses.replace(SETTINGS, controller_name="example.com/other")
    plan = _plan(PLACED_FRESH_NEVER_RAN, w("w1", read=theirs), fresh=True, settings=other)
    assert plan.outcome == ReadFresh(probe=True)


def test_a_moved_job_runs_only_what_remains_and_adds_up() -> None:
    """Run 2 on w2 after w1 was lost: the mirror asks for what is left, and its
    counters add to what run 1 did."""
    done_before = {"startTime": T_START, "active": 0, "succeeded": 2, "failed": 1}
    obj = job(placed="w2", history=("w1", "w2"), completions=5, parallelism=4, status=done_before)
    (create,) = _of(_plan(obj, w("w1", lost=True), w("w2"), fresh=True), CreateMirror)
    spec, annotations = create.body["spec"], create.body["metadata"]["annotations"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (3, 3, 5)
    assert annotations["jobrelay.dev/run"] == "2"
    assert annotations["jobrelay.dev/carried-over"] == (
        '{"elapsedSeconds": 600, "failed": 1, "succeeded": 2}'
    )
    # Its mirror's progress adds to what run 1 did; the first startTime stays.
    running = {"startTime": "2026-03-01T12:09:00Z", "active": 2, "succeeded": 1, "failed": 1}
    second = mirror(obj, run=2, status=running)
    (write,) = _of(_plan(obj, w("w1", lost=True), w("w2", mirror=second)), WriteStatus)
    assert (write.status["succeeded"], write.status["failed"]) == (3, 2)
    assert write.status["startTime"] == T_START
    # Its spec is kept in step with what remains, not with the whole Job's.
    assert _of(_plan(obj, w("w1", lost=True), w("w2", mirror=second)), PatchMirror) == []


def test_placement_helpers() -> None:
    obj = job()
    assert placement_of(obj) == ""
    placed = with_placement(obj, "w3", ("w1", "w3"))
    assert placement_of(placed) == "w3"
    assert placements_of(placed) == ("w1", "w3")
    assert placements_of(job(placed="w2")) == ("w2",)  # placed before the history was kept
    assert placed["metadata"]["labels"] == obj["metadata"]["labels"]
    assert "annotations" not in obj["metadata"]  # the input is not changed
    assert placement_of({}) == ""


def test_decide_does_not_change_its_input() -> None:
    for name, case in CASES.items():
        snap = _snapshot_of(case)
        before = copy.deepcopy((snap.obj, snap.workers))
        decide(snap)
        assert (snap.obj, snap.workers) == before, name


def test_now_stamps_new_conditions() -> None:
    (write,) = _of(_plan(job(suspend=True), w("w1")), WriteStatus)
    (suspended,) = write.status["conditions"]
    assert suspended["lastTransitionTime"] == NOW


# -- status steps that wait to be copied with the next one ------------------------------

BATCHED = dataclasses.replace(SETTINGS, status_batch_period=1.0)
TARGET_ONLY: JsonObj = {
    "startTime": T_START,
    "succeeded": 1,
    "conditions": [condition_true("SuccessCriteriaMet")],
}


@pytest.mark.parametrize(
    ("shown", "mirrored", "batching_for", "waits"),
    [
        # Only the ready count moved: it waits, at most the batch period.
        (PENDING, RUNNING, None, 1.0),
        (PENDING, RUNNING, 0.25, 0.75),
        (PENDING, RUNNING, 1.0, None),
        # The target condition waits for its final one...
        (RUNNING, TARGET_ONLY, None, 1.0),
        (RUNNING, FAILURE_TARGET_ONLY, None, 1.0),
        # ...which is written at once, with it.
        (RUNNING, COMPLETE, None, None),
        (TARGET_ONLY, COMPLETE, None, None),
        # A run's start waits for its next step too (a short run's end: one write)...
        ({}, PENDING, None, 1.0),
        # ...at most the batch period, and never with more than the start in it.
        ({}, PENDING, 1.0, None),
        ({}, COMPLETE, None, None),
    ],
)
def test_a_passing_status_step_waits_for_the_next_at_most_the_batch_period(
    shown: JsonObj, mirrored: JsonObj, batching_for: float | None, waits: float | None
) -> None:
    # As jobrelay wrote it: with its counters.
    obj = job(placed="w1", status={"failed": 0, "succeeded": 0, **copy.deepcopy(shown)})
    state = w("w1", mirror=mirror(obj, status=mirrored))
    plan = decide(
        dataclasses.replace(snapshot(obj, state, settings=BATCHED), batching_for=batching_for)
    )
    if waits is None:
        assert not plan.batching
        (write,) = _of(plan, WriteStatus)
        assert write.status["conditions" if "conditions" in mirrored else "startTime"]
    else:
        assert plan.batching and plan.outcome == RequeueAfter(waits)
        assert _of(plan, WriteStatus) == []


def test_without_a_batch_period_every_step_is_copied_at_once() -> None:
    obj = job(placed="w1", status={"failed": 0, "succeeded": 0, **PENDING})
    plan = _plan(obj, w("w1", mirror=mirror(obj, status=RUNNING)))
    assert not plan.batching and len(_of(plan, WriteStatus)) == 1
