"""The decision: what one management object and its mirrors need next. Pure.

``decide(snapshot) -> Plan``: no I/O, no clock (the time is in the snapshot),
no state. Every rule that keeps a workload's promise is here, where a table
test reaches it in microseconds:

- a workload is placed once, by a compare-and-swap of its placement
  annotation written *before* its mirror exists;
- it never has two live mirrors: a mirror is created only where it is placed,
  only when no live mirror of it exists anywhere (one that does is followed,
  wherever the annotation points), and only after a fresh read shows it
  unfinished (a lagging cache must not resurrect a finished one);
- a namesake on a worker that jobrelay did not create is never touched;
- the management status follows the mirror's and is never written when the
  kind's rules would refuse it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jobrelay.controller.relay.plan import (
    Action,
    CreateMirror,
    DeleteMirror,
    Done,
    Log,
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
from jobrelay.controller.relay.snapshot import Snapshot, WorkerState
from jobrelay.kinds.base import Finish
from jobrelay.kinds.mirrors import is_mirror_of, is_ours, origin_uid
from jobrelay.kinds.naming import CLUSTER_ANNOTATION
from jobrelay.kinds.patches import merge_patch
from jobrelay.kinds.types import JsonObj
from jobrelay.placement.leastloaded import Candidate, place


def _meta(obj: JsonObj) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


def placement_of(obj: JsonObj) -> str:
    """The worker the object is placed on (its placement annotation), or ``""``."""
    return str((_meta(obj).get("annotations") or {}).get(CLUSTER_ANNOTATION) or "")


def with_placement(obj: JsonObj, cluster: str) -> JsonObj:
    metadata = _meta(obj)
    annotations = {**(metadata.get("annotations") or {}), CLUSTER_ANNOTATION: cluster}
    return {**obj, "metadata": {**metadata, "annotations": annotations}}


def decide(s: Snapshot) -> Plan:
    obj = s.obj
    if obj is None or _meta(obj).get("deletionTimestamp"):
        return Plan(tuple(_deletions(s, keep_uid=None)), Done(), release=True)
    uid = str(_meta(obj).get("uid"))
    kind = s.kind
    if kind.is_finished(obj):
        # The final status is on the management object: the mirror has served its purpose.
        keep = uid if s.settings.keep_finished_mirrors else None
        return Plan(tuple(_deletions(s, keep_uid=keep)), Done(), release=True)
    actions: list[Action] = list(_deletions(s, keep_uid=uid))

    cluster = placement_of(obj)
    # A fresh read of a worker, when there is one, is truer than its cache.
    live = [w for w in s.workers if _live_mirror_of(w.seen, obj, s)]
    if cluster and live and all(w.name != cluster for w in live):
        # Placed on one worker while its mirror lives on another (a hand edit of
        # the annotation): a mirror where it points would run it twice. The one
        # that runs stays the one followed, and the user is told.
        elsewhere = live[0].name
        message = (
            f"placed on worker cluster {cluster} (annotation {CLUSTER_ANNOTATION}) while its "
            f"mirror runs on {elsewhere}; jobrelay does not move a running workload and keeps "
            f"following the mirror on {elsewhere}: set the annotation back to {elsewhere}, or "
            f"delete and re-create the {kind.ref.kind} to run it elsewhere"
        )
        actions.append(RecordEvent("Warning", "PlacementConflict", message))
        actions.append(Log("warning", message))
        cluster = elsewhere

    placed_now = False
    if not cluster:
        if kind.is_suspended(obj):
            # Created suspended: nothing runs anywhere until it is resumed.
            write = _status_write(s, obj, None)
            if isinstance(write, Terminal):
                return Plan(tuple(actions), write)
            return Plan(tuple(actions) + ((write,) if write else ()), Done())
        if live:
            cluster = live[0].name  # its placement annotation was lost: keep the mirror it has
        else:
            decision = place(_candidates(s), excluded=_foreign_holders(s))
            if decision.cluster is None:
                message = f"no worker cluster can take this {kind.ref.kind}: {decision.explain()}"
                actions.append(RecordEvent("Warning", "NoWorkerAvailable", message))
                actions.append(Log("warning", message))
                return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
            cluster = decision.cluster
        actions.append(Place(cluster, str(_meta(obj).get("resourceVersion"))))
        obj = with_placement(obj, cluster)
        placed_now = True

    worker = s.worker(cluster)
    if worker is None:
        actions.append(
            RecordEvent(
                "Warning",
                "WorkerUnavailable",
                f"placed on worker cluster {cluster}, which is not registered or not connected",
            )
        )
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
    if not worker.synced:
        return Plan(tuple(actions), Retry(f"the mirror cache of {cluster} has not listed yet"))

    seen = worker.seen
    mirror: JsonObj | None = None
    if seen is not None and is_mirror_of(seen, obj, s.settings.controller_name):
        mirror = seen
    elif seen is not None and is_ours(seen, s.settings.controller_name):
        # An earlier object of this name left its mirror: it goes before ours can be created
        # (by the deletions above when the cache shows it, else here).
        if worker.read_done and _uid(seen) not in s.deleting | {_uid(worker.mirror)}:
            actions.append(
                _delete(worker.name, seen, "it belongs to an earlier object of this name")
            )
        return Plan(tuple(actions), Retry("an earlier object's mirror is in the way"))
    elif seen is not None:
        return _collision(s, obj, worker, actions)

    if mirror is None:
        if worker.create_pending:
            return Plan(tuple(actions), Done())  # its watch event will bring the key back
        if not placed_now and not s.fresh:
            # The caches may lag our own writes: a mirror deleted after its final
            # status was copied must not come back because the cached object does
            # not show that status yet. Only the apiserver's copy can tell.
            return Plan(tuple(actions), ReadFresh(obj=True))
        if not placed_now and kind.has_run(obj):
            actions.append(
                Log("warning", f"the mirror of {s.key} is gone from {cluster}: creating it again")
            )
        body = kind.build_mirror(
            obj, controller_name=s.settings.controller_name, origin=s.settings.origin
        )
        actions.append(CreateMirror(cluster, body, uid))
        actions.append(
            RecordEvent("Normal", "Dispatched", f"Dispatched to worker cluster {cluster}")
        )
        return Plan(tuple(actions), Done())

    patch = kind.spec_patch(obj, mirror)
    if patch is not None:
        actions.append(PatchMirror(cluster, _name(mirror), _namespace(mirror), patch))
        if "suspend" in (patch.get("spec") or {}):
            verb = "Suspended" if kind.is_suspended(obj) else "Resumed"
            actions.append(
                RecordEvent("Normal", verb, f"{verb} the mirror on worker cluster {cluster}")
            )
    write = _status_write(s, obj, mirror)
    if isinstance(write, Terminal):
        return Plan(tuple(actions), write, release=True)
    if write is not None:
        actions.append(write)
        finish = kind.finish({**obj, "status": write.status})
        if finish is not None:
            actions.append(_finish_event(finish, cluster))
            if not s.settings.keep_finished_mirrors:
                actions.append(_delete(cluster, mirror, f"its {kind.ref.kind} has finished"))
    return Plan(tuple(actions), Done(), release=True)


def _finish_event(finish: Finish, cluster: str) -> RecordEvent:
    if finish.succeeded:
        return RecordEvent("Normal", "Completed", f"Completed on worker cluster {cluster}")
    detail = f"{finish.reason} {finish.message}".strip()
    return RecordEvent(
        "Warning", "Failed", f"Failed on worker cluster {cluster}: {detail}".rstrip(": ")
    )


def _status_write(
    s: Snapshot, obj: JsonObj, mirror: JsonObj | None
) -> WriteStatus | Terminal | None:
    """A status write when the status should change; Terminal if the kind's rules refuse it."""
    status = s.kind.next_status(obj, mirror, now=s.now)
    if status is None:
        return None
    violations = s.kind.status_violations(obj, {**obj, "status": status})
    if violations:
        return Terminal(
            "StatusNotCopied",
            "jobrelay will not write a status the API rules refuse (a jobrelay bug, please "
            f"report it): {'; '.join(violations)}",
        )
    patch = merge_patch(obj.get("status") or {}, status)
    return WriteStatus(patch, str(_meta(obj).get("resourceVersion")), status)


