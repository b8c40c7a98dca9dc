"""Creating a workload's mirror where it is placed, once nothing stands in the way;
and placing it elsewhere when a worker holds, under its names, what jobrelay did
not make. Asked by the mirror step. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobrelay.admission.workload_reads import preset_placement
from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    CopyDependencies,
    CreateMirror,
    Done,
    Plan,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
)
from jobrelay.controller.relay.refusal_wording import DEPENDENCY_NOT_COPIED, MIRROR_REJECTED
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.claiming_capacity import with_consumed_capacity
from jobrelay.controller.relay.steps.facts import namespace, uid
from jobrelay.controller.relay.steps.holds import BEFORE_CREATING, first_hold
from jobrelay.controller.relay.steps.mirror_record import RECORD_AFTER
from jobrelay.controller.relay.steps.moving import Leave, move
from jobrelay.controller.relay.steps.placement_search import (
    NAMESAKE,
    Unplaceable,
    excluded_workers,
    not_placed,
    placement,
)
from jobrelay.controller.relay.steps.plan_parts import place, warning
from jobrelay.controller.relay.steps.status_writes import end_of_run, vanished_mirror
from jobrelay.dependencies.copy_rules import refusal
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION
from jobrelay.vocabulary.outcome import Lane
from jobrelay.vocabulary.placement import mirror_records, placements_of, without_records_from

# Seconds before a decision that found its create pending looks again (the create's
# echo, which the create's answer already told, is not looked at).
CREATE_PENDING_LOOK = 1.0


def create(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot,
    run: int,
    *,
    placed_now: bool,
    actions: list[Action],
) -> Plan:
    """No mirror of this run is on its worker: create it, after what a lost one did counts."""
    kind, cluster = s.kind, worker.name
    if worker.create_pending:
        # Its watch event may echo the create just as answered, which is not looked at.
        return Plan(tuple(actions), RequeueAfter(CREATE_PENDING_LOOK))
    if not placed_now and not s.fresh:
        # The caches may lag our own writes: a mirror deleted after its final
        # status was copied must not come back because the cached object does
        # not show that status yet. Only the apiserver's copy can tell.
        return Plan(tuple(actions), ReadFresh(obj=True))
    # Whoever set the placement (a user may preset or edit the annotations where no
    # admission policy stops them), a mirror is created only for pods the manager
    # admits, with what they need there, and never on a worker that takes no new mirrors.
    hold = first_hold(BEFORE_CREATING, s, obj)
    if hold is not None:
        return Plan((*actions, *hold.actions), hold.outcome, held=hold.held)
    if not placed_now and preset_placement(obj):
        return _placed_anew(s, obj, actions)
    elsewhere = _not_here(s, obj, worker, placed_now=placed_now, actions=actions)
    if elsewhere is not None:
        return elsewhere
    vanished = vanished_mirror(s, obj, worker)
    # Pods shown running while no mirror exists: this run's mirror went without a trace.
    was_running = kind.has_run(obj) and kind.shows_running(obj)
    ended = end_of_run(s, obj, vanished, cluster, actions)
    if isinstance(ended, Plan):
        return ended
    if ended is not None:
        if vanished is not None:
            return Plan(tuple(actions), Done())  # create from the status just written
        obj = {**obj, "status": ended.status}
    if not placed_now and (vanished is not None or was_running):
        message = (
            f"the mirror on worker cluster {cluster} was deleted outside jobrelay: running "
            f"again there, with what earlier runs did carried over"
        )
        actions.extend(warning("MirrorVanished", message))
    body = kind.build_mirror(
        obj, controller_name=s.settings.controller_name, origin=s.settings.origin,
        run=run, now=s.now,
    )  # fmt: skip
    body = with_consumed_capacity(s, obj, worker, body)  # capacity provisioned for it there
    if any(recorded >= run for recorded in mirror_records(obj)):
        # This run's record names a mirror that is gone: it goes before another is
        # created, so that a restart between the create and its record adopts the new one.
        actions.append(Annotate(without_records_from(obj, run)))
    # Its ConfigMaps, Secrets and ServiceAccount first: its pods need them at once.
    actions.extend(copies(s, worker))
    actions.append(CreateMirror(cluster, body, uid(obj) or "", run, if_refused=MIRROR_REJECTED))
    actions.append(RecordEvent("Normal", "Dispatched", f"Dispatched to worker cluster {cluster}"))
    # The create's echo is not looked at (change_routing.py), nor the placement's this
    # decision went on from: its mirror's next change is, or this look when its record
    # is due.
    return Plan(tuple(actions), RequeueAfter(RECORD_AFTER, Lane.BACKGROUND), echo_needed=False)


def _placed_anew(s: Snapshot, obj: JsonObj, actions: list[Action]) -> Plan:
    """A preset placement (set by whoever created the workload, not by jobrelay), its
    queue's admission passed: placed as jobrelay places any workload (the namespace's
    placement policy, the filters), never just where the preset says; the mirror is
    created once the placement is jobrelay's."""
    placed = placement(s, obj, excluded_workers(s), actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, Unplaceable):
        actions.append(Annotate({CLUSTER_ANNOTATION: None}))  # the preset is no placement
        return not_placed(s, placed, actions)
    actions.append(place(obj, placed.cluster, (placed.cluster,), placed.demand))
    return Plan(tuple(actions), Done())


