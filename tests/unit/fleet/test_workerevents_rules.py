"""Worker Events onto management objects: what is relayed, what blocks."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.fleet.workerevents_samples import JOB, event

from jobrelay.fleet.workerevents_rules import (
    MAX_RELAYED_MESSAGE,
    SUMMARY_REASON,
    BlockedTracker,
    RelayLimits,
    WorkerEventRelay,
    blocked_value,
    worker_reason,
    worker_text,
)
from jobrelay.fleet.workerevents_targets import Target
from jobrelay.kinds.base import WorkloadKey

# -- what is relayed --------------------------------------------------------------------------

TARGET = Target(
    WorkloadKey(JOB.name, "ns/train"),
    "uid-train",
    datetime.datetime(2026, 11, 23, 8, 0, tzinfo=datetime.UTC),
)


def test_relayed_with_the_workers_reason_and_name() -> None:
    relay = WorkerEventRelay()
    [out] = relay.observe("worker-1", event(), TARGET, history=False, now=0)
    assert (out.key, out.type, out.reason, out.count) == (TARGET.key, "Warning", "FailedCreate", 1)
    assert (
        out.message
        == 'worker worker-1: Error creating: pods "train-x" is forbidden: exceeded quota'
    )
    pod_target = Target(TARGET.key, "uid-train", TARGET.mirror_created, "pod train-abcde", False)
    [out] = relay.observe(
        "worker-1", event("Pod", "train-abcde", uid="ev-2", reason="BackOff", message="back-off"),
        pod_target, history=False, now=0,
    )  # fmt: skip
    assert out.message == "worker worker-1: pod train-abcde: back-off"


@pytest.mark.parametrize(
    ("reason", "message", "relayed_reason", "relayed_message"),
    [
        # A second line faking jobrelay's own words is one line, marked as the worker's.
        ("FailedCreate", "quota\nDispatched to worker cluster b", "FailedCreate",
         "worker worker-1: quota Dispatched to worker cluster b"),
        # Terminal escapes and bidi overrides are dropped to spaces.
        ("BackOff", "\x1b[2Jok\u202eevil\x00", "BackOff", "worker worker-1: [2Jok evil"),
        # A reason is a word: what else it holds is dropped, and none at all is Unknown.
        ("Dispatched\nNormal", "x", "DispatchedNormal", "worker worker-1: x"),
        ("", "x", "Unknown", "worker worker-1: x"),
        ("\u202e", "x", "Unknown", "worker worker-1: x"),
    ],
)  # fmt: skip
def test_worker_text_is_marked_one_line_and_free_of_control_characters(
    reason: str, message: str, relayed_reason: str, relayed_message: str
) -> None:
    relay = WorkerEventRelay()
    [out] = relay.observe(
        "worker-1", event(reason=reason, message=message), TARGET, history=False, now=0
    )
    assert (out.reason, out.message) == (relayed_reason, relayed_message)


def test_a_long_worker_message_is_bounded() -> None:
    relay = WorkerEventRelay()
    [out] = relay.observe("w", event(message="x" * 100_000), TARGET, history=False, now=0)
    assert len(out.message) == MAX_RELAYED_MESSAGE and out.message.startswith("worker w: xxx")
    assert out.message.endswith("...")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000), st.integers(min_value=4, max_value=2000))
def test_worker_text_is_bounded_and_printable(text: str, limit: int) -> None:
    shown = worker_text(text, limit)
    assert len(shown) <= limit
    assert all(ch.isprintable() or ch == " " for ch in shown), repr(shown)
    assert shown == shown.strip() and "  " not in shown


@given(st.text(max_size=500))
def test_worker_reason_is_a_bounded_word(text: str) -> None:
    reason = worker_reason(text)
    assert reason.isascii() and reason.isalnum() and 0 < len(reason) <= 64


def test_only_new_occurrences_are_relayed() -> None:
    relay = WorkerEventRelay()
    assert [o.count for o in relay.observe("w", event(count=2), TARGET, history=False, now=0)] == [
        2
    ]
    assert relay.observe("w", event(count=2), TARGET, history=False, now=1) == []  # relist
    assert [o.count for o in relay.observe("w", event(count=5), TARGET, history=False, now=2)] == [
        3
    ]
    # The same Event's UID on another worker is another Event.
    assert [o.count for o in relay.observe("v", event(count=5), TARGET, history=False, now=3)] == [
        5
    ]


def test_history_is_remembered_not_relayed() -> None:
    relay = WorkerEventRelay()
    assert relay.observe("w", event(count=4), TARGET, history=True, now=0) == []
    assert relay.observe("w", event(count=4), TARGET, history=False, now=1) == []
    assert [o.count for o in relay.observe("w", event(count=6), TARGET, history=False, now=2)] == [
        2
    ]


def test_events_older_than_the_mirror_are_not_about_it() -> None:
    relay = WorkerEventRelay()
    old = event(last="2026-11-23T07:59:59Z")
    assert relay.observe("w", old, TARGET, history=False, now=0) == []


def test_no_target_is_not_remembered() -> None:
    # The mirror cache had not caught up: a later change counts every occurrence.
    relay = WorkerEventRelay()
    assert relay.observe("w", event(count=3), None, history=False, now=0) == []
    assert [o.count for o in relay.observe("w", event(count=4), TARGET, history=False, now=1)] == [
        4
    ]


def test_a_storm_of_identical_events_passes_for_the_recorder_to_count() -> None:
    relay = WorkerEventRelay()
    out = [
        o
        for n in range(1000)
        for o in relay.observe("w", event(uid=f"ev-{n}"), TARGET, history=False, now=n / 1000)
    ]
    assert len(out) == 1000 and len({(o.reason, o.message) for o in out}) == 1
    assert relay.next_due() is None


def test_a_storm_of_distinct_events_is_limited_and_summarised() -> None:
    limits = RelayLimits(burst=5, per_minute=5, summary_interval=60)
    relay = WorkerEventRelay(limits)
    out = [
        o
        for n in range(1000)
        for o in relay.observe(
            "worker-1", event(uid=f"ev-{n}", message=f"message {n}"), TARGET,
            history=False, now=n / 100,
        )
    ]  # fmt: skip
    # 10 s: the burst, plus what refilled at 5 a minute.
    assert 5 <= len(out) <= 6
    due = relay.next_due()
    assert due is not None and due <= 61
    assert relay.due(due - 0.001) == []
    [summary] = relay.due(due)
    assert summary.reason == SUMMARY_REASON
    assert summary.message == (
        f"worker worker-1: {1000 - len(out)} more events not shown (rate limit): "
        f"FailedCreate {1000 - len(out)}"
    )
    assert relay.next_due() is None and relay.due(1000) == []


def test_relayed_messages_are_remembered_by_digest_not_text() -> None:
    """Issue 33: a worker's message is its tenants' text, of any length; what the relay
    remembers per workload costs a digest each, and repeats still pass."""
    relay = WorkerEventRelay()
    long = "<" * 100_000
    out = [
        o
        for n in range(3)
        for o in relay.observe("w", event(uid=f"ev-{n}", message=long), TARGET, history=False,
                               now=float(n))
    ]  # fmt: skip
    assert len(out) == 3, "a repeat within the window passes (the recorder counts it)"
    (state,) = relay._workloads.values()
    assert [len(digest) for _, _, digest in state.relayed] == [32]


def test_the_limit_is_per_workload() -> None:
    relay = WorkerEventRelay(RelayLimits(burst=1, per_minute=1))
    other = Target(WorkloadKey(JOB.name, "ns/other"), "uid-o", None)
    assert relay.observe("w", event(uid="a", message="a"), TARGET, history=False, now=0)
    assert not relay.observe("w", event(uid="b", message="b"), TARGET, history=False, now=0)
    assert relay.observe("w", event(uid="c", message="c"), other, history=False, now=0)
    # A minute later, one more token.
    assert relay.observe("w", event(uid="d", message="d"), TARGET, history=False, now=60)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),  # which Event (UID)
            st.integers(1, 50),  # its count now
            st.integers(0, 8),  # which message
            st.floats(0, 5, allow_nan=False),  # seconds since the last
        ),
        max_size=200,
    )
)
def test_never_more_than_happened_and_never_over_the_limit(
    steps: list[tuple[int, int, int, float]],
) -> None:
    """Relayed and summarised occurrences never exceed what happened; distinct messages
    relayed never exceed the bucket's allowance; nothing is counted twice."""
    limits = RelayLimits(burst=3, per_minute=6, summary_interval=30)
    relay = WorkerEventRelay(limits)
    highest: dict[int, int] = {}
    now, relayed, summarised = 0.0, 0, 0
    first: dict[str, float] = {}
    for uid, count, message, wait in steps:
        now += wait
        out = relay.observe(
            "w", event(uid=str(uid), count=count, message=f"m{message}"), TARGET,
            history=False, now=now,
        )  # fmt: skip
        highest[uid] = max(highest.get(uid, 0), count)
        for o in out:
            assert o.count >= 1
            relayed += o.count
            first.setdefault(o.message, now)
        for s in relay.due(now):
            summarised += int(s.message.split(": ")[1].split()[0])
    summarised += sum(int(s.message.split(": ")[1].split()[0]) for s in relay.due(now + 1e6))
    assert relayed + summarised == sum(highest.values())
    assert len(first) <= limits.burst + now * limits.per_minute / 60


