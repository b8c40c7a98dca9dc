"""--kind NAME=VALUE and --managed-by-field: parsing, what a CRD refuses, the Lease's record."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.base import RUN_POLICY_MANAGED_BY, SPEC_MANAGED_BY
from jobrelay.kinds.catalog import DEDICATED, KindError, kinds_from_names
from jobrelay.kinds.managed_by_claims import (
    MULTIKUEUE,
    KindClaim,
    LeaseKind,
    claim_problem,
    field_problem,
    lease_entry,
    multikueue_problem,
    parse_field_flag,
    parse_kind_flag,
    parse_lease_entry,
)

RAYJOB = DEDICATED["RayJob.v1.ray.io"]
RAYCLUSTER = DEDICATED["RayCluster.v1.ray.io"]
TRAINJOB = DEDICATED["TrainJob.v1alpha1.trainer.kubeflow.org"]
PYTORCHJOB = DEDICATED["PyTorchJob.v1.kubeflow.org"]
MPIJOB = DEDICATED["MPIJob.v2beta1.kubeflow.org"]
JOB = DEDICATED["Job.v1.batch"]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("Job.v1.batch", KindClaim("Job.v1.batch")),
        (" RayJob.v1.ray.io=kueue.x-k8s.io/multikueue", KindClaim("RayJob.v1.ray.io", MULTIKUEUE)),
        ("Widget.v1.example.com=example.com/relay", KindClaim("Widget.v1.example.com", "example.com/relay")),
        ("Pod.v1=a", KindClaim("Pod.v1", "a")),
    ],
)  # fmt: skip
def test_kind_flags(text: str, claim: KindClaim) -> None:
    assert parse_kind_flag(text) == claim


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RayJob.v1.ray.io=", "'' is not a managedBy value"),
        ("RayJob.v1.ray.io=a,b", "'a,b' is not a managedBy value"),
        ("RayJob.v1.ray.io=a b", "is not a managedBy value"),
        ("RayJob.v1.ray.io=x=y", "'x=y' is not a managedBy value"),
        ("RayJob.v1.ray.io=" + "a" * 64, "is not a managedBy value"),
        ("rayjob=kueue.x-k8s.io/multikueue", "--kind 'rayjob': write Kind.version.group"),
    ],
)
def test_bad_kind_flags_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(KindError, match=message.replace("(", r"\(")):
        parse_kind_flag(text)


def test_field_flags() -> None:
    assert parse_field_flag("Widget.v1.example.com=spec.runPolicy.managedBy") == (
        "Widget.v1.example.com",
        "spec.runPolicy.managedBy",
    )
    assert parse_field_flag("Widget.v1.example.com=spec.managedBy")[1] == "spec.managedBy"
    for bad in ("Widget.v1.example.com=spec.other", "Widget.v1.example.com", "w=spec.managedBy"):
        with pytest.raises(KindError, match="--managed-by-field"):
            parse_field_flag(bad)
    with pytest.raises(KindError, match=r"spec\.managedBy or spec\.runPolicy\.managedBy"):
        parse_field_flag("Widget.v1.example.com=metadata.labels")


@pytest.mark.parametrize(
    ("kind", "value", "refused"),
    [
        (RAYJOB, MULTIKUEUE, None),
        (RAYCLUSTER, MULTIKUEUE, None),
        (TRAINJOB, MULTIKUEUE, None),
        (RAYJOB, "jobrelay.dev/relay",
         "--kind RayJob.v1.ray.io: 'jobrelay.dev/relay' is a value its CRD refuses (it accepts "
         "only 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue' in spec.managedBy); "
         "write --kind RayJob.v1.ray.io=kueue.x-k8s.io/multikueue"),
        (RAYCLUSTER, "ray.io/kuberay-operator", "is the operator's own value"),
        (TRAINJOB, "jobrelay.dev/relay",
         "it accepts only 'trainer.kubeflow.org/trainjob-controller' or "
         "'kueue.x-k8s.io/multikueue' in spec.managedBy"),
        (TRAINJOB, "trainer.kubeflow.org/trainjob-controller", "the operator's own value"),
        # Their CRDs take any value (their operators' validation runs where they run).
        (PYTORCHJOB, "jobrelay.dev/relay", None),
        (MPIJOB, "jobrelay.dev/relay", None),
        (JOB, "anything/else", None),
    ],
)  # fmt: skip
def test_values_a_crd_refuses_stop_the_start_with_the_flag_to_write(
    kind: object, value: str, refused: str | None
) -> None:
    problem = claim_problem(kind, value)  # type: ignore[arg-type]
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem
        assert "=kueue.x-k8s.io/multikueue" in problem


def test_a_field_flag_cannot_move_an_adapters_field() -> None:
    assert field_problem(PYTORCHJOB, "spec.runPolicy.managedBy") is None
    assert field_problem(RAYJOB, "spec.managedBy") is None
    problem = field_problem(PYTORCHJOB, "spec.managedBy")
    assert problem is not None and "keeps managedBy at spec.runPolicy.managedBy" in problem
    (widget,) = kinds_from_names(
        ["Widget.v1.example.com"], fields={"Widget.v1.example.com": RUN_POLICY_MANAGED_BY}
    )
    assert widget.managed_by_field == RUN_POLICY_MANAGED_BY
    assert field_problem(widget, "spec.runPolicy.managedBy") is None


@pytest.mark.parametrize(
    ("entry", "read"),
    [
        ("Job.v1.batch", LeaseKind("Job.v1.batch")),
        ("RayJob.v1.ray.io=kueue.x-k8s.io/multikueue", LeaseKind("RayJob.v1.ray.io", MULTIKUEUE)),
        ("Widget.v1.example.com=a/b@spec.runPolicy.managedBy",
         LeaseKind("Widget.v1.example.com", "a/b", RUN_POLICY_MANAGED_BY)),
        ("Widget.v1.example.com@spec.runPolicy.managedBy",
         LeaseKind("Widget.v1.example.com", None, RUN_POLICY_MANAGED_BY)),
        ("junk", None),
        ("Job.v1.batch@spec.elsewhere", None),
        ("Job.v1.batch=a b", None),
    ],
)  # fmt: skip
def test_lease_entries_read_back(entry: str, read: LeaseKind | None) -> None:
    assert parse_lease_entry(entry) == read


values = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._~:/+-]{0,62}", fullmatch=True)


@given(
    name=st.sampled_from(["Job.v1.batch", "RayJob.v1.ray.io", "Widget.v1alpha1.a.example.com"]),
    value=st.none() | values,
    field=st.sampled_from([SPEC_MANAGED_BY, RUN_POLICY_MANAGED_BY]),
)
def test_what_the_lease_records_reads_back(
    name: str, value: str | None, field: tuple[str, ...]
) -> None:
    entry = lease_entry(name, value, field)
    assert "," not in entry
    read = parse_lease_entry(entry)
    assert read == LeaseKind(name, value, None if field == SPEC_MANAGED_BY else field)
    assert parse_kind_flag(entry.partition("@")[0]) == KindClaim(name, value)


def test_multikueue_installed_refuses_its_value() -> None:
    assert multikueue_problem([], {"MultiKueueCluster"}) is None
    assert multikueue_problem(["RayJob.v1.ray.io"], {"ClusterQueue", "LocalQueue"}) is None
    problem = multikueue_problem(["RayJob.v1.ray.io"], {"MultiKueueConfig", "ClusterQueue"})
    assert problem is not None
    assert problem.startswith(
        "--kind RayJob.v1.ray.io=kueue.x-k8s.io/multikueue: Kueue's MultiKueue is installed "
        "on this management cluster (kueue.x-k8s.io serves MultiKueueConfig) and owns that value"
    )
