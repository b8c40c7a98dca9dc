"""Which apiservers jobrelay supports (pure), and the charts' kubeVersion saying the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kube.supported_versions import (
    MANAGER_MINIMUM,
    WORKER_MINIMUM,
    reported_version,
    too_old,
)

CHARTS = Path(__file__).parents[3] / "charts"


@pytest.mark.parametrize(
    ("info", "version"),
    [
        ({"gitVersion": "v1.35.4", "major": "1", "minor": "35"}, (1, 35)),
        ({"gitVersion": "v1.32.4-eks-1234abc"}, (1, 32)),
        ({"gitVersion": "v1.31.9-gke.100", "minor": "31+"}, (1, 31)),
        ({"major": "1", "minor": "30+"}, (1, 30)),  # no gitVersion: the fields
        ({"gitVersion": "custom-build", "major": "1", "minor": "33"}, (1, 33)),
        ({"gitVersion": "custom-build"}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_the_version_is_read_from_git_version_else_major_and_minor(
    info: dict[str, Any], version: tuple[int, int] | None
) -> None:
    assert reported_version(info) == version


@pytest.mark.parametrize(
    ("git_version", "refused"),
    [("v1.31.9", True), ("v1.29.0", True), ("v0.99.0", True), ("v1.32.0", False),
     ("v1.32.0-alpha.1", False), ("v1.35.4", False), ("v2.0.0", False), ("odd", False)],
)  # fmt: skip
def test_a_manager_older_than_1_32_is_refused_in_one_line(git_version: str, refused: bool) -> None:
    problem = too_old({"gitVersion": git_version})
    assert (problem is not None) == refused
    if problem:
        assert problem.startswith(f"the management cluster runs Kubernetes {git_version}; ")
        assert "jobrelay needs 1.32 or later" in problem and "\n" not in problem


@given(st.integers(0, 3), st.integers(0, 60))
def test_refused_exactly_below_the_minimum(major: int, minor: int) -> None:
    info = {"gitVersion": f"v{major}.{minor}.1"}
    assert (too_old(info) is not None) == ((major, minor) < MANAGER_MINIMUM)
    assert (too_old(info, WORKER_MINIMUM, what="worker") is not None) == (
        (major, minor) < WORKER_MINIMUM
    )


@pytest.mark.parametrize(
    ("chart", "minimum"), [("jobrelay", MANAGER_MINIMUM), ("jobrelay-worker", WORKER_MINIMUM)]
)
def test_each_charts_kube_version_is_the_supported_minimum(
    chart: str, minimum: tuple[int, int]
) -> None:
    declared = yaml.safe_load((CHARTS / chart / "Chart.yaml").read_text())["kubeVersion"]
    assert declared == f">={minimum[0]}.{minimum[1]}.0-0"
