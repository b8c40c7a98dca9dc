"""Workers that answer nonsense cannot hurt the manager.

A mirror's status is written by a worker jobrelay does not control: any JSON
at all may come back. Whatever it is, deciding never raises, and a status
write it leads to is always one the Job rules accept; what cannot be read
becomes a StatusNotCopied Warning (a Terminal outcome), not a retry loop.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.controller.builders import RUNNING, job, mirror, snapshot, worker

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import Terminal, WriteStatus
from jobrelay.kinds.job.adapter import JobKind

KIND = JobKind()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=8),
)
anything = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = (
    "active", "ready", "terminating", "succeeded", "failed", "startTime", "completionTime",
    "completedIndexes", "failedIndexes", "conditions", "uncountedTerminatedPods",
)  # fmt: skip
condition = st.fixed_dictionaries(
    {"type": st.sampled_from(["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "x"])},
    optional={"status": anything, "reason": anything, "message": anything},
)
statuses = st.dictionaries(
    st.sampled_from(FIELDS),
    st.one_of(anything, st.lists(condition, max_size=3)),
    max_size=6,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(statuses, st.booleans())
def test_any_mirror_status_leads_to_a_legal_write_or_a_warning(
    theirs: dict[str, Any], vanished: bool
) -> None:
    obj = job(placed="w1", status=RUNNING)
    nonsense = mirror(job(), status=theirs)
    state = worker("w1", vanished=nonsense) if vanished else worker("w1", mirror=nonsense)
    s = snapshot(obj, state, fresh=True)
    before = copy.deepcopy(theirs)
    plan = decide(s)  # never raises
    assert theirs == before
    for action in plan.actions:
        if isinstance(action, WriteStatus):
            assert KIND.status_violations(obj, {**obj, "status": action.status}) == []
    if isinstance(plan.outcome, Terminal):
        assert plan.outcome.reason == "StatusNotCopied"
