"""Which worker namespaces this manager may create mirrors in: a table, a property, and
the filter's explanation in a placement."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.placement.support import cluster, node, pods

from jobrelay.placement.decision import place
from jobrelay.placement.namespaces import (
    WorkerNamespaces,
    credential_namespace,
    namespace_refusal,
)
from jobrelay.placement.not_known import NotKnownYet

ORIGIN = "uid-of-manager-a"
OPEN = {"team-a": ORIGIN, "team-b": None, "team-c": "uid-of-manager-b", "jobrelay-system": ORIGIN}
NOT_OPEN = (
    "namespace {ns} exists there and is not open to this manager "
    f"(label jobrelay.dev/origin={ORIGIN})"
)


def worker(**fields: object) -> WorkerNamespaces:
    defaults: dict[str, object] = {
        "origin": ORIGIN, "create": True, "synced": True, "origins": OPEN,
        "credential": "jobrelay-system",
    }  # fmt: skip
    return WorkerNamespaces(**{**defaults, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("namespace", "fields", "reason"),
    [
        ("team-a", {}, None),  # labelled with our origin
        ("team-b", {}, NOT_OPEN.format(ns="team-b")),  # unlabelled: the worker admin's
        ("team-c", {}, NOT_OPEN.format(ns="team-c")),  # another manager's
        ("team-new", {}, None),  # missing: created with our label
        (
            "team-new",
            {"create": False},
            "namespace team-new does not exist there and namespace creation is turned off "
            f"(its admin may create it with the label jobrelay.dev/origin={ORIGIN})",
        ),
        ("team-a", {"create": False}, None),
        (
            "kube-system",
            {},
            "namespace kube-system is the worker's own (kube-*): jobrelay never uses it",
        ),
        (
            "kube-public",
            {"origins": {"kube-public": ORIGIN}},
            "namespace kube-public is the worker's own (kube-*): jobrelay never uses it",
        ),
        (
            "jobrelay-system",
            {},
            "namespace jobrelay-system holds jobrelay's credential there: "
            "jobrelay never creates mirrors in it",
        ),
        ("team-a", {"synced": False}, NotKnownYet.NAMESPACES),  # informer not listed yet
        ("team-new", {"synced": False}, NotKnownYet.NAMESPACES),
        ("jobrelay-system", {"credential": None}, None),  # a credential that is no account
    ],
)
def test_namespace_refusal(namespace: str, fields: dict[str, object], reason: str | None) -> None:
    assert namespace_refusal(namespace, worker(**fields)) == reason


@given(
    namespace=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    label=st.one_of(st.none(), st.sampled_from([ORIGIN, "other", ""])),
    create=st.booleans(),
    present=st.booleans(),
)
def test_a_mirror_goes_only_where_our_label_is_or_where_we_create_it(
    namespace: str, label: str | None, create: bool, present: bool
) -> None:
    origins = {namespace: label} if present else {}
    allowed = namespace_refusal(namespace, worker(origins=origins, create=create)) is None
    expected = (
        not namespace.startswith("kube-")
        and namespace != "jobrelay-system"
        and (label == ORIGIN if present else create)
    )
    assert allowed == expected


@pytest.mark.parametrize(
    ("username", "namespace"),
    [
        ("system:serviceaccount:jobrelay-system:jobrelay-worker", "jobrelay-system"),
        ("system:serviceaccount:ops:x", "ops"),
        ("system:serviceaccount:ops", None),
        ("system:serviceaccount::x", None),
        ("kubernetes-admin", None),
        ("system:admin", None),
    ],
)
def test_credential_namespace(username: str, namespace: str | None) -> None:
    assert credential_namespace(username) == namespace


def test_a_worker_whose_namespace_is_not_open_is_filtered_out_with_the_reason() -> None:
    workload = dataclasses.replace(pods(1, cpu="1"), namespace="team-b")
    open_there = {"team-b": ORIGIN}
    clusters = [
        cluster("worker-1", node("n1"), namespaces=worker()),
        cluster("worker-2", node("n1"), namespaces=worker(origins=open_there)),
    ]
    decision = place(clusters, workload)
    assert decision.cluster == "worker-2"
    assert decision.passed_over[0].by == "worker-namespace"
    decision = place(clusters[:1], workload)
    assert decision.cluster is None
    assert not decision.never_fits  # the admin's label opens it: it waits, held
    assert decision.explain() == "worker-1: " + NOT_OPEN.format(ns="team-b")


def test_an_unjudged_cluster_or_workload_is_not_filtered() -> None:
    assert place(
        [cluster("w", node("n"))], dataclasses.replace(pods(1, cpu="1"), namespace="x")
    ).cluster
    assert place([cluster("w", node("n"), namespaces=worker(synced=False))],
                 pods(1, cpu="1")).cluster  # fmt: skip
