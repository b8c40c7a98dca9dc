"""How long a finished mirror is kept, and when a workload finished: every kind gives
its finish time the same way (Finish.at), read from the status a restart reads too.
Tables and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.finish_times import finished_at, finished_for
from jobrelay.kinds.finished_mirrors import FinishedMirrorTtl, kept_for, time_left
from jobrelay.kinds.generic import GenericKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kinds.kubeflow import PyTorchJobKind
from jobrelay.kinds.ray import RayClusterKind, RayJobKind
from jobrelay.kinds.trainjob import TrainJobKind
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.resource import Resource

T = "2026-03-01T12:05:00Z"
EARLIER = "2026-03-01T12:00:00Z"


def _condition(kind: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": kind, "lastTransitionTime": T}


WIDGET = GenericKind(Resource("example.com", "v1", "widgets", "Widget"))

FINISHED: dict[str, tuple[WorkloadKind, JsonObj]] = {
    "a complete Job: its completionTime": (
        JobKind(),
        {"status": {"completionTime": T, "conditions": [
            {**_condition("Complete"), "lastTransitionTime": EARLIER}]}},
    ),
    "a failed Job: its Failed condition's time": (
        JobKind(), {"status": {"conditions": [_condition("FailureTarget"), _condition("Failed")]}},
    ),
    "a JobSet": (JobSetKind(), {"status": {"conditions": [_condition("Failed")]}}),
    "a RayJob: its endTime": (
        RayJobKind(), {"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                                  "endTime": T}},
    ),
    "a PyTorchJob": (PyTorchJobKind(), {"status": {"conditions": [_condition("Succeeded")]}}),
    "a TrainJob": (TrainJobKind(), {"status": {"conditions": [_condition("Complete")]}}),
    "a generic kind": (WIDGET, {"status": {"conditions": [_condition("Succeeded")]}}),
}  # fmt: skip


@pytest.mark.parametrize("name", list(FINISHED))
def test_every_kind_says_when_it_finished(name: str) -> None:
    kind, obj = FINISHED[name]
    finish = kind.finish(obj)
    assert finish is not None and finish.at == T
    assert finished_for(kind, obj, "2026-03-01T12:10:00Z") == 300.0
    assert finished_at(kind, obj) is not None


def test_unfinished_or_untimed_has_no_finish_time() -> None:
    assert finished_at(JobKind(), {"status": {}}) is None
    assert finished_at(RayClusterKind(), {"status": {"state": "ready"}}) is None
    untimed = {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert JobKind().finish(untimed) is not None
    assert finished_for(JobKind(), untimed, T) is None
    assert finished_for(JobKind(), {"status": {"conditions": [
        {"type": "Failed", "status": "True", "lastTransitionTime": "yesterday"}]}}, T) is None  # fmt: skip


def test_the_finish_time_does_not_make_two_finishes_differ() -> None:
    one = JobKind().finish({"status": {"conditions": [_condition("Failed")]}})
    other = JobKind().finish({"status": {"conditions": [
        {**_condition("Failed"), "lastTransitionTime": EARLIER}]}})  # fmt: skip
    assert one == other


OWN_TTL = {
    "a Job's spec.ttlSecondsAfterFinished": (JobKind(), {"spec": {"ttlSecondsAfterFinished": 30}}, 30),
    "a PyTorchJob's in its run policy": (
        PyTorchJobKind(), {"spec": {"runPolicy": {"ttlSecondsAfterFinished": 30}}}, 30,
    ),
    "none asked": (JobKind(), {"spec": {}}, None),
    "not a number": (JobKind(), {"spec": {"ttlSecondsAfterFinished": "30"}}, None),
    "negative": (JobKind(), {"spec": {"ttlSecondsAfterFinished": -1}}, None),
    "a bool is no number": (JobKind(), {"spec": {"ttlSecondsAfterFinished": True}}, None),
}  # fmt: skip


@pytest.mark.parametrize("name", list(OWN_TTL))
def test_its_own_ttl(name: str) -> None:
    kind, obj, expected = OWN_TTL[name]
    assert kind.ttl_after_finished(obj) == expected


KEPT = {
    # (setting, its own ttl) -> seconds kept after the finish (None: for ever)
    "the setting alone": (FinishedMirrorTtl(3600), None, 3600.0),
    "its own shorter ttl wins": (FinishedMirrorTtl(3600), 60, 60.0),
    "its own longer ttl does not lengthen it": (FinishedMirrorTtl(60), 3600, 60.0),
    "0: at once": (FinishedMirrorTtl(0), None, 0.0),
    "for ever": (FinishedMirrorTtl(60, forever=True), None, None),
    "for ever, but never past its own ttl": (FinishedMirrorTtl(60, forever=True), 600, 600.0),
}


@pytest.mark.parametrize("name", list(KEPT))
def test_kept_for(name: str) -> None:
    ttl, own, expected = KEPT[name]
    obj: JsonObj = {"spec": {} if own is None else {"ttlSecondsAfterFinished": own}}
    assert kept_for(JobKind(), obj, ttl) == expected


LEFT = {
    # (kept, finished for) -> seconds left (0: now; None: for ever)
    "half-way": (3600.0, 1800.0, 1800.0),
    "the time is up": (3600.0, 3600.0, 0.0),
    "long past": (3600.0, 99999.0, 0.0),
    "no finish time: at once (no deadline a restart would find again)": (3600.0, None, 0.0),
    "ttl 0": (0.0, 5.0, 0.0),
    "for ever": (None, 99999.0, None),
    "a finish time ahead of our clock: the ttl from now at most": (3600.0, -50.0, 3600.0),
}


@pytest.mark.parametrize("name", list(LEFT))
def test_time_left(name: str) -> None:
    kept, since, expected = LEFT[name]
    assert time_left(kept, since) == expected


@given(st.floats(0, 1e7), st.none() | st.floats(-1e7, 1e7))
def test_time_left_is_bounded_by_what_is_kept(kept: float, since: float | None) -> None:
    left = time_left(kept, since)
    assert left is not None and 0.0 <= left <= kept
    if since is not None and since >= 0:
        assert left == pytest.approx(max(0.0, kept - since))


def test_the_setting_reads_back_as_its_flag() -> None:
    assert FinishedMirrorTtl(3600).flag == "--finished-mirror-ttl 1h"
    assert FinishedMirrorTtl(20).flag == "--finished-mirror-ttl 20s"
    assert FinishedMirrorTtl(0).flag == "--finished-mirror-ttl 0s"
    assert FinishedMirrorTtl(20, forever=True).flag == "--keep-finished-mirrors"


def test_mirror_still_kept() -> None:
    from jobrelay.kinds.finish_times import mirror_still_kept

    kind = JobKind()
    failed: JsonObj = {"metadata": {}, "status": {"conditions": [_condition("Failed")]}}
    assert mirror_still_kept(kind, failed, FinishedMirrorTtl(3600), "2026-03-01T12:10:00Z")
    assert not mirror_still_kept(kind, failed, FinishedMirrorTtl(60), "2026-03-01T12:10:00Z")
    assert not mirror_still_kept(kind, failed, FinishedMirrorTtl(0), "2026-03-01T12:05:00Z")
    assert mirror_still_kept(kind, failed, FinishedMirrorTtl(0, forever=True), T)
    deleting = {**failed, "metadata": {"deletionTimestamp": T}}
    assert not mirror_still_kept(kind, deleting, FinishedMirrorTtl(3600), T)
    assert not mirror_still_kept(kind, {"metadata": {}, "status": {}}, FinishedMirrorTtl(3600), T)
