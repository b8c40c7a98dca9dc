"""What the steps read off the management object and its mirrors, the same way
everywhere. Pure.

Read as the decision always read them: a field that is missing reads as the
text ``None`` (``str(None)``), never as a match.
"""

from __future__ import annotations

from typing import Any

from jobrelay.controller.relay.mirror_standing import is_current
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import annotations_of
from jobrelay.vocabulary.names import (
    PREEMPTED_BY_ANNOTATION,
    REDISPATCH_ALWAYS,
    REDISPATCH_ANNOTATION,
    REDISPATCH_NEVER,
)


def meta(obj: JsonObj) -> dict[str, Any]:
    found: dict[str, Any] = obj.get("metadata") or {}
    return found


def uid(obj: JsonObj | None) -> str | None:
    return None if obj is None else str(meta(obj).get("uid"))


def version(obj: JsonObj) -> str:
    return str(meta(obj).get("resourceVersion"))


def name(obj: JsonObj) -> str:
    return str(meta(obj).get("name"))


def namespace(obj: JsonObj) -> str:
    return str(meta(obj).get("namespace"))


def preempted_by(obj: JsonObj) -> str:
    return str(annotations_of(obj).get(PREEMPTED_BY_ANNOTATION) or "").strip()


def requeued(obj: JsonObj, cluster: str, history: tuple[str, ...]) -> bool:
    """Preempted, its run ended: unplaced with its placements kept, back in its queue."""
    return bool(history) and not cluster and bool(preempted_by(obj))


def redispatch_never(obj: JsonObj) -> bool:
    return str(annotations_of(obj).get(REDISPATCH_ANNOTATION) or "").strip() == REDISPATCH_NEVER


def redispatch_always(obj: JsonObj) -> bool:
    return str(annotations_of(obj).get(REDISPATCH_ANNOTATION) or "").strip() == REDISPATCH_ALWAYS


def live_mirror_of(mirror: JsonObj | None, obj: JsonObj, s: Snapshot, where: str) -> bool:
    """Whether ``mirror`` on ``where`` is the one followed, and not going."""
    return (
        mirror is not None
        and is_current(s, obj, where, mirror)
        and not meta(mirror).get("deletionTimestamp")
        and str(meta(mirror).get("uid")) not in s.deleting
    )
