"""The pure vocabulary: the metadata view, the placement annotations, the WorkerCluster spec."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.vocabulary.meta import Meta, with_annotations
from jobrelay.vocabulary.names import (
    BLOCKED_ANNOTATION,
    CLUSTER_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PLACEMENTS_ANNOTATION,
)
from jobrelay.vocabulary.placement import (
    blocked_reason,
    not_placed_reason,
    placement_annotations,
    placement_of,
    placements_of,
    run_of,
    with_placement,
)
from jobrelay.vocabulary.workercluster import (
    DrainMode,
    WorkerClusterSpec,
    cordon_patch,
    drain_mode,
    drain_patch,
    uncordon_patch,
)


def annotated(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "a", "namespace": "ns", "annotations": annotations}}


@pytest.mark.parametrize(
    "obj",
    [None, {}, {"metadata": None}, {"metadata": {"annotations": None, "labels": None}}],
)
def test_meta_tolerates_missing_sections(obj: dict[str, Any] | None) -> None:
    meta = Meta(obj)
    assert (meta.name, meta.namespace, meta.key, meta.uid) == ("", "", "", "")
    assert meta.annotations == {} and meta.labels == {} and meta.owner_references == []
    assert meta.generation == 0 and meta.deletion_timestamp is None and not meta.deleting


def test_meta_reads_without_copying() -> None:
    metadata = {
        "name": "j",
        "namespace": "team",
        "uid": "u1",
        "resourceVersion": "7",
        "generation": 3,
        "deletionTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"a": "b"},
        "annotations": {"x": 1},
        "ownerReferences": [{"kind": "JobSet"}, "junk"],
    }
    meta = Meta({"metadata": metadata})
    assert meta.raw is metadata
    assert meta.key == "team/j" and meta.uid == "u1" and meta.resource_version == "7"
    assert meta.generation == 3 and meta.deleting
    assert meta.label("a") == "b" and meta.label("missing") is None
    assert meta.annotation("x") == "1"  # written by hand as a number: read as text
    assert meta.owner_references == [{"kind": "JobSet"}]
    assert Meta({"metadata": {"name": "n"}}).key == "n"  # cluster-scoped


def test_with_annotations_keeps_every_other_field() -> None:
    obj = {"metadata": {"name": "a", "annotations": {"keep": "1"}}, "spec": {"x": 1}}
    changed = with_annotations(obj, {"new": "2"})
    assert changed == {
        "metadata": {"name": "a", "annotations": {"keep": "1", "new": "2"}},
        "spec": {"x": 1},
    }
    assert obj["metadata"]["annotations"] == {"keep": "1"}  # the original is untouched


@pytest.mark.parametrize(
    ("annotations", "cluster", "history"),
    [
        ({}, "", ()),
        ({CLUSTER_ANNOTATION: "w1"}, "w1", ("w1",)),  # placed before the history was kept
        ({CLUSTER_ANNOTATION: "w2", PLACEMENTS_ANNOTATION: "w1,w2"}, "w2", ("w1", "w2")),
        ({PLACEMENTS_ANNOTATION: ",w1,,w2,"}, "", ("w1", "w2")),  # empty names skipped
        ({CLUSTER_ANNOTATION: "", PLACEMENTS_ANNOTATION: ""}, "", ()),
    ],
)
def test_placement_annotations_read(
    annotations: dict[str, str], cluster: str, history: tuple[str, ...]
) -> None:
    obj = annotated(**annotations)
    assert placement_of(obj) == cluster
    assert placements_of(obj) == history
    assert run_of(obj) == len(history)


@given(st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), min_size=1, max_size=6))
def test_placement_written_reads_back(history: list[str]) -> None:
    placed = with_placement(annotated(), history[-1], tuple(history))
    assert placement_of(placed) == history[-1]
    assert placements_of(placed) == tuple(history)
    assert placement_annotations(history[-1], tuple(history))[PLACEMENTS_ANNOTATION] == ",".join(
        history
    )


def test_reasons() -> None:
    held = annotated(**{NOT_PLACED_ANNOTATION: "NotPlaced: no room"})
    assert not_placed_reason(held) == "NotPlaced: no room"
    # Once placed, an old not-placed note no longer says anything.
    placed = with_placement(held, "w1", ("w1",))
    assert not_placed_reason(placed) == ""
    assert blocked_reason(annotated(**{BLOCKED_ANNOTATION: "w1: FailedCreate: quota"})) == (
        "w1: FailedCreate: quota"
    )
    assert blocked_reason(None) == ""


@pytest.mark.parametrize(
    ("spec", "cordoned", "drain", "takes"),
    [
        (None, False, None, True),
        ({"cordoned": True}, True, None, False),
        ({"drain": "All"}, False, DrainMode.ALL, False),
        ({"cordoned": True, "drain": "NotStarted"}, True, DrainMode.NOT_STARTED, False),
        ({"drain": "Sometimes"}, False, None, True),  # not a value the CRD allows
        ({"drain": None}, False, None, True),
    ],
)
def test_workercluster_spec(
    spec: dict[str, Any] | None, cordoned: bool, drain: DrainMode | None, takes: bool
) -> None:
    wanted = WorkerClusterSpec.of({"spec": spec} if spec is not None else {})
    assert (wanted.cordoned, wanted.drain, wanted.takes_new_workloads) == (cordoned, drain, takes)


def test_workercluster_patches() -> None:
    assert drain_mode("All") is DrainMode.ALL and drain_mode("") is None
    assert cordon_patch() == {"spec": {"cordoned": True}}
    assert uncordon_patch() == {"spec": {"cordoned": False, "drain": None}}
    assert drain_patch(DrainMode.NOT_STARTED) == {"spec": {"cordoned": True, "drain": "NotStarted"}}