# -- Blocked -------------------------------------------------------------------------------


def test_blocked_value_is_one_bounded_line() -> None:
    assert blocked_value("worker-1", "FailedCreate", "quota\n  exceeded") == (
        "worker-1: FailedCreate: quota exceeded"
    )
    assert len(blocked_value("w", "FailedCreate", "x" * 5000)) == 512


def test_blocked_until_its_pods_run() -> None:
    tracker = BlockedTracker()
    key = TARGET.key
    assert tracker.event("worker-1", event(), TARGET, mirror_running=False)
    assert tracker.wanted(key) == (
        'worker-1: FailedCreate: Error creating: pods "train-x" is forbidden: exceeded quota'
    )
    assert not tracker.event("worker-1", event(count=2), TARGET, mirror_running=False)  # same
    assert not tracker.mirror("worker-1", key, "uid-train", running_or_finished=False)
    assert not tracker.mirror("worker-2", key, None, running_or_finished=False)  # not there
    assert tracker.mirror("worker-1", key, "uid-train", running_or_finished=True)
    assert tracker.wanted(key) is None


@pytest.mark.parametrize(
    ("obj", "target", "running"),
    [
        pytest.param(event(reason="FailedScheduling"), TARGET, False, id="other reason"),
        pytest.param(event(), TARGET, True, id="some pods run"),
        pytest.param(
            event(), Target(TARGET.key, "u", None, "pod train-x", False), False, id="a pod's own"
        ),
        pytest.param(event(), None, False, id="no target"),
        pytest.param(event(last="2026-11-23T07:00:00Z"), TARGET, False, id="older than mirror"),
    ],
)
def test_not_blocked(obj: dict[str, Any], target: Target | None, running: bool) -> None:
    tracker = BlockedTracker()
    assert not tracker.event("worker-1", obj, target, mirror_running=running)
    assert tracker.wanted(TARGET.key) is None


@pytest.mark.parametrize(
    ("uid", "running"), [(None, False), ("uid-next-run", False), ("uid-train", True)]
)
def test_unblocked_when_the_mirror_goes_or_runs(uid: str | None, running: bool) -> None:
    tracker = BlockedTracker()
    tracker.event("worker-1", event(), TARGET, mirror_running=False)
    assert tracker.mirror("worker-1", TARGET.key, uid, running_or_finished=running)
    assert tracker.wanted(TARGET.key) is None
