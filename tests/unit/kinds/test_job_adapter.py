"""JobKind: the Job logic behind the WorkloadKind interface (the logic itself is tested beside it)."""

from __future__ import annotations

import copy

import pytest

from jobrelay.kinds.base import Finish, PodSet
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.mirrors import LAST_APPLIED_ANNOTATION
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import MIRROR_LABEL, ORIGIN_UID_LABEL

KIND = JobKind()
NOW = "2026-03-01T12:10:00Z"


def job(**spec: object) -> JsonObj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "uid-1",
            "resourceVersion": "7",
            "generation": 2,
            "labels": {"app": "train"},
            "annotations": {"note": "x"},
        },
        "spec": {
            "managedBy": "jobrelay.dev/relay",
            "parallelism": 1,
            "template": {
                "metadata": {"labels": {"app": "train", "job-name": "train"}},
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "containers": [
                        {
                            "name": "main",
                            "image": "trainer",
                            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                        }
                    ],
                },
            },
            **spec,
        },
    }


def with_status(obj: JsonObj, status: JsonObj) -> JsonObj:
    return {**obj, "status": status}


def condition(kind: str, status: str = "True", reason: str = "", message: str = "") -> JsonObj:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_ref() -> None:
    assert KIND.name == "Job.v1.batch"
    assert KIND.ref.api_version == "batch/v1"
    assert KIND.ref.plural == "jobs"
    assert repr(KIND) == "JobKind(Job.v1.batch)"


def test_slim_local_drops_managed_fields() -> None:
    # (apiVersion and kind of list items are filled in by ApiClient.list, before any transform)
    obj = job()
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    slim = KIND.slim_local(obj)
    assert "managedFields" not in slim["metadata"]
    assert "managedFields" in obj["metadata"]  # the input is left alone
    typed = job()
    typed["spec"]["template"]["metadata"]["labels"] = {"app": "train"}
    assert KIND.slim_local(typed) is typed  # nothing to drop: no copy


def test_slim_local_drops_what_the_apiserver_generates_per_job() -> None:
    """Issue 36: the selector and the template's name and UID labels differ per Job and
    are never read (no mirror carries them): dropped, a backlog of one template then
    keeps the same template for every Job, and the mirror and its patches are the same."""
    obj = job(selector={"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1"}})
    generated = {
        "controller-uid": "uid-1",
        "batch.kubernetes.io/controller-uid": "uid-1",
        "job-name": "train",
        "batch.kubernetes.io/job-name": "train",
    }
    obj["spec"]["template"]["metadata"]["labels"] = {"app": "train", **generated}
    before = copy.deepcopy(obj)
    slim = KIND.slim_local(obj)
    assert obj == before  # the input is left alone
    assert "selector" not in slim["spec"]
    assert slim["spec"]["template"]["metadata"]["labels"] == {"app": "train"}
    made = {"controller_name": "jobrelay.dev/relay", "origin": "hq"}
    assert KIND.build_mirror(slim, **made) == KIND.build_mirror(obj, **made)
    mirror = KIND.build_mirror(obj, **made)
    assert KIND.spec_patch(slim, mirror) == KIND.spec_patch(obj, mirror) is None
    # Only generated labels: the template keeps no labels at all, as its mirror's.
    obj["spec"]["template"]["metadata"]["labels"] = dict(generated)
    slim = KIND.slim_local(obj)
    assert "labels" not in slim["spec"]["template"]["metadata"]
    assert KIND.build_mirror(slim, **made) == KIND.build_mirror(obj, **made)


