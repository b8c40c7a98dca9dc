"""``spec.autoscaling`` of a WorkerCluster as jobrelay reads it: the admin's values, the
CRD's defaults, and what the CRD would refuse left out rather than trusted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.vocabulary import provisioning_api as api
from jobrelay.vocabulary.autoscaling_spec import (
    DEFAULT_MAX_REQUESTS,
    AddableNodeShape,
    WorkerAutoscaling,
)
from jobrelay.vocabulary.workercluster import WorkerClusterSpec

CRD = Path(__file__).parents[3] / "charts/jobrelay/files/crds/workerclusters.jobrelay.dev.yaml"


def test_the_admins_values_are_read() -> None:
    spec = {"autoscaling": {
        "provisioningClassName": api.CHECK_CAPACITY,
        "nodeShapes": [{"cpu": "16", "memory": "64Gi", "count": 4},
                       {"cpu": 32, "memory": "256Gi", "gpu": 8, "count": 2}],
        "maxRequests": 3,
    }}  # fmt: skip
    assert WorkerAutoscaling.of(spec) == WorkerAutoscaling(
        node_shapes=(AddableNodeShape("16", "64Gi", 0, 4), AddableNodeShape("32", "256Gi", 8, 2)),
        provisioning_class_name=api.CHECK_CAPACITY,
        max_requests=3,
    )
    assert WorkerClusterSpec.of({"spec": spec}).autoscaling == WorkerAutoscaling.of(spec)


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (None, None),
        ("yes", None),
        ({}, None),
        ({"nodeShapes": []}, None),
        # Every shape unusable: not autoscaled at all.
        ({"nodeShapes": [{"cpu": "lots", "memory": "1Gi"}, {"cpu": "0", "memory": "1Gi"}]}, None),
        (
            {"nodeShapes": [{"cpu": "8", "memory": "1Gi"}, {"cpu": "8"}], "maxRequests": 0},
            WorkerAutoscaling((AddableNodeShape("8", "1Gi"),)),
        ),
        (
            {"nodeShapes": [{"cpu": "8", "memory": "1Gi", "count": True, "gpu": -1},
                            {"cpu": "4", "memory": "1Gi"}],
             "provisioningClassName": ""},
            WorkerAutoscaling((AddableNodeShape("4", "1Gi"),)),
        ),
    ],
)  # fmt: skip
def test_defaults_and_what_the_crd_would_refuse(block: Any, expected: Any) -> None:
    assert WorkerAutoscaling.of({"autoscaling": block}) == expected
    if expected is not None:
        assert expected.provisioning_class_name == api.BEST_EFFORT_ATOMIC_SCALE_UP
        assert expected.max_requests == DEFAULT_MAX_REQUESTS


def test_a_spec_without_the_block_is_not_autoscaled() -> None:
    assert WorkerClusterSpec.of({"spec": {"cordoned": True}}).autoscaling is None
    assert WorkerClusterSpec.of(None).autoscaling is None


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "count",
                                                       "nodeShapes", "maxRequests"]), inner),
                    max_leaves=12))  # fmt: skip
def test_any_value_reads_without_error(block: Any) -> None:
    found = WorkerAutoscaling.of({"autoscaling": block})
    assert found is None or (found.node_shapes and found.max_requests >= 1)


def test_the_crd_defines_the_block_with_the_same_defaults() -> None:
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    block = spec["properties"]["autoscaling"]
    assert block["required"] == ["nodeShapes"]
    fields = block["properties"]
    assert fields["provisioningClassName"]["default"] == api.BEST_EFFORT_ATOMIC_SCALE_UP
    assert fields["maxRequests"]["default"] == DEFAULT_MAX_REQUESTS
    shape = fields["nodeShapes"]["items"]
    assert shape["required"] == ["cpu", "memory"]
    assert (shape["properties"]["count"]["default"], shape["properties"]["gpu"]["default"]) == (
        1,
        0,
    )
