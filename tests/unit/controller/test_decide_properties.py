"""Property tests of decide(): whatever the snapshot, the promises of a workload hold.

Snapshots are random: any set of workers (connected or not, synced or not,
cordoned, loaded, lost, draining), on each a cached mirror of this object (of
any run), of an earlier object of the same name, or none, maybe terminating,
maybe already deleted by us, maybe the last state of one deleted there; maybe
a fresh read showing the same, something else, or a namesake jobrelay did not
create; a management Job placed anywhere or nowhere, with any placement
history (its placement annotation maybe edited), suspended or not, running,
finished or being deleted; any of the flags.
Mirror statuses come from a model of the built-in Job controller (jobsim), and
the management status from delivering a prefix of that history, so both are
statuses a real reconcile would see.

The promises:

(a) never two live mirrors: at most one create per plan, never while some
    worker holds a live mirror of the object's current run, only where it is
    placed, and only after a fresh read (a lagging cache must not resurrect a
    finished one); a mirror of an earlier run is never followed, and is deleted
    from a worker that answers;
(b) a status write is always one the kind's rules accept;
(c) a placement never goes to a worker that cannot take it (disconnected,
    cordoned, not synced, or holding a namesake jobrelay did not create),
    except to keep a live mirror where it already runs;
(d) deciding is deterministic and leaves its input alone;
(e) only the mirror jobrelay recorded (or, unrecorded, the current run's on its
    placed worker) is followed: a forged one (a later run, or off its placement,
    or not the recorded UID) never leads to a create elsewhere, a placement on
    its worker, or its deletion while the workload lives;
and, from the same snapshots: a namesake jobrelay did not create is never
deleted, a running workload's mirror is never deleted, and a decision never
asks again for a read it was just given.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.controller.builders import CONTROLLER, NOW, SETTINGS
from tests.unit.kinds.job.jobsim import management_job, ts
from tests.unit.kinds.job.strategies import histories

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    CreateMirror,
    DeleteMirror,
    PatchMirror,
    Place,
    Plan,
    ReadFresh,
    WriteStatus,
)
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.kinds.base import WorkloadKey
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.mirrors import is_mirror_of, is_ours, run_of
from jobrelay.placement.admission_probes import ALLOWED, AdmissionVerdict
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.merge_patch import apply_merge_patch
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    MIRROR_LABEL,
    MIRRORS_ANNOTATION,
    ORIGIN_UID_LABEL,
    PLACEMENTS_ANNOTATION,
    REDISPATCH_ANNOTATION,
    REDISPATCH_NEVER,
)
from jobrelay.vocabulary.placement import (
    RecordedMirror,
    mirror_records,
    placement_of,
    placements_of,
)
from jobrelay.vocabulary.workercluster import DrainMode

PROPERTY_SETTINGS = settings(max_examples=500, deadline=None, derandomize=True)

KIND = JobKind()
UID = "uid-manager"
OLD_UID = "uid-earlier"
KEY = WorkloadKey(KIND.name, "team-a/sim")
NAMES = ("w1", "w2", "w3", "w4")


def _meta(obj: JsonObj) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


@st.composite
def management_and_statuses(draw: st.DrawFn) -> tuple[JsonObj, list[JsonObj]]:
    """A management Job that has seen a prefix of its mirror's history, and that history."""
    shape, history = draw(histories(suspend_styles=("none", "keep", "clear")))
    obj = management_job(shape)
    obj["metadata"].update({"uid": UID, "resourceVersion": "7", "labels": {"app": "sim"}})
    statuses = [m.get("status") or {} for m in history]
    for step, status in enumerate(statuses[: draw(st.integers(0, len(statuses)))]):
        written = KIND.next_status(obj, {"spec": obj["spec"], "status": status}, now=ts(step))
        if written is not None:
            obj = {**obj, "status": written}
    return obj, statuses


def _mirror_body(obj: JsonObj, uid: str, origin: str, status: JsonObj, run: int = 1) -> JsonObj:
    body = KIND.build_mirror(obj, controller_name=CONTROLLER, origin="manager", run=run)
    body["metadata"]["uid"] = uid
    body["metadata"]["labels"][ORIGIN_UID_LABEL] = origin
    body["status"] = copy.deepcopy(status)
    return body


