"""When a created mirror's record is written (steps/mirror_record.py): a table, and a
property that the record never shares a decision with another write to the object."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.controller.builders import job

from jobrelay.controller.relay.plan import (
    Annotate,
    Done,
    Plan,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
    WriteStatus,
)
from jobrelay.controller.relay.steps.mirror_record import (
    RECORD_AFTER,
    awaiting_record,
    with_mirror_record,
)
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.vocabulary.names import MIRRORS_ANNOTATION
from jobrelay.vocabulary.outcome import Lane

RECORD = Annotate({MIRRORS_ANNOTATION: "1:w1:uid-m"})
STATUS = WriteStatus({"active": 1}, "7", {"active": 1})
EVENT = RecordEvent("Normal", "Dispatched", "on w1")
LATER = RequeueAfter(RECORD_AFTER - 1.0, Lane.BACKGROUND)


@pytest.mark.parametrize(
    ("plan", "age", "expected"),
    [
        # Due, nothing else written to the object: written last.
        (Plan((EVENT,), Done()), RECORD_AFTER, Plan((EVENT, RECORD), Done())),
        (Plan((), RequeueAfter(30.0)), RECORD_AFTER + 1, Plan((RECORD,), RequeueAfter(30.0))),
        # Not due yet: back in the background lane when it is.
        (Plan((), Done()), 1.0, Plan((), LATER)),
        # Due, but a status write compares against the version the record would change.
        (Plan((STATUS,), Done()), RECORD_AFTER, Plan((STATUS,), RequeueAfter(1.0, Lane.BACKGROUND))),
        # A status step batching, a retry, a fresh read: left as they are (they come back).
        (Plan((), RequeueAfter(0.4), batching=True), RECORD_AFTER, Plan((), RequeueAfter(0.4), batching=True)),
        (Plan((), Retry("later")), RECORD_AFTER, Plan((), Retry("later"))),
        (Plan((), ReadFresh(obj=True)), RECORD_AFTER, Plan((), ReadFresh(obj=True))),
    ],
)  # fmt: skip
def test_the_record_is_written_alone_once_due(plan: Plan, age: float, expected: Plan) -> None:
    assert with_mirror_record(plan, RECORD, age) == expected


@given(
    actions=st.lists(st.sampled_from([STATUS, EVENT, Annotate({"x": "y"})]), max_size=4),
    age=st.floats(min_value=0, max_value=3 * RECORD_AFTER),
    outcome=st.sampled_from([Done(), RequeueAfter(3.0), Retry("r")]),
)
def test_the_record_never_shares_a_decision_with_another_object_write(
    actions: list[WriteStatus | RecordEvent | Annotate], age: float, outcome: object
) -> None:
    plan = Plan(tuple(actions), outcome)  # type: ignore[arg-type]
    planned = with_mirror_record(plan, RECORD, age)
    if RECORD in planned.actions:
        assert age >= RECORD_AFTER
        assert not any(isinstance(a, WriteStatus | Annotate) for a in plan.actions)
        assert planned.actions[-1] == RECORD
    else:
        # Never dropped silently: a decision that would end looks again.
        assert not isinstance(planned.outcome, Done)


def test_only_an_unfinished_object_without_that_runs_record_waits() -> None:
    kind = JobKind()
    obj = job()
    assert awaiting_record(kind, obj)(1)
    obj["metadata"].setdefault("annotations", {})[MIRRORS_ANNOTATION] = "1:w1:uid"
    assert not awaiting_record(kind, obj)(1)
    assert awaiting_record(kind, obj)(2)
    assert not awaiting_record(kind, None)(1)