def _not_here(
    s: Snapshot, obj: JsonObj, worker: WorkerSnapshot, *, placed_now: bool, actions: list[Action]
) -> Plan | None:
    """The plan when its mirror may not be created on ``worker`` after all (None: it
    may): the worker takes no new mirrors, the namespace there is not open (or not known
    yet), or a name its pods need is held there by an object jobrelay did not make."""
    cluster = worker.name
    if worker.cordoned and not placed_now:
        leave = Leave(f"worker cluster {cluster} is cordoned: it takes no new mirrors", lost=False)
        return move(s, obj, worker, cluster, placements_of(obj), leave, actions)
    closed = worker.namespaces.refusal(namespace(obj)) if worker.namespaces else None
    if isinstance(closed, NotKnownYet):
        return Plan(tuple(actions), Retry(f"the namespaces of {cluster} have not listed yet"))
    if closed is not None and not placed_now:
        # Placed by hand there, or the namespace changed hands since: never into it.
        leave = Leave(f"worker cluster {cluster}: {closed}", lost=False)
        return move(s, obj, worker, cluster, placements_of(obj), leave, actions)
    if worker.foreign_dependencies:
        return _foreign_dependencies(s, obj, worker, actions)
    return None


def copies(s: Snapshot, worker: WorkerSnapshot) -> Iterator[Action]:
    """Copy what its pods need onto ``worker`` where our copy is missing or differs from
    the manager's (a copy another workload made is shared as it is: never rewritten)."""
    if not s.dependencies or s.obj is None:
        return
    stale = []
    for needed in s.dependencies:
        source = needed.source
        if source is None or refusal(needed.dependency, source) is not None:
            continue
        if str(needed.dependency) in worker.foreign_dependencies:
            continue  # someone else's there (a mirror made before jobrelay copied): left alone
        copy = worker.copies.get(str(needed.dependency))
        if copy is None or copy.digest != source.digest:
            stale.append(needed.dependency)
    if stale:
        yield CopyDependencies(
            worker.name, namespace(s.obj), tuple(stale), if_refused=DEPENDENCY_NOT_COPIED
        )


def collision(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot, actions: list[Action]) -> Plan:
    """A namesake jobrelay did not create holds the name: never touch it, place elsewhere."""
    if not s.probed:
        return Plan(tuple(actions), ReadFresh(probe=True))
    foreign = {**excluded_workers(s), worker.name: NAMESAKE}
    key, kind = s.key, s.kind.ref.kind
    message = (
        f"worker cluster {worker.name} already has a {kind} {key.key} that jobrelay did not "
        f"create; it is left alone and this {kind} is placed elsewhere"
    )
    actions.extend(warning("NameCollision", message))
    placed = placement(s, obj, foreign, actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, Unplaceable):
        return not_placed(s, placed, actions)
    # The watch event of the new placement brings the key back to create the mirror there.
    actions.append(place(obj, placed.cluster, (placed.cluster,), placed.demand))
    return Plan(tuple(actions), Done())


def _foreign_dependencies(
    s: Snapshot, obj: JsonObj, worker: WorkerSnapshot, actions: list[Action]
) -> Plan:
    """A name its pods need is held on its worker by an object jobrelay did not make:
    never overwritten; the workload goes elsewhere (no mirror of it ever ran there)."""
    kind = s.kind.ref.kind
    held = ", ".join(worker.foreign_dependencies)
    message = (
        f"worker cluster {worker.name}: {held} in {namespace(obj)} "
        f"{'was' if len(worker.foreign_dependencies) == 1 else 'were'} not made by jobrelay; "
        f"left alone, and this {kind} is placed elsewhere"
    )
    history = placements_of(obj)
    placed = placement(s, obj, excluded_workers(s), actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, Unplaceable):
        return not_placed(s, placed, actions)
    actions.extend(warning("ForeignDependency", message))
    actions.append(place(obj, placed.cluster, (*history[:-1], placed.cluster), placed.demand))
    return Plan(tuple(actions), Done())