def test_slim_local_drops_kubectl_applys_copy_of_the_object_and_builds_the_same_mirror() -> None:
    """Issue 33: the cache keeps what jobrelay reads; ``kubectl apply``'s record of the
    whole object (its spec again) is never read, and no mirror carries it."""
    obj = job()
    obj["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: "{...}", "team": "a"}
    slim = KIND.slim_local(obj)
    assert slim["metadata"]["annotations"] == {"team": "a"}
    assert LAST_APPLIED_ANNOTATION in obj["metadata"]["annotations"]  # the input is left alone
    made = {"controller_name": "jobrelay.dev/relay", "origin": "hq"}
    assert KIND.build_mirror(slim, **made) == KIND.build_mirror(obj, **made)
    assert KIND.spec_patch(slim, KIND.build_mirror(obj, **made)) is None


def test_slim_mirror_keeps_identity_spec_scheduling_and_status() -> None:
    mirror = KIND.build_mirror(job(), controller_name="jobrelay.dev/relay", origin="hq")
    mirror["metadata"].update({"uid": "m-1", "resourceVersion": "9", "generation": 1})
    mirror["status"] = {"active": 1}
    slim = KIND.slim_mirror(mirror)
    assert set(slim) == {"metadata", "spec", "status"}
    assert slim["metadata"]["uid"] == "m-1" and "generation" not in slim["metadata"]
    assert slim["metadata"]["labels"][MIRROR_LABEL] == "jobrelay.dev.relay"
    template = slim["spec"]["template"]
    assert template == {
        "metadata": {"labels": {"app": "train"}, "annotations": {}},
        "spec": {"nodeSelector": {"pool": "gpu"}},
    }
    assert slim["status"] == {"active": 1}
    # A slimmed mirror compares like the full one: no spec drift from slimming.
    assert KIND.spec_patch(job(), slim) is None
    assert KIND.slim_mirror({"metadata": {"name": "a"}})["status"] == {}


def test_build_mirror_and_spec_patch() -> None:
    mirror = KIND.build_mirror(job(), controller_name="jobrelay.dev/relay", origin="hq")
    assert mirror["metadata"]["labels"][ORIGIN_UID_LABEL] == "uid-1"
    assert "managedBy" not in mirror["spec"]
    assert KIND.spec_patch(job(suspend=True), mirror) == {"spec": {"suspend": True}}
    assert KIND.spec_patch(job(), mirror) is None


def test_next_status_follows_the_mirror_and_checks_the_contract() -> None:
    mirror = with_status(job(), {"startTime": NOW, "active": 1})
    status = KIND.next_status(job(), mirror, now=NOW)
    assert status is not None and status["active"] == 1
    assert KIND.next_status(with_status(job(), status), mirror, now=NOW) is None
    old = with_status(job(), {"succeeded": 2})
    assert KIND.status_violations(old, with_status(job(), {"succeeded": 2})) == []
    (problem,) = KIND.status_violations(old, with_status(job(), {"succeeded": 1}))
    assert "rule 6" in problem


@pytest.mark.parametrize(
    ("conditions", "finish"),
    [
        ([], None),
        ([condition("Complete", "False")], None),
        ([condition("FailureTarget")], None),
        (
            [condition("SuccessCriteriaMet"), condition("Complete", reason="CompletionsReached")],
            Finish(True, "CompletionsReached", ""),
        ),
        (
            [
                condition("FailureTarget"),
                condition("Failed", reason="DeadlineExceeded", message="late"),
            ],
            Finish(False, "DeadlineExceeded", "late"),
        ),
        ([{"type": "Failed", "status": "True"}], Finish(False, "", "")),
    ],
)
def test_finish(conditions: list[JsonObj], finish: Finish | None) -> None:
    obj = with_status(job(), {"conditions": conditions})
    assert KIND.finish(obj) == finish
    assert KIND.is_finished(obj) is (finish is not None)
    assert KIND.finish(job()) is None


def test_suspended_and_has_run() -> None:
    assert KIND.is_suspended(job(suspend=True))
    assert not KIND.is_suspended(job())
    assert not KIND.has_run(job())
    assert not KIND.has_run(with_status(job(), {"active": 0}))
    for ran in ({"startTime": NOW}, {"succeeded": 1}, {"failed": 1}):
        assert KIND.has_run(with_status(job(), ran))


@pytest.mark.parametrize(
    ("status", "running"),
    [
        ({}, False),
        ({"startTime": NOW, "active": 0, "ready": 0}, False),
        ({"startTime": NOW, "succeeded": 1}, False),  # ran, nothing runs now
        ({"active": 1}, True),
        ({"ready": 1}, True),
        ({"active": 2, "ready": 1}, True),
    ],
)
def test_shows_running_reads_the_jobs_pod_gauges(status: JsonObj, running: bool) -> None:
    assert KIND.shows_running(with_status(job(), status)) is running


@pytest.mark.parametrize(
    ("spec", "count"),
    [
        ({}, 1),  # parallelism defaults to 1
        ({"parallelism": 4}, 4),  # completions unset: as many as run in parallel
        ({"parallelism": 4, "completions": 2}, 2),
        ({"parallelism": 2, "completions": 10}, 2),
        ({"parallelism": 0}, 0),
    ],
)
def test_pod_sets(spec: JsonObj, count: int) -> None:
    obj = job()
    obj["spec"].pop("parallelism")
    obj["spec"].update(spec)
    before = copy.deepcopy(obj)
    assert KIND.pod_sets(obj) == [
        PodSet("main", count, {"cpu": "2", "memory": "1073741824"}, {"pool": "gpu"})
    ]
    assert obj == before


def test_pod_sets_of_a_bare_job() -> None:
    assert KIND.pod_sets({"spec": {}}) == [PodSet("main", 1, {}, {})]


@pytest.mark.parametrize(
    ("labels", "manual", "dropped"),
    [
        # As the apiserver generates them: all four dropped.
        ({"controller-uid": "uid-1", "batch.kubernetes.io/controller-uid": "uid-1",
          "job-name": "train", "batch.kubernetes.io/job-name": "train"}, None, True),
        # One a user set to another value (kept by the apiserver): all kept.
        ({"controller-uid": "uid-1", "batch.kubernetes.io/controller-uid": "uid-1",
          "job-name": "mine", "batch.kubernetes.io/job-name": "train"}, None, False),
        # Not all four (an object no apiserver of ours made): kept as they are.
        ({"job-name": "train"}, None, False),
        # manualSelector: the user's labels, whatever their names.
        ({"controller-uid": "uid-1", "batch.kubernetes.io/controller-uid": "uid-1",
          "job-name": "train", "batch.kubernetes.io/job-name": "train"}, True, False),
    ],
)  # fmt: skip
def test_generated_labels_are_dropped_only_as_generated(
    labels: dict[str, str], manual: bool | None, dropped: bool
) -> None:
    obj = job() if manual is None else job(manualSelector=manual)
    obj["spec"]["template"]["metadata"]["labels"] = {"app": "train", **labels}
    slim = KIND.slim_local(obj)
    kept = slim["spec"]["template"]["metadata"]["labels"]
    assert kept == ({"app": "train"} if dropped else {"app": "train", **labels})
