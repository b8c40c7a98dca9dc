"""Worker Events onto management objects: which workload, what is relayed, what blocks."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.fleet.workerevents_rules import (
    SUMMARY_REASON,
    BlockedTracker,
    RelayLimits,
    Target,
    WorkerEventRelay,
    blocked_value,
    has_active_pods,
    last_seen,
    occurrences,
    slim_event,
    speaks_for,
    target_of,
)
from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL
from jobrelay.vocabulary.resource import Resource

JOB = Resource("batch", "v1", "jobs", "Job")
JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
KINDS = {JOB.name: JOB, JOBSET.name: JOBSET}
CREATED = "2026-11-23T08:00:00Z"


def mirror(name: str, uid: str, created: str = CREATED, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "creationTimestamp": created,
                     "labels": {ORIGIN_UID_LABEL: f"origin-{uid}"}},
        "status": status,
    }  # fmt: skip


MIRRORS = {
    (JOB.name, "ns/train"): mirror("train", "uid-train"),
    (JOB.name, "ns/train-2"): mirror("train-2", "uid-train-2"),
    (JOBSET.name, "ns/sweep"): mirror("sweep", "uid-sweep"),
}
# Pods the worker knows, by namespace/name: their UID and the (name, UID) they speak for.
PODS: dict[str, tuple[str, frozenset[tuple[str, str]]]] = {
    "ns/train-2-abcde": ("p-1", frozenset({("train-2", "uid-train-2")})),
    "ns/other-xyz12": ("p-2", frozenset({("other", "uid-other")})),
    # Carries the mirror's name (a label), not its UID: a namesake's, or made up.
    "ns/train-fake1": ("p-3", frozenset({("train", "uid-someone-else")})),
    "ns/train-bare1": ("p-4", frozenset()),
    "ns/sweep-workers-0-1-abcde": (
        "p-5", frozenset({("sweep-workers-0", "uid-child"), ("sweep", "uid-sweep")})
    ),
}  # fmt: skip


def lookup(key: tuple[str, str]) -> Mapping[str, Any] | None:
    return MIRRORS.get(key)


def pod_owners(namespace: str, name: str) -> tuple[str, frozenset[tuple[str, str]]] | None:
    return PODS.get(f"{namespace}/{name}")


def event(
    kind: str = "Job",
    name: str = "train",
    *,
    api_version: str = "batch/v1",
    uid: str = "ev-1",
    involved_uid: str | None = None,
    reason: str = "FailedCreate",
    message: str = 'Error creating: pods "train-x" is forbidden: exceeded quota',
    count: int | None = 1,
    last: str | None = "2026-11-23T08:00:05Z",
    namespace: str = "ns",
    **extra: Any,
) -> dict[str, Any]:
    involved: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "namespace": namespace,
    }
    if involved_uid is not None:
        involved["uid"] = involved_uid
    obj: dict[str, Any] = {
        "metadata": {"name": f"{name}.1", "namespace": namespace, "uid": uid},
        "involvedObject": involved,
        "type": "Warning",
        "reason": reason,
        "message": message,
        **extra,
    }
    if count is not None:
        obj["count"] = count
    if last is not None:
        obj["lastTimestamp"] = last
    return obj


# -- which workload ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(event(), (JOB.name, "ns/train", "", True), id="the mirror itself"),
        pytest.param(
            event(involved_uid="uid-train"), (JOB.name, "ns/train", "", True), id="same uid"
        ),
        pytest.param(event(involved_uid="uid-older"), None, id="an earlier namesake"),
        pytest.param(event(name="nobody"), None, id="not a mirror"),
        pytest.param(event(namespace="elsewhere"), None, id="other namespace"),
        pytest.param(
            event("Pod", "train-2-abcde", api_version="v1"),
            (JOB.name, "ns/train-2", "pod train-2-abcde", False),
            id="known pod: the mirror whose UID owns it",
        ),
        pytest.param(
            event("Pod", "train-2-abcde", api_version="v1", involved_uid="p-1"),
            (JOB.name, "ns/train-2", "pod train-2-abcde", False),
            id="known pod, same pod UID",
        ),
        pytest.param(
            event("Pod", "train-2-abcde", api_version="v1", involved_uid="p-old"),
            None,
            id="an earlier pod of that name",
        ),
        pytest.param(
            event("Pod", "train-0-fghij", api_version="v1"),
            None,
            id="unknown pod named like a mirror's: nobody's",
        ),
        pytest.param(
            event("Pod", "other-xyz12", api_version="v1"), None, id="known pod of no mirror"
        ),
        pytest.param(
            event("Pod", "train-fake1", api_version="v1"),
            None,
            id="pod with the mirror's name but another owner UID",
        ),
        pytest.param(
            event("Pod", "train-bare1", api_version="v1"),
            None,
            id="pod that owns up to nothing",
        ),
        pytest.param(
            event("Pod", "sweep-workers-0-1-abcde", api_version="v1"),
            (JOBSET.name, "ns/sweep", "pod sweep-workers-0-1-abcde", False),
            id="pod of a JobSet: its jobset-uid",
        ),
        pytest.param(
            event("Job", "sweep-workers-0"),
            (JOBSET.name, "ns/sweep", "job sweep-workers-0", True),
            id="a Job the JobSet mirror made",
        ),
        pytest.param(
            event("JobSet", "sweep", api_version="jobset.x-k8s.io/v1alpha2"),
            (JOBSET.name, "ns/sweep", "", True),
            id="the JobSet mirror",
        ),
        pytest.param(event("Deployment", "train", api_version="apps/v1"), None, id="other kind"),
        pytest.param(event("ConfigMap", "train", api_version="v1"), None, id="core, not a pod"),
    ],
)
def test_target_of(obj: dict[str, Any], expected: tuple[str, str, str, bool] | None) -> None:
    target = target_of(obj, KINDS, lookup, pod_owners)
    if expected is None:
        assert target is None
        return
    assert target is not None
    assert (target.key.kind, target.key.key, target.subject, target.makes_pods) == expected
    assert target.mirror_uid == MIRRORS[target.key]["metadata"]["uid"]
    assert target.origin_uid == f"origin-{target.mirror_uid}"


@pytest.mark.parametrize(
    ("origin_uid", "management", "speaks"),
    [
        pytest.param("j-1", {"metadata": {"name": "train", "uid": "j-1"}}, True, id="its object"),
        pytest.param("j-1", {"metadata": {"name": "train", "uid": "j-2"}}, False, id="namesake"),
        pytest.param("", {"metadata": {"name": "train", "uid": "j-1"}}, False, id="names none"),
        pytest.param("", {"metadata": {"name": "train"}}, False, id="neither has a UID"),
        pytest.param("j-1", None, False, id="no such object"),
    ],
)
def test_speaks_for_only_the_object_whose_uid_the_mirror_names(
    origin_uid: str, management: dict[str, Any] | None, speaks: bool
) -> None:
    target = Target(WorkloadKey(JOB.name, "ns/train"), "m-1", None, origin_uid=origin_uid)
    assert speaks_for(target, management) is speaks


def test_a_job_that_is_no_mirror_is_matched_only_to_another_kind() -> None:
    # "train-extra" starts with the Job mirror "train", but Jobs make no Jobs.
    assert target_of(event("Job", "train-extra"), KINDS, lookup, pod_owners) is None


# -- reading Events ---------------------------------------------------------------------------


def test_slim_event_keeps_what_the_relay_reads() -> None:
    full = event(series={"count": 4, "lastObservedTime": "2026-11-23T08:01:00.000001Z"})
    full["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    full["source"] = {"component": "job-controller"}
    slim = slim_event(full)
    assert slim is not None
    assert "managedFields" not in slim["metadata"] and "source" not in slim
    assert slim["series"]["count"] == 4 and slim["reason"] == "FailedCreate"
    node_event = event("Node", "node-1", api_version="v1", namespace="")
    assert slim_event(node_event) is None


@pytest.mark.parametrize(
    ("extra", "count", "seen"),
    [
        ({"count": 3}, 3, "2026-11-23T08:00:05+00:00"),
        ({"count": None, "series": {"count": 7, "lastObservedTime": "2026-11-23T08:02:00.5Z"}},
         7, "2026-11-23T08:02:00.500000+00:00"),
        ({"count": None, "last": None, "eventTime": "2026-11-23T08:03:00.000001Z"},
         1, "2026-11-23T08:03:00.000001+00:00"),
        ({"count": 0, "last": None, "metadata_created": "2026-11-23T08:04:00Z"},
         1, "2026-11-23T08:04:00+00:00"),
    ],
)  # fmt: skip
def test_occurrences_and_last_seen(extra: dict[str, Any], count: int, seen: str) -> None:
    created = extra.pop("metadata_created", None)
    obj = event(**extra)
    if created:
        obj["metadata"]["creationTimestamp"] = created
    assert occurrences(obj) == count
    moment = last_seen(obj)
    assert moment is not None and moment.isoformat() == seen


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
    assert out.message == 'worker-1: Error creating: pods "train-x" is forbidden: exceeded quota'
    pod_target = Target(TARGET.key, "uid-train", TARGET.mirror_created, "pod train-abcde", False)
    [out] = relay.observe(
        "worker-1", event("Pod", "train-abcde", uid="ev-2", reason="BackOff", message="back-off"),
        pod_target, history=False, now=0,
    )  # fmt: skip
    assert out.message == "worker-1: pod train-abcde: back-off"


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
        f"worker-1: {1000 - len(out)} more events not shown (rate limit): "
        f"FailedCreate {1000 - len(out)}"
    )
    assert relay.next_due() is None and relay.due(1000) == []


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


@pytest.mark.parametrize(
    ("status", "active"),
    [
        ({}, False),
        ({"active": 0, "failed": 2}, False),
        ({"active": 1}, True),
        ({"ready": 1}, True),
        ({"succeeded": 1}, True),
        ({"replicatedJobsStatus": [{"name": "w", "active": 0}, {"name": "d", "ready": 2}]}, True),
        ({"replicatedJobsStatus": [{"name": "w", "active": 0}]}, False),
        ({"active": "1"}, False),
    ],
)
def test_has_active_pods(status: dict[str, Any], active: bool) -> None:
    assert has_active_pods({"status": status}) is active


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