@st.composite
def worker_objects(
    draw: st.DrawFn, name: str, obj: JsonObj, statuses: list[JsonObj], *, foreign: bool
) -> JsonObj | None:
    """One object of the name on a worker: ours (this or an earlier object), or a namesake."""
    choices = ["none", "this", "earlier"] + (["foreign"] if foreign else [])
    which = draw(st.sampled_from(choices))
    if which == "none":
        return None
    uid = f"{name}-{which}-{draw(st.sampled_from('ab'))}"
    if which == "foreign":
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sim", "namespace": "team-a", "uid": uid, "labels": {"x": "y"}},
            "spec": {},
        }
    body = _mirror_body(
        obj,
        uid,
        UID if which == "this" else OLD_UID,
        draw(st.sampled_from(statuses)),
        run=draw(st.integers(1, 4)),  # 4: a later run than any history (forged)
    )
    body["spec"]["suspend"] = draw(st.booleans())
    if draw(st.integers(0, 5)) == 0:
        body["metadata"]["deletionTimestamp"] = NOW
    return KIND.slim_mirror(body)


@st.composite
def workers(draw: st.DrawFn, name: str, obj: JsonObj, statuses: list[JsonObj]) -> WorkerSnapshot:
    # The cache holds only objects labelled ours; a read may find anything.
    cached = draw(worker_objects(name, obj, statuses, foreign=False))
    read_done = draw(st.booleans())
    read: JsonObj | None = None
    if read_done:
        read = draw(
            st.one_of(st.just(cached), st.none(), worker_objects(name, obj, statuses, foreign=True))
        )
    connected = draw(st.integers(0, 4)) > 0
    lost = not connected and draw(st.booleans())
    vanished = draw(st.one_of(st.none(), worker_objects(name, obj, statuses, foreign=False)))
    return WorkerSnapshot(
        name=name,
        synced=draw(st.integers(0, 4)) > 0,
        connected=connected,
        lost=lost,
        lost_in=None if connected else (0.0 if lost else draw(st.floats(1, 900))),
        drain=draw(st.sampled_from([None, None, None, DrainMode.NOT_STARTED, DrainMode.ALL])),
        vanished=vanished,
        cordoned=draw(st.integers(0, 4)) == 0,
        load=draw(st.integers(0, 3)),
        labels={},
        mirror=cached,
        read=read,
        read_done=read_done,
        create_pending=draw(st.integers(0, 5)) == 0,
    )


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    obj, statuses = draw(management_and_statuses())
    names = draw(st.permutations(NAMES))[: draw(st.integers(0, len(NAMES)))]
    states = tuple(draw(workers(name, obj, statuses)) for name in names)
    history = draw(st.lists(st.sampled_from(["w9", *NAMES]), max_size=3))
    annotations: dict[str, str] = {}
    if history:
        annotations[PLACEMENTS_ANNOTATION] = ",".join(history)
        # The placement annotation, as jobrelay wrote it, or edited by hand, or gone.
        placement = draw(st.sampled_from([history[-1], history[-1], None, *NAMES]))
    else:
        placement = draw(st.sampled_from([None, None, "w9", *NAMES]))
    if placement is not None:
        annotations[CLUSTER_ANNOTATION] = placement
    if draw(st.integers(0, 5)) == 0:
        annotations[REDISPATCH_ANNOTATION] = REDISPATCH_NEVER
    records = draw(mirror_record_texts(states))
    if records:
        annotations[MIRRORS_ANNOTATION] = records
    if annotations:
        obj["metadata"]["annotations"] = annotations
    obj["spec"]["suspend"] = draw(st.integers(0, 3)) == 0
    if draw(st.integers(0, 3)) == 0:
        # Its pod template edited after its mirrors were made (a suspended Job may be).
        obj["spec"]["template"]["spec"]["nodeSelector"] = {"zone": draw(st.sampled_from("ab"))}
    if draw(st.integers(0, 7)) == 0:
        obj["metadata"]["deletionTimestamp"] = NOW
    uids = sorted(
        {
            str(_meta(o)["uid"])
            for state in states
            for o in (state.mirror, state.read)
            if o is not None
        }
    )
    return Snapshot(
        key=KEY,
        kind=KIND,
        settings=dataclasses.replace(SETTINGS, keep_finished_mirrors=draw(st.integers(0, 3)) == 0),
        obj=None if draw(st.integers(0, 9)) == 0 else obj,
        workers=states,
        now=NOW,
        fresh=draw(st.booleans()),
        deleting=frozenset(uid for uid in uids if draw(st.integers(0, 3)) == 0),
        probed=draw(st.booleans()),
        admission=draw(st.sampled_from([None, ALLOWED, REFUSED])),
    )


