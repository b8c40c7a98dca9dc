"""Building mirrors from management Jobs, recognising them, and keeping their spec in step."""

from __future__ import annotations

import copy

import pytest

from jobrelay.kinds.job import JsonObj
from jobrelay.kinds.job.generated_labels import generated_labels
from jobrelay.kinds.job.mirror import (
    LAST_APPLIED_ANNOTATION,
    build_mirror,
    is_mirror_of,
    is_ours,
    mirror_spec_patch,
)
from jobrelay.kinds.job.pod_labels import GENERATED_JOB_LABELS
from jobrelay.vocabulary.names import (
    CONTROLLER_ANNOTATION,
    MIRROR_LABEL,
    ORIGIN_LABEL,
    ORIGIN_UID_LABEL,
    RUN_ANNOTATION,
)

CONTROLLER = "jobrelay.dev/relay"
UID = "5f0c1a52-9d7e-4b7a-9d43-0c1f3c0e2a11"


def stored_job() -> JsonObj:
    """A management Job as the manager apiserver returns it after `kubectl apply`."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": UID,
            "resourceVersion": "4711",
            "generation": 1,
            "creationTimestamp": "2026-03-01T12:00:00Z",
            "finalizers": ["example.com/keep"],
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "c1"}
            ],
            "managedFields": [{"manager": "kubectl-client-side-apply"}],
            "labels": {
                "app": "train",
                "controller-uid": UID,
                "batch.kubernetes.io/controller-uid": UID,
                "job-name": "train",
                "batch.kubernetes.io/job-name": "train",
            },
            "annotations": {
                "team": "vision",
                LAST_APPLIED_ANNOTATION: '{"apiVersion":"batch/v1"}',
            },
        },
        "spec": {
            "managedBy": CONTROLLER,
            "parallelism": 2,
            "completions": 4,
            "completionMode": "NonIndexed",
            "backoffLimit": 3,
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 60,
            "suspend": False,
            "manualSelector": False,
            "podReplacementPolicy": "TerminatingOrFailed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
            "template": {
                "metadata": {
                    "labels": {
                        "app": "train",
                        "controller-uid": UID,
                        "batch.kubernetes.io/controller-uid": UID,
                        "job-name": "train",
                        "batch.kubernetes.io/job-name": "train",
                    },
                    "annotations": {"sidecar": "off"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "trainer:1"}],
                },
            },
        },
        "status": {"active": 2, "startTime": "2026-03-01T12:00:01Z"},
    }


@pytest.fixture
def mirror() -> JsonObj:
    return build_mirror(stored_job(), controller_name=CONTROLLER, origin="manager-eu")


def test_mirror_has_same_namespace_and_name(mirror: JsonObj) -> None:
    assert mirror["apiVersion"] == "batch/v1"
    assert mirror["kind"] == "Job"
    assert mirror["metadata"]["name"] == "train"
    assert mirror["metadata"]["namespace"] == "team-a"


def test_mirror_metadata_carries_no_server_fields(mirror: JsonObj) -> None:
    assert set(mirror["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert "status" not in mirror


def test_generated_labels_are_stripped_and_user_labels_kept(mirror: JsonObj) -> None:
    assert mirror["metadata"]["labels"] == {
        "app": "train",
        MIRROR_LABEL: "jobrelay.dev.relay",
        ORIGIN_LABEL: "manager-eu",
        ORIGIN_UID_LABEL: UID,
    }


def test_annotations_lose_last_applied_and_gain_origin(mirror: JsonObj) -> None:
    assert mirror["metadata"]["annotations"] == {
        "team": "vision",
        CONTROLLER_ANNOTATION: CONTROLLER,
        RUN_ANNOTATION: "1",
    }


def test_spec_loses_manager_only_fields(mirror: JsonObj) -> None:
    spec = mirror["spec"]
    for field in ("managedBy", "selector", "manualSelector", "ttlSecondsAfterFinished"):
        assert field not in spec
    assert spec["parallelism"] == 2
    assert spec["completions"] == 4
    assert spec["backoffLimit"] == 3
    assert spec["activeDeadlineSeconds"] == 600
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"


def test_pod_template_loses_generated_labels_only(mirror: JsonObj) -> None:
    template = mirror["spec"]["template"]
    assert template["metadata"] == {"labels": {"app": "train"}, "annotations": {"sidecar": "off"}}
    assert template["spec"] == stored_job()["spec"]["template"]["spec"]


def test_template_with_only_generated_labels_gets_none() -> None:
    job = stored_job()
    job["spec"]["template"]["metadata"]["labels"] = {"job-name": "train", "controller-uid": UID}
    mirror = build_mirror(job, controller_name=CONTROLLER, origin="m")
    assert "labels" not in mirror["spec"]["template"]["metadata"]


def test_input_job_is_not_mutated() -> None:
    job = stored_job()
    before = copy.deepcopy(job)
    mirror = build_mirror(job, controller_name=CONTROLLER, origin="m")
    mirror["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
    mirror["metadata"]["labels"]["app"] = "changed"
    assert job == before


def test_job_without_labels_or_annotations() -> None:
    job = stored_job()
    del job["metadata"]["labels"], job["metadata"]["annotations"]
    del job["spec"]["template"]["metadata"]
    mirror = build_mirror(job, controller_name=CONTROLLER, origin="m")
    assert set(mirror["metadata"]["labels"]) == {MIRROR_LABEL, ORIGIN_LABEL, ORIGIN_UID_LABEL}
    assert "metadata" not in mirror["spec"]["template"]


def test_mirror_is_recognised(mirror: JsonObj) -> None:
    assert is_ours(mirror, CONTROLLER, "manager-eu")
    assert is_mirror_of(mirror, stored_job(), CONTROLLER, "manager-eu")


def test_mirror_of_another_controller_is_not_ours(mirror: JsonObj) -> None:
    assert not is_ours(mirror, "example.com/other", "manager-eu")
    assert not is_mirror_of(mirror, stored_job(), "example.com/other", "manager-eu")


def test_mirror_of_another_origin_is_not_ours(mirror: JsonObj) -> None:
    """Another management cluster sharing the worker, with a controller of the same name."""
    assert not is_ours(mirror, CONTROLLER, "manager-us")
    assert not is_mirror_of(mirror, stored_job(), CONTROLLER, "manager-us")


def test_mirror_without_origin_is_not_ours(mirror: JsonObj) -> None:
    del mirror["metadata"]["labels"][ORIGIN_LABEL]
    assert not is_ours(mirror, CONTROLLER, "manager-eu")


def test_mirror_of_a_namesake_is_not_this_jobs(mirror: JsonObj) -> None:
    recreated = stored_job()
    recreated["metadata"]["uid"] = "another-uid"
    assert is_ours(mirror, CONTROLLER, "manager-eu")
    assert not is_mirror_of(mirror, recreated, CONTROLLER, "manager-eu")


def test_plain_worker_job_is_not_ours() -> None:
    plain: JsonObj = {"metadata": {"name": "train", "namespace": "team-a"}}
    assert not is_ours(plain, CONTROLLER, "manager-eu")
    assert not is_mirror_of(plain, stored_job(), CONTROLLER, "manager-eu")


def test_no_patch_when_in_step(mirror: JsonObj) -> None:
    assert mirror_spec_patch(stored_job(), mirror) is None


def test_patch_follows_suspend_parallelism_deadline_and_backoff(mirror: JsonObj) -> None:
    job = stored_job()
    job["spec"].update(suspend=True, parallelism=1, activeDeadlineSeconds=900, backoffLimit=5)
    assert mirror_spec_patch(job, mirror) == {
        "spec": {"suspend": True, "parallelism": 1, "activeDeadlineSeconds": 900, "backoffLimit": 5}
    }


def test_patch_removes_a_deadline_the_job_no_longer_has(mirror: JsonObj) -> None:
    job = stored_job()
    del job["spec"]["activeDeadlineSeconds"]
    assert mirror_spec_patch(job, mirror) == {"spec": {"activeDeadlineSeconds": None}}


def test_absent_and_default_values_are_equal(mirror: JsonObj) -> None:
    job = stored_job()
    del job["spec"]["suspend"]  # absent means false
    job["spec"]["parallelism"] = 1
    mirror["spec"]["parallelism"] = 1
    del job["spec"]["parallelism"]  # absent means 1
    assert mirror_spec_patch(job, mirror) is None


def test_backoff_limit_followed_only_when_the_job_states_it(mirror: JsonObj) -> None:
    job = stored_job()
    del mirror["spec"]["backoffLimit"]
    assert mirror_spec_patch(job, mirror) == {"spec": {"backoffLimit": 3}}
    del job["spec"]["backoffLimit"]
    assert mirror_spec_patch(job, mirror) is None


def test_completions_follow_only_for_elastic_indexed_jobs() -> None:
    job = stored_job()
    job["spec"].update(completionMode="Indexed", completions=4, parallelism=4)
    mirror = build_mirror(job, controller_name=CONTROLLER, origin="m")
    job["spec"].update(completions=2, parallelism=2)
    assert mirror_spec_patch(job, mirror) == {"spec": {"parallelism": 2, "completions": 2}}


def test_completions_of_other_jobs_are_left_alone(mirror: JsonObj) -> None:
    job = stored_job()
    job["spec"]["completions"] = 8
    assert mirror_spec_patch(job, mirror) is None


def test_the_labels_the_cache_leaves_out_are_the_ones_the_mirror_leaves_out() -> None:
    """One list of the apiserver's generated Job labels: the cache's (generated_labels.py)
    and the mirror's (mirror.py) cannot drift apart."""
    job = {"metadata": {"name": "a", "uid": "u-1"}, "spec": {}}
    assert set(generated_labels(job)) == GENERATED_JOB_LABELS
