"""The actions the steps build the same way: a warning told twice (an Event and the
log), a mirror's deletion, a placement, a finish Event, and the not-placed
annotation's text. Pure.
"""

from __future__ import annotations

import re

from jobrelay.controller.relay.plan import ENDED_BY_PLACING, DeleteMirror, Log, Place, RecordEvent
from jobrelay.controller.relay.steps.facts import meta, name, namespace, version
from jobrelay.kinds.base import Finish
from jobrelay.placement.workload import PodGroup
from jobrelay.vocabulary.json_types import JsonObj

# The not-placed annotation says why in a line; an explanation over many workers (or
# quoting a tenant's long annotation) must not grow the object toward its size limit.
NOT_PLACED_LIMIT = 2048

# What changes in an explanation while its reason does not: counts, per-node detail.
_DETAILS = re.compile(r"\([^)]*\)|\d+")


def warning(reason: str, message: str) -> tuple[RecordEvent, Log]:
    """A Warning Event on the workload, and the same in the controller's log."""
    return RecordEvent("Warning", reason, message), Log("warning", message)


def delete(cluster: str, mirror: JsonObj, why: str, *, wait_for_pods: bool = False) -> DeleteMirror:
    return DeleteMirror(
        cluster,
        name(mirror),
        namespace(mirror),
        str(meta(mirror).get("uid")),
        why,
        wait_for_pods=wait_for_pods,
    )


def place(
    obj: JsonObj,
    cluster: str,
    history: tuple[str, ...],
    demand: tuple[PodGroup, ...] = (),
    sets: tuple[tuple[str, str], ...] = (),
) -> Place:
    """Place ``obj`` on ``cluster`` (compare-and-swap on the version read), which ends
    its waiting: the annotations that said why go in the same write."""
    return Place(cluster, version(obj), history, demand, clears=ENDED_BY_PLACING, sets=sets)


def finish_event(finish: Finish, cluster: str, *, completed_events: bool) -> RecordEvent | None:
    """The Event a finish gets: a failure always a Warning; a success a Normal
    ``Completed`` only with ``--completed-events``, since the status's own finished
    condition says the same and the Event cost every Job a manager write (issue 36)."""
    if finish.succeeded:
        if not completed_events:
            return None
        return RecordEvent("Normal", "Completed", f"Completed on worker cluster {cluster}")
    detail = f"{finish.reason} {finish.message}".strip()
    return RecordEvent(
        "Warning", "Failed", f"Failed on worker cluster {cluster}: {detail}".rstrip(": ")
    )


def bounded(text: str) -> str:
    """``text``, cut to what the not-placed annotation holds."""
    if len(text) <= NOT_PLACED_LIMIT:
        return text
    return f"{text[: NOT_PLACED_LIMIT - 40]}... ({len(text) - NOT_PLACED_LIMIT + 40} more)"


def without_details(text: str) -> str:
    """``text`` with what changes while its reason stays (counts, per-node detail) left
    out: the signature of a reason told once."""
    return _DETAILS.sub("#", text)