def _collision(s: Snapshot, obj: JsonObj, worker: WorkerState, actions: list[Action]) -> Plan:
    """A namesake jobrelay did not create holds the name: never touch it, place elsewhere."""
    if not s.probed:
        return Plan(tuple(actions), ReadFresh(probe=True))
    foreign = _foreign_holders(s) | {worker.name}
    key, kind = s.key, s.kind.ref.kind
    message = (
        f"worker cluster {worker.name} already has a {kind} {key.key} that jobrelay did not "
        f"create; it is left alone and this {kind} is placed elsewhere"
    )
    actions.append(RecordEvent("Warning", "NameCollision", message))
    actions.append(Log("warning", message))
    decision = place(_candidates(s), excluded=foreign)
    if decision.cluster is None:
        message = f"no worker cluster can take this {kind}: {decision.explain()}"
        actions.append(RecordEvent("Warning", "NoWorkerAvailable", message))
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
    # The watch event of the new placement brings the key back to create the mirror there.
    actions.append(Place(decision.cluster, str(_meta(obj).get("resourceVersion"))))
    return Plan(tuple(actions), Done())


def _foreign_holders(s: Snapshot) -> frozenset[str]:
    """The workers a fresh read showed holding a namesake jobrelay did not create."""
    return frozenset(
        w.name
        for w in s.workers
        if w.read_done and w.read is not None and not is_ours(w.read, s.settings.controller_name)
    )


