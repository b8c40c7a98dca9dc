"""A worker's Events and Pods may hold anything: reading them never raises, and whatever
they say, they reach only the workload whose mirror's UID owns them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from tests.unit.fuzz.hostile import anything, counted, fuzz, odd_text, timestamps

from jobrelay.fleet.workerevents_rules import BlockedTracker, WorkerEventRelay
from jobrelay.fleet.workerevents_targets import (
    last_seen,
    occurrences,
    slim_event,
    speaks_for,
    target_of,
)
from jobrelay.kinds import kinds_from_names
from jobrelay.kinds.catalog import DEDICATED
from jobrelay.kinds.mirror_pods import pod_owners
from jobrelay.placement.slim_objects import slim_pod
from jobrelay.vocabulary.names import ORIGIN_UID_LABEL

KINDS = {kind.name: kind for kind in kinds_from_names(DEDICATED)}
JOB = KINDS["Job.v1.batch"].ref
MIRROR = {
    "metadata": {"name": "train", "namespace": "ns", "uid": "m-1",
                 "labels": {ORIGIN_UID_LABEL: "j-1"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
}  # fmt: skip
MANAGEMENT = {"metadata": {"name": "train", "namespace": "ns", "uid": "j-1"}}

names = st.one_of(st.sampled_from(["train", "train-abcde", "sweep", "ns", ""]), odd_text)
kinds = st.sampled_from(["Job", "Pod", "JobSet", "Node", "RayCluster", ""]) | anything
api_versions = (
    st.sampled_from(["batch/v1", "v1", "jobset.x-k8s.io/v1alpha2", "ray.io/v1", ""]) | anything
)
involved = st.one_of(
    anything,
    st.fixed_dictionaries(
        {"kind": kinds, "name": names, "namespace": st.sampled_from(["ns", "other"]) | anything},
        optional={
            "apiVersion": api_versions,
            "uid": st.sampled_from(["m-1", "p-1", ""]) | anything,
        },
    ),
)
# The informer hands on JSON objects (dicts); what is inside them is the worker's say.
events = st.one_of(
    st.dictionaries(odd_text, anything, max_size=4),
    st.fixed_dictionaries(
        {"involvedObject": involved},
        optional={
            "metadata": anything | st.fixed_dictionaries({"uid": odd_text}),
            "type": anything, "reason": st.sampled_from(["FailedCreate", "BackOff"]) | anything,
            "message": anything, "count": anything, "series": anything,
            "firstTimestamp": timestamps, "lastTimestamp": timestamps, "eventTime": timestamps,
        },
    ),
)  # fmt: skip
owner_refs = st.one_of(
    anything,
    st.lists(
        anything
        | st.fixed_dictionaries(
            {"name": names, "uid": st.sampled_from(["m-1", "fake", ""]) | anything},
            optional={"controller": anything | st.just(True)},
        ),
        max_size=3,
    ),
)
pod_labels = st.one_of(
    anything,
    st.dictionaries(
        st.sampled_from(["batch.kubernetes.io/job-name", "job-name", "controller-uid",
                         "batch.kubernetes.io/controller-uid", "jobset.sigs.k8s.io/jobset-uid",
                         "jobset.sigs.k8s.io/jobset-name"]) | odd_text,
        names | anything,
        max_size=4,
    ),
)  # fmt: skip
# Whose pod it is (its metadata); its requests are fuzzed with the quantities.
pods = st.one_of(
    st.dictionaries(st.just("metadata"), anything, max_size=1),
    st.fixed_dictionaries(
        {"metadata": st.fixed_dictionaries(
            {"name": names, "namespace": st.just("ns")},
            optional={"labels": pod_labels, "ownerReferences": owner_refs, "uid": anything},
        ) | anything},
    ),
)  # fmt: skip


def lookup(key: tuple[str, str]) -> Mapping[str, Any] | None:
    return MIRROR if key == (JOB.name, "ns/train") else None


@fuzz(400)
@given(events, pods)
@example({"involvedObject": []}, {})
@example({"involvedObject": {"kind": "Pod", "name": "train-a", "namespace": "ns"},
          "series": [], "count": "9" * 5000}, {"metadata": {"labels": []}})  # fmt: skip
@example(
    {"involvedObject": {"kind": "Pod", "name": "x", "namespace": "ns", "apiVersion": "v1"},
     "metadata": {"uid": "e"}, "reason": "FailedCreate"},
    {"metadata": {"name": "x", "namespace": "ns",
                  "labels": {"batch.kubernetes.io/job-name": "train", "controller-uid": "fake"},
                  "ownerReferences": [{"name": "train", "uid": "fake", "controller": True}]}},
)  # fmt: skip
@counted
def test_any_worker_event_and_pod_read_without_raising_and_reach_only_their_owner(
    event: Any, pod: Any
) -> None:
    slim = slim_event(event)
    assert slim is None or isinstance(slim, dict)
    for obj in (event, slim):
        if isinstance(obj, Mapping):
            assert occurrences(obj) >= 1
            last_seen(obj)
    slim_p = slim_pod(pod)
    owners = pod_owners(slim_p) if slim_p is not None else frozenset()
    assert all(isinstance(n, str) and isinstance(u, str) and u for n, u in owners)

    def pod_lookup(namespace: str, name: str) -> tuple[str, frozenset[tuple[str, str]]] | None:
        return ("p-1", owners) if slim_p is not None else None

    if slim is None:
        return
    target = target_of(slim, KINDS, lookup, pod_lookup)
    if target is not None:
        assert target.key == (JOB.name, "ns/train")
        assert speaks_for(target, MANAGEMENT)
        if target.subject.startswith("pod "):
            assert ("train", "m-1") in owners, "a pod speaks only through the mirror's UID"
    relay = WorkerEventRelay()
    for outgoing in relay.observe("w", slim, target, history=False, now=0.0):
        assert isinstance(outgoing.message, str) and outgoing.count >= 1
    BlockedTracker().event("w", slim, target, mirror_running=False)
