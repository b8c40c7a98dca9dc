"""A managed workload's row: where it stands, why, where it runs and ran. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.standing import State, completions, standing
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import QUEUE_LABEL
from jobrelay.vocabulary.placement import placement_of, placements_of

__all__ = ["WorkloadRow", "workload_row"]


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    """One managed workload, as every view shows it."""

    kind: str
    plural: str
    namespace: str
    name: str
    uid: str
    state: State
    reason: str  # why it stands so ("" when its state says it all)
    worker: str  # where it is placed ("" for nowhere)
    placements: tuple[str, ...]  # every worker it was placed on, the last is the current
    queue: str  # its RelayQueue ("" for none)
    created: str
    completions: str
    active: str  # its status's active and failed pod counts ("-" when not said)
    failed: str


def workload_row(
    kind: WorkloadKind, obj: Mapping[str, Any], *, queue: str | None = None
) -> WorkloadRow:
    """``obj``'s row; ``queue``: its RelayQueue as admission chose it (None: as its label
    names it)."""
    meta, status = Meta(obj), obj.get("status") or {}
    where = standing(kind, obj)
    return WorkloadRow(
        kind=kind.ref.kind,
        plural=kind.ref.plural,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        state=where.state,
        reason=where.reason,
        worker=placement_of(obj),
        placements=placements_of(obj),
        queue=str(meta.label(QUEUE_LABEL) or "") if queue is None else queue,
        created=meta.creation_timestamp,
        completions=completions(obj, kind),
        active=str(status.get("active", "-")),
        failed=str(status.get("failed", "-")),
    )
