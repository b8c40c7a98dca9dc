"""Property tests: whatever order mirror statuses arrive in, the Job's status writes stay legal.

The histories come from a model of the built-in controller (jobsim); the judge
is contract.status_violations, itself checked against those histories and
against known-bad writes in test_contract.py.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.kinds.job.jobsim import JobShape, comparable, management_job, ts
from tests.unit.kinds.job.strategies import histories

from jobrelay.kinds.job import JsonObj
from jobrelay.kinds.job.conditions import SUSPENDED
from jobrelay.kinds.job.contract import status_violations
from jobrelay.kinds.job.status import is_finished, next_status

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


def deliver(job: JsonObj, mirror: JsonObj | None, step: int) -> JsonObj:
    """One sync of the management Job; fail on a write the apiserver would reject."""
    status = next_status(job, mirror, now=ts(10_000 + step))
    if status is None:
        return job
    updated = {**job, "status": status}
    violations = status_violations(job, updated)
    assert violations == [], (violations, job.get("status"), status)
    return updated


def shown_indexes(job: JsonObj, field: str) -> set[int]:
    """The indexes a Job shows in completedIndexes or failedIndexes, as a set."""
    shown: set[int] = set()
    for item in filter(None, (job.get("status", {}).get(field) or "").split(",")):
        first, _, last = item.partition("-")
        shown.update(range(int(first), int(last or first) + 1))
    return shown


def assert_not_backwards(before: JsonObj, after: JsonObj) -> None:
    """What the Job showed as done stays done, even when fed an older mirror status."""
    for field in ("succeeded", "failed"):
        assert after.get("status", {}).get(field, 0) >= before.get("status", {}).get(field, 0)
    for field in ("completedIndexes", "failedIndexes"):
        assert shown_indexes(after, field) >= shown_indexes(before, field)


def is_paused(mirror: JsonObj) -> bool:
    conditions = mirror.get("status", {}).get("conditions", [])
    return any(c["type"] == SUSPENDED and c["status"] == "True" for c in conditions)


def without_suspended(status: JsonObj) -> JsonObj:
    result = comparable(status)
    conditions = [c for c in result.get("conditions", []) if c["type"] != SUSPENDED]
    if conditions:
        result["conditions"] = conditions
    else:
        result.pop("conditions", None)
    return result


@PROPERTY_SETTINGS
@given(histories())
def test_in_order_copy_shows_every_mirror_status(history: tuple[JobShape, list[JsonObj]]) -> None:
    shape, mirrors = history
    job = management_job(shape)
    for step, mirror in enumerate(mirrors):
        job = deliver(job, mirror, step)
        assert comparable(job.get("status", {})) == comparable(mirror.get("status", {}))


@PROPERTY_SETTINGS
@given(histories(), st.data())
def test_stale_repeated_and_reordered_statuses_converge(
    history: tuple[JobShape, list[JsonObj]], data: st.DataObject
) -> None:
    shape, mirrors = history
    order = data.draw(st.lists(st.integers(0, len(mirrors) - 1), max_size=30), label="order")
    job = management_job(shape)
    for step, index in enumerate(order):
        before, job = job, deliver(job, mirrors[index], step)
        assert_not_backwards(before, job)
    job = deliver(job, mirrors[-1], len(order))
    assert comparable(job.get("status", {})) == comparable(mirrors[-1].get("status", {}))


@PROPERTY_SETTINGS
@given(histories(suspend_styles=("none", "keep", "clear")), st.data())
def test_suspend_and_resume_in_any_order_stay_legal(
    history: tuple[JobShape, list[JsonObj]], data: st.DataObject
) -> None:
    shape, mirrors = history
    deliveries = data.draw(
        st.lists(
            st.tuples(st.none() | st.integers(0, len(mirrors) - 1), st.booleans()),
            max_size=30,
        ),
        label="(mirror, job suspended) per sync",
    )
    job = management_job(shape)
    for step, (index, suspended) in enumerate(deliveries):
        job = {**job, "spec": {**job["spec"], "suspend": suspended}}
        # No mirror at all (None) is only said of a suspended Job here: of a running one
        # it means its run ended, which test_carry_over.py covers.
        mirror = None if index is None and suspended else mirrors[index or 0]
        job = deliver(job, mirror, step)
        if suspended and not is_finished(job):
            assert "startTime" not in job.get("status", {})
    job = deliver(job, mirrors[-1], len(deliveries))
    if is_finished(mirrors[-1]):
        assert is_finished(job)
        final, shown = comparable(mirrors[-1]["status"]), without_suspended(job["status"])
        final = without_suspended(final)
        shown.pop("startTime"), final.pop("startTime")
        assert shown == final


@PROPERTY_SETTINGS
@given(histories(suspend_styles=("keep", "clear")))
def test_suspend_followed_on_the_job_matches_the_mirror(
    history: tuple[JobShape, list[JsonObj]],
) -> None:
    """The Job suspended and resumed as its mirror's spec says: the copy ends equal.

    startTime included: whether the worker keeps it while suspended and resets
    it on resume (v1.35) or clears it on suspend, the Job ends with the
    mirror's start of the last resume.
    """
    shape, mirrors = history
    job = management_job(shape)
    for step, mirror in enumerate(mirrors):
        job = {**job, "spec": {**job["spec"], "suspend": mirror["spec"]["suspend"]}}
        job = deliver(job, mirror, step)
    final = without_suspended(mirrors[-1].get("status", {}))
    shown = without_suspended(job.get("status", {}))
    if mirrors[-1]["spec"]["suspend"] or is_paused(mirrors[-1]):
        # Mid-suspend or mid-resume: the Job rightly shows no startTime yet.
        final.pop("startTime", None)
    assert shown == final
