"""Second step: what contradicts the workload's own record. Pure.

- A mirror that carries its marks but that jobrelay did not create is told of
  and left alone (only a fresh read makes a mirror foreign: the cache may lag
  our own writes).
- Its followed mirror runs on a worker its placements do not end with (hand
  edits of both annotations): that mirror stays the one followed and becomes the
  placement, unless that worker may not be given the workload: then it is
  stopped there first.
- Its followed mirror is being deleted off its placement: nothing runs where it
  is placed until that one is gone.
- Its placement annotation was edited: it is set back (it belongs to jobrelay).
"""

from __future__ import annotations

from collections.abc import Iterator

from jobrelay.controller.relay.mirror_standing import Standing, excluded_for, standing
from jobrelay.controller.relay.plan import Action, Done, Plan, ReadFresh, Retry
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.facts import live_mirror_of, meta, namespace, requeued
from jobrelay.controller.relay.steps.plan_parts import delete, place, warning
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer, Stop
from jobrelay.kinds.mirrors import run_of
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, PLACEMENTS_ANNOTATION
from jobrelay.vocabulary.placement import placement_of, placements_of


class ConflictStep:
    name = "conflicts"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj = progress.obj
        if not s.fresh and _any_foreign(s, obj):
            # The management object's cache may lag our own writes (the placement and the
            # record of a mirror just created): only a fresh read makes a mirror foreign.
            return progress.plan(ReadFresh(obj=True))
        progress.actions.extend(_foreign_reports(s, obj))
        history = progress.history = placements_of(obj)
        cluster = progress.cluster = placement_of(obj)
        # A fresh read of a worker, when there is one, is truer than its cache.
        live = progress.live = [w for w in s.workers if live_mirror_of(w.seen, obj, s, w.name)]
        if history and live and all(w.name != history[-1] for w in live):
            return Stop(_runs_elsewhere(s, obj, live[0], history, progress.actions))
        going = _followed_going_elsewhere(s, obj, history)
        if going is not None:
            return progress.plan(Retry(f"waiting for its mirror on {going} to be gone"))
        progress.requeued = requeued(obj, cluster, history)
        if history and cluster != history[-1] and not progress.requeued:
            # The placement annotation belongs to jobrelay: an edit would move the workload
            # while its mirror may run, so it is undone.
            message = (
                f"the annotation {CLUSTER_ANNOTATION} is set by jobrelay and was changed to "
                f"{cluster or '(nothing)'}: set back to {history[-1]}. To move a workload, "
                f"drain its worker (jobrelay clusters drain {history[-1]}), or delete and "
                f"re-create it"
            )
            progress.actions.extend(warning("PlacementRestored", message))
            progress.actions.append(place(obj, history[-1], history))
            return progress.plan(Done())
        return Continue()


def _runs_elsewhere(
    s: Snapshot,
    obj: JsonObj,
    running: WorkerSnapshot,
    history: tuple[str, ...],
    actions: list[Action],
) -> Plan:
    """Its recorded mirror runs on ``running``, which its placements do not end with.

    The one that runs stays the one followed, and the user is told; unless that
    worker is one the workload may not be given: then it is stopped there first.
    """
    elsewhere = running.name
    excluded = excluded_for(running, namespace(obj))
    if isinstance(excluded, NotKnownYet):
        return Plan(tuple(actions), Retry(f"the namespaces of {elsewhere} are not known yet"))
    if excluded is not None:
        return _stop_excluded(running, history, excluded, actions)
    message = (
        f"placed on worker cluster {history[-1]} (annotations {CLUSTER_ANNOTATION}, "
        f"{PLACEMENTS_ANNOTATION}) while its mirror runs on {elsewhere}; jobrelay does not "
        f"move a running workload behind its own back and keeps following the mirror on "
        f"{elsewhere}, and records it as the placement"
    )
    actions.extend(warning("PlacementConflict", message))
    actions.append(place(obj, elsewhere, (*history[:-1], elsewhere)))
    return Plan(tuple(actions), Done())


def _stop_excluded(
    worker: WorkerSnapshot, history: tuple[str, ...], excluded: str, actions: list[Action]
) -> Plan:
    """Its recorded mirror runs off its placement, on a worker it may not be given: that
    run is stopped (its pods gone first) and the workload stays where it is placed."""
    message = (
        f"placed on worker cluster {history[-1]} (annotations {CLUSTER_ANNOTATION}, "
        f"{PLACEMENTS_ANNOTATION}) while its mirror runs on {worker.name}; {excluded}, so "
        f"it is not placed there: its mirror there is stopped and it runs on {history[-1]}"
    )
    actions.extend(warning("PlacementConflict", message))
    if worker.connected and worker.seen is not None:
        actions.append(delete(worker.name, worker.seen, excluded, wait_for_pods=True))
    return Plan(tuple(actions), Retry(f"waiting for its mirror on {worker.name} to be gone"))


def _followed_going_elsewhere(s: Snapshot, obj: JsonObj, history: tuple[str, ...]) -> str | None:
    """The worker, off its placement, where its followed mirror is being deleted: nothing
    runs where it is placed until that one is gone (never two runs at once). One that
    does not answer cannot say when: it is not waited for (its return deletes it)."""
    if not history:
        return None
    for worker in s.workers:
        seen = worker.seen
        if (
            worker.name != history[-1]
            and worker.connected
            and seen is not None
            and standing(s, obj, worker.name, seen) is Standing.FOLLOWED
            and not live_mirror_of(seen, obj, s, worker.name)
        ):
            return worker.name
    return None


def _any_foreign(s: Snapshot, obj: JsonObj) -> bool:
    return any(
        w.seen is not None and standing(s, obj, w.name, w.seen) is Standing.FOREIGN
        for w in s.workers
    )


def _foreign_reports(s: Snapshot, obj: JsonObj) -> Iterator[Action]:
    """Tell of every object that carries this workload's marks but that jobrelay did not
    create: it is left alone, neither followed nor deleted."""
    for worker in s.workers:
        seen = worker.seen
        if seen is None or standing(s, obj, worker.name, seen) is not Standing.FOREIGN:
            continue
        kind = s.kind.ref.kind
        message = (
            f"worker cluster {worker.name} has a {kind} {s.key.key} (uid "
            f"{meta(seen).get('uid')}, run {run_of(seen)}) that carries this {kind}'s marks "
            f"but that jobrelay did not create: it is not followed and left alone"
        )
        yield from warning("ForeignMirror", message)
