"""Kind names to adapters: parsing ``Kind.version.group``, plurals, dedicated versus generic."""

from __future__ import annotations

import pytest

from jobrelay.kinds import DEFAULT_KINDS, KindError, kinds_from_names
from jobrelay.kinds.catalog import DEDICATED, default_plural, parse_kind_name
from jobrelay.kinds.generic import GenericKind
from jobrelay.kinds.job.adapter import JobKind
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.vocabulary.resource import Resource


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("Job.v1.batch", ("Job", "v1", "batch")),
        ("JobSet.v1alpha2.jobset.x-k8s.io", ("JobSet", "v1alpha2", "jobset.x-k8s.io")),
        ("Pod.v1", ("Pod", "v1", "")),
        ("  RayJob.v1.ray.io ", ("RayJob", "v1", "ray.io")),
    ],
)
def test_parse_kind_name(text: str, parsed: tuple[str, str, str]) -> None:
    assert parse_kind_name(text) == parsed


@pytest.mark.parametrize("text", ["", "Job", "job.v1.batch", "Job..batch", ".v1.batch", "1Job.v1"])
def test_parse_kind_name_says_how_to_write_it(text: str) -> None:
    with pytest.raises(KindError, match=r"write Kind\.version\.group, e\.g\. Job\.v1\.batch"):
        parse_kind_name(text)


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Job", "jobs"),
        ("JobSet", "jobsets"),
        ("Class", "classes"),
        ("Box", "boxes"),
        ("Batch", "batches"),
        ("Mesh", "meshes"),
        ("Policy", "policies"),
        ("Gateway", "gateways"),  # a vowel before the y
        ("RayJob", "rayjobs"),
    ],
)
def test_default_plural(kind: str, plural: str) -> None:
    assert default_plural(kind) == plural


def test_the_default_kinds_are_jobs() -> None:
    assert DEFAULT_KINDS == ("Job.v1.batch",)
    assert [type(k) for k in kinds_from_names(DEFAULT_KINDS)] == [JobKind]
    assert set(DEDICATED) == {
        "Job.v1.batch",
        "JobSet.v1alpha2.jobset.x-k8s.io",
        "RayJob.v1.ray.io",
        "RayCluster.v1.ray.io",
        "TrainJob.v1alpha1.trainer.kubeflow.org",
        "PyTorchJob.v1.kubeflow.org",
        "MPIJob.v2beta1.kubeflow.org",
    }


def test_dedicated_adapters_where_they_exist_generic_elsewhere_in_order_once() -> None:
    kinds = kinds_from_names(
        [
            "ServeJob.v1.ray.io",
            "Job.v1.batch",
            "JobSet.v1alpha2.jobset.x-k8s.io",
            "ServeJob.v1.ray.io",
            " Job.v1.batch",
        ]
    )
    assert [type(k) for k in kinds] == [GenericKind, JobKind, JobSetKind]
    assert kinds[0].ref == Resource("ray.io", "v1", "servejobs", "ServeJob")
    # Another version of a dedicated kind is served generically.
    (other,) = kinds_from_names(["JobSet.v1alpha1.jobset.x-k8s.io"])
    assert isinstance(other, GenericKind)


def test_plurals_and_finishing_conditions_reach_generic_kinds() -> None:
    mouse, rayjob = kinds_from_names(
        ["Mouse.v1.example.com", "RayJob.v1alpha1.ray.io"],
        finished_conditions=("Done", "Error"),
        plurals={"Mouse.v1.example.com": "mice"},
    )
    assert isinstance(mouse, GenericKind) and isinstance(rayjob, GenericKind)
    assert (mouse.ref.plural, rayjob.ref.plural) == ("mice", "rayjobs")
    assert mouse.finished_conditions == ("Done", "Error")
    # A dedicated adapter knows its own plural.
    (job,) = kinds_from_names(["Job.v1.batch"], plurals={"Job.v1.batch": "jobz"})
    assert job.ref.plural == "jobs"


def test_no_kind_at_all() -> None:
    with pytest.raises(KindError, match="at least one --kind is needed"):
        kinds_from_names([])


def test_a_bad_name_among_good_ones() -> None:
    with pytest.raises(KindError, match="'job'"):
        kinds_from_names(["Job.v1.batch", "job"])
