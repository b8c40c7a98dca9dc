"""Held by the manager's admission: its Pod Security (or another pod policy) must
admit the workload's pods, which it would never see otherwise (they are created on
a worker)."""

from __future__ import annotations

from jobrelay.controller.relay.plan import ReadFresh, RequeueAfter
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.plan_parts import warning
from jobrelay.controller.relay.steps.step_types import Hold
from jobrelay.vocabulary.json_types import JsonObj


class HeldByAdmission:
    """Asked before a first placement, before any mirror is created and before a
    pod-template change reaches one. A refused workload stays unplaced, told why, and
    is asked about again now and then (a relabelled namespace lets it run)."""

    name = "admission"

    def hold(self, s: Snapshot, obj: JsonObj) -> Hold | None:
        del obj  # the verdict on its pods is in the snapshot, once asked for
        verdict = s.admission
        if verdict is None:
            return Hold((), ReadFresh(admission=True))
        if verdict.allowed:
            return None
        return Hold(
            warning(verdict.reason, verdict.message), RequeueAfter(s.settings.unplaceable_retry)
        )
