"""Which work-queue lane a change goes to, and which keys a resync looks at. Pure.

New placements must not wait behind status copies, nor those behind a
resync (see :class:`jobrelay.kube.queueing.Lane`). And a resync must not cost
in proportion to what waits quietly: with 50,000 suspended Jobs held on the
manager, reconciling every key each minute is ~15 CPU-seconds a minute for
nothing, since only a watch event can give such a Job work to do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set

from jobrelay.kinds.base import WorkloadKey, WorkloadKind
from jobrelay.kube.queueing import Lane
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.placement import placement_of

__all__ = ["lane_of_change", "needs_resync", "resync_keys"]


def lane_of_change(
    kind: WorkloadKind,
    old: JsonObj | None,
    new: JsonObj | None,
    *,
    mirrored: bool,
    placed_here: str | None = None,
) -> Lane:
    """The lane of a management object's watch event (``old`` None: it was added, ``new``
    None: it is gone); ``mirrored``: a worker's cache holds a mirror of it;
    ``placed_here``: the worker this process placed it on and is making its mirror on
    (the placement's reservation), if any.

    FRESH when it needs a placement or a first action: not placed yet, just
    placed (or moved: its mirror is to be created), its spec changed (a
    suspend, a resume), or placed with no mirror anywhere. Anything else is
    a status copy or a clean-up: STATUS. So is an unplaced suspended object
    (only a status to write) and an added placed one (a start-up's or a
    relist's listing), whatever the mirror caches say, as they may not have
    listed yet: a restart's listing of 50,000 held or running workloads does
    not go ahead of new ones. And so is the echo of a placement this process
    wrote: the reconcile that wrote it creates the mirror (and is retried if
    it fails), so the echo is a look, not work. In FRESH it would hold the key
    behind a burst's placements, and every status of its mirror with it (a
    key waits in one lane, the highest it was asked for).
    """
    if new is None:
        return Lane.STATUS  # its mirrors are to be deleted
    placement = placement_of(new)
    if not placement:
        return Lane.STATUS if kind.is_suspended(new) else Lane.FRESH
    if old is None:
        return Lane.STATUS
    if Meta(new).generation != Meta(old).generation:
        return Lane.FRESH
    if placement != placement_of(old):
        return Lane.STATUS if placement == placed_here else Lane.FRESH
    return Lane.STATUS if mirrored else Lane.FRESH


def needs_resync(kind: WorkloadKind, obj: JsonObj, *, mirrored: bool) -> bool:
    """Whether a resync should look at a cached management object.

    Not when no watch event is needed for it to have work: finished (its
    mirrors, if any, make it ``mirrored``), or suspended before it was ever
    placed and with no mirror (it waits for its resume, which is an event).
    Everything else may need work a lost event would have brought: a mirror
    to collect or to bring in step, a status to copy, a placement.
    """
    if mirrored:
        return True
    if kind.is_finished(obj):
        return False
    return not (kind.is_suspended(obj) and not placement_of(obj))


def resync_keys(
    objects: Iterable[tuple[WorkloadKey, WorkloadKind, JsonObj]],
    mirrored: Set[WorkloadKey],
    kept: Callable[[WorkloadKind, JsonObj], bool] = lambda _kind, _obj: False,
) -> set[WorkloadKey]:
    """The keys a resync queues: every key with a mirror on some worker (orphans, drift),
    and every cached management object that :func:`needs_resync`; but not a finished
    workload whose mirror is ``kept`` for its logs: its one look at the deadline is
    queued already (an hour of finished Jobs would otherwise cost a reconcile each, every
    pass), and a new leader's start-up sweep queues it again."""
    keys = set(mirrored)
    for key, kind, obj in objects:
        if key in mirrored:
            if kept(kind, obj):
                keys.discard(key)
        elif needs_resync(kind, obj, mirrored=False):
            keys.add(key)
    return keys