@st.composite
def mirror_record_texts(draw: st.DrawFn, states: tuple[WorkerSnapshot, ...]) -> str:
    """The records of the mirrors jobrelay created: none (placed before they were kept),
    some of the objects the workers show (any run), or made-up ones."""
    shown = [
        (run_of(o), state.name, str(_meta(o)["uid"]))
        for state in states
        for o in (state.mirror, state.read, state.vanished)
        if o is not None and _meta(o).get("labels", {}).get(ORIGIN_UID_LABEL) == UID
    ]
    made_up = st.tuples(
        st.integers(1, 4), st.sampled_from(NAMES), st.sampled_from(["x", "w1-this-a"])
    )
    entries = draw(
        st.lists(st.one_of(st.sampled_from(shown), made_up) if shown else made_up, max_size=3)
    )
    return ",".join(f"{run}:{name}:{uid}" for run, name, uid in entries)


REFUSED = AdmissionVerdict(
    allowed=False, reason="PodSecurityViolation", message="violates PodSecurity"
)


# -- what the properties look at -----------------------------------------------------


def current_run(s: Snapshot) -> int:
    assert s.obj is not None
    return len(placements_of(s.obj))


def record_of(s: Snapshot, candidate: JsonObj) -> RecordedMirror | None:
    assert s.obj is not None
    return mirror_records(s.obj).get(run_of(candidate))


def followed(s: Snapshot, where: str, candidate: JsonObj | None) -> bool:
    """Whether an object on worker ``where`` is the mirror jobrelay follows: the one it
    recorded for its run (the current one, or later: edited annotations), or, with no
    record of the current run, the one on the worker it is placed on."""
    if candidate is None or s.obj is None:
        return False
    if not is_mirror_of(candidate, s.obj, CONTROLLER, "manager"):
        return False
    record, run, history = record_of(s, candidate), run_of(candidate), placements_of(s.obj)
    if record is not None:
        return record == (where, _meta(candidate)["uid"]) and run >= len(history)
    return run == len(history) and bool(history) and where == history[-1]


def forged(s: Snapshot, where: str, candidate: JsonObj | None) -> bool:
    """A mirror of this object by its marks that jobrelay did not create (or not there)."""
    if candidate is None or s.obj is None:
        return False
    if not is_mirror_of(candidate, s.obj, CONTROLLER, "manager"):
        return False
    return not followed(s, where, candidate) and not stale_mirror(s, where, candidate)


def live_mirror(s: Snapshot, where: str, candidate: JsonObj | None) -> bool:
    """Whether an object on a worker is the followed mirror of the current run, not going."""
    return (
        candidate is not None
        and followed(s, where, candidate)
        and not _meta(candidate).get("deletionTimestamp")
        and str(_meta(candidate).get("uid")) not in s.deleting
    )


def stale_mirror(s: Snapshot, where: str, candidate: JsonObj | None) -> bool:
    """A mirror of an earlier run of the management object (recorded there, or unrecorded)."""
    if candidate is None or s.obj is None:
        return False
    if not is_mirror_of(candidate, s.obj, CONTROLLER, "manager"):
        return False
    record = record_of(s, candidate)
    return run_of(candidate) < current_run(s) and (
        record is None or record == (where, _meta(candidate)["uid"])
    )


def holds_live_mirror(s: Snapshot, state: WorkerSnapshot) -> bool:
    """What the reconcile knows best: the fresh read if one was made, else the cache."""
    return live_mirror(s, state.name, state.seen)


def holds_forged_mirror(s: Snapshot, state: WorkerSnapshot) -> bool:
    return forged(s, state.name, state.seen)


