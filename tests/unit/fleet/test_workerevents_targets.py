"""Worker Events: which workload one concerns, and reading them."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.fleet.workerevents_samples import (
    JOB,
    JOBSET,
    KINDS,
    MIRRORS,
    MPIJOB,
    RAYJOB,
    TRAINJOB,
    event,
    lookup,
    pod_owners,
)

from jobrelay.fleet.workerevents_targets import (
    Target,
    last_seen,
    occurrences,
    slim_event,
    speaks_for,
    target_of,
)
from jobrelay.kinds.base import WorkloadKey

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
        pytest.param(
            event("RayCluster", "ray-x8k2p", api_version="ray.io/v1"),
            (RAYJOB.name, "ns/ray", "raycluster ray-x8k2p", True),
            id="the RayCluster a RayJob mirror made",
        ),
        pytest.param(
            event("Job", "ray"),
            (RAYJOB.name, "ns/ray", "job ray", True),
            id="the submitter Job a RayJob mirror made",
        ),
        pytest.param(
            event("Job", "mpi-launcher"),
            (MPIJOB.name, "ns/mpi", "job mpi-launcher", True),
            id="the launcher Job an MPIJob mirror made",
        ),
        pytest.param(
            event("JobSet", "tj", api_version="jobset.x-k8s.io/v1alpha2"),
            (TRAINJOB.name, "ns/tj", "jobset tj", True),
            id="the JobSet a TrainJob mirror made",
        ),
        pytest.param(event("Job", "mpi-worker"), None, id="not a launcher"),
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