def _candidates(s: Snapshot) -> list[Candidate]:
    return [
        Candidate(
            name=w.name, connected=w.connected and w.synced, cordoned=w.cordoned, active=w.load
        )
        for w in s.workers
    ]


def _live_mirror_of(mirror: JsonObj | None, obj: JsonObj, s: Snapshot) -> bool:
    return (
        mirror is not None
        and is_mirror_of(mirror, obj, s.settings.controller_name)
        and not _meta(mirror).get("deletionTimestamp")
        and str(_meta(mirror).get("uid")) not in s.deleting
    )


def _deletions(s: Snapshot, *, keep_uid: str | None) -> Iterator[DeleteMirror]:
    """Delete every cached mirror of this key but those of ``keep_uid`` (and those going)."""
    for worker in s.workers:
        mirror = worker.mirror
        if mirror is None or _meta(mirror).get("deletionTimestamp"):
            continue
        if str(_meta(mirror).get("uid")) in s.deleting:
            continue
        if keep_uid is not None and origin_uid(mirror) == keep_uid:
            continue
        if s.obj is None or _meta(s.obj).get("deletionTimestamp"):
            why = f"its management {s.kind.ref.kind} is gone"
        elif origin_uid(mirror) != str(_meta(s.obj).get("uid")):
            why = "it belongs to an earlier object of this name"
        else:
            why = f"its {s.kind.ref.kind} has finished"
        yield _delete(worker.name, mirror, why)


def _delete(cluster: str, mirror: JsonObj, why: str) -> DeleteMirror:
    return DeleteMirror(
        cluster, _name(mirror), _namespace(mirror), str(_meta(mirror).get("uid")), why
    )


def _uid(obj: JsonObj | None) -> str | None:
    return None if obj is None else str(_meta(obj).get("uid"))


def _name(obj: JsonObj) -> str:
    return str(_meta(obj).get("name"))


def _namespace(obj: JsonObj) -> str:
    return str(_meta(obj).get("namespace"))