def holds_namesake(state: WorkerSnapshot) -> bool:
    return (
        state.read_done
        and state.read is not None
        and not is_ours(state.read, CONTROLLER, "manager")
    )


def over(s: Snapshot) -> bool:
    """Whether the management object is finished, being deleted or gone."""
    obj = s.obj
    return obj is None or bool(_meta(obj).get("deletionTimestamp")) or KIND.is_finished(obj)


def finishes(s: Snapshot, plan: Plan) -> bool:
    """Whether the object is over, or the plan writes its final status."""
    obj = s.obj
    if obj is None or over(s):
        return True
    return any(
        isinstance(a, WriteStatus) and KIND.is_finished({**obj, "status": a.status})
        for a in plan.actions
    )


def of(plan: Plan, kind: type) -> list[Any]:
    return [a for a in plan.actions if isinstance(a, kind)]


# -- the properties ----------------------------------------------------------------


def check_never_two_live_mirrors(s: Snapshot, plan: Plan) -> None:
    creates = of(plan, CreateMirror)
    assert len(creates) <= 1
    if not creates:
        return
    (create,) = creates
    assert s.obj is not None and not finishes(s, plan)
    holders = [state.name for state in s.workers if holds_live_mirror(s, state)]
    assert holders == [], f"created on {create.cluster} while {holders} hold a live mirror"
    places = of(plan, Place)
    assert create.cluster == (places[-1].cluster if places else placement_of(s.obj))
    # Never on the strength of a cache alone: a fresh object, or one placed just now.
    assert s.fresh or places
    assert create.origin_uid == UID
    assert create.body["metadata"]["labels"][ORIGIN_UID_LABEL] == UID
    target = s.worker(create.cluster)
    assert target is not None and target.synced and not target.create_pending
    assert not holds_namesake(target)


def check_status_writes_are_always_legal(s: Snapshot, plan: Plan) -> None:
    writes = of(plan, WriteStatus)
    assert len(writes) <= 1
    for write in writes:
        assert s.obj is not None
        old = s.obj
        assert KIND.status_violations(old, {**old, "status": write.status}) == []
        assert apply_merge_patch(old.get("status") or {}, write.patch) == write.status
        assert write.resource_version == _meta(old)["resourceVersion"]


def check_placements_go_where_the_workload_can_run(s: Snapshot, plan: Plan) -> None:
    places = of(plan, Place)
    assert len(places) <= 1
    for place in places:
        assert s.obj is not None and not over(s)
        history = placements_of(s.obj)
        if history and place.cluster == history[-1] and place.history == history:
            continue  # an edited placement annotation set back: nothing moves
        target = s.worker(place.cluster)
        assert target is not None
        if holds_live_mirror(s, target):
            continue  # its annotations were lost or edited: the mirror stays where it runs
        assert target.connected and target.synced and not target.cordoned
        assert not target.lost and not target.drain
        assert not holds_namesake(target)
        assert not holds_forged_mirror(s, target)
        assert place.cluster != placement_of(s.obj)
        # A move keeps every earlier placement, in order.
        assert place.history[-1] == place.cluster
        assert place.history[:-1] in ((), history, history[:-1])


def check_decide_is_deterministic_and_pure(s: Snapshot, plan: Plan) -> None:
    before = copy.deepcopy((s.obj, s.workers, s.deleting))
    assert decide(s) == plan
    assert (s.obj, s.workers, s.deleting) == before


def check_deletes_touch_only_our_mirrors_and_never_a_running_one(s: Snapshot, plan: Plan) -> None:
    deletes = of(plan, DeleteMirror)
    assert len({d.uid for d in deletes}) == len(deletes), "the same mirror deleted twice"
    for delete in deletes:
        state = s.worker(delete.cluster)
        assert state is not None
        targets = [
            o
            for o in (state.mirror, state.read if state.read_done else None)
            if o is not None and str(_meta(o)["uid"]) == delete.uid
        ]
        assert targets, "deletes something it has not seen"
        assert state.connected, "asks a worker that does not answer"
        for target in targets:
            assert _meta(target)["labels"].get(MIRROR_LABEL), "deletes a namesake"
            if s.obj is not None and live_mirror(s, state.name, target) and not over(s):
                # Only to move off a draining worker (or off a worker the workload is not
                # placed on and may not be given), waiting for its pods to be gone.
                excluded = state.drain or (state.cordoned and state.name != placement_of(s.obj))
                assert finishes(s, plan) or (delete.wait_for_pods and excluded), (
                    "deletes the mirror of a running workload"
                )
            if s.obj is not None and not over(s):
                assert not forged(s, state.name, target), "deletes a mirror it did not create"


def check_earlier_runs_go_from_workers_that_answer(s: Snapshot, plan: Plan) -> None:
    if s.obj is None or over(s):
        return
    deleted = {d.uid for d in of(plan, DeleteMirror)}
    for state in s.workers:
        mirror = state.mirror
        if (
            stale_mirror(s, state.name, mirror)
            and mirror is not None
            and state.connected
            and not _meta(mirror).get("deletionTimestamp")
            and str(_meta(mirror)["uid"]) not in s.deleting
        ):
            assert str(_meta(mirror)["uid"]) in deleted, (
                f"an earlier run's mirror stays on {state.name}"
            )


def check_a_read_once_given_is_not_asked_for_again(s: Snapshot, plan: Plan) -> None:
    outcome = plan.outcome
    if isinstance(outcome, ReadFresh):
        assert outcome.obj or outcome.probe or outcome.admission
        assert not (outcome.obj and s.fresh)
        assert not (outcome.probe and s.probed)
        assert not (outcome.admission and s.admission is not None)


def check_a_first_placement_only_where_admission_allowed(s: Snapshot, plan: Plan) -> None:
    """A workload never placed before is placed only once the manager admits its pods
    (unless a live mirror of it already runs: then it is only recorded)."""
    if s.obj is None or placements_of(s.obj):
        return
    if any(isinstance(action, Place) for action in plan.actions):
        adopted = any(live_mirror(s, state.name, state.seen) for state in s.workers)
        assert adopted or (s.admission is not None and s.admission.allowed)


def check_forged_mirrors_move_nothing(s: Snapshot, plan: Plan) -> None:
    """No forged mirror (a later run, any worker; or not the recorded one) leads to a
    create elsewhere than the placement, or to a placement on its worker."""
    if s.obj is None:
        return
    forgers = {state.name for state in s.workers if holds_forged_mirror(s, state)}
    history = placements_of(s.obj)
    for place in of(plan, Place):
        if history and place.cluster == history[-1] and place.history == history:
            continue  # an edited placement annotation set back: nothing moves
        assert place.cluster not in forgers, f"placed on {place.cluster}, which forged a mirror"
    for create in of(plan, CreateMirror):
        assert create.cluster not in forgers
        places = of(plan, Place)
        assert create.cluster == (places[-1].cluster if places else placement_of(s.obj))


def check_new_pods_reach_a_mirror_only_where_admission_allowed(s: Snapshot, plan: Plan) -> None:
    """A patch that changes a mirror's pod templates goes only with the manager's yes."""
    for action in plan.actions:
        if not isinstance(action, PatchMirror):
            continue
        target = next(state for state in s.workers if state.name == action.cluster)
        assert target.seen is not None
        before = KIND.pod_templates(target.seen)
        if KIND.pod_templates(apply_merge_patch(target.seen, action.patch)) != before:
            assert s.admission is not None and s.admission.allowed


CHECKS = (
    check_forged_mirrors_move_nothing,
    check_never_two_live_mirrors,
    check_status_writes_are_always_legal,
    check_placements_go_where_the_workload_can_run,
    check_decide_is_deterministic_and_pure,
    check_deletes_touch_only_our_mirrors_and_never_a_running_one,
    check_a_read_once_given_is_not_asked_for_again,
    check_a_first_placement_only_where_admission_allowed,
    check_new_pods_reach_a_mirror_only_where_admission_allowed,
    check_earlier_runs_go_from_workers_that_answer,
)


# One generated snapshot feeds every check: generating it is most of the cost.
@PROPERTY_SETTINGS
@given(snapshots())
def test_the_promises_hold_for_any_snapshot(s: Snapshot) -> None:
    before = copy.deepcopy((s.obj, s.workers))
    plan = decide(s)
    assert (s.obj, s.workers) == before, "decide changed its input"
    for check in CHECKS:
        check(s, plan)
