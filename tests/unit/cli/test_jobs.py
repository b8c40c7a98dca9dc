"""`jobrelay jobs`: what it shows of each workload's placements."""

from __future__ import annotations

from typing import Any

import pytest

from jobrelay.cli.jobs import _workers


@pytest.mark.parametrize(
    ("annotations", "shown"),
    [
        ({}, "-"),
        ({"jobrelay.dev/cluster": "worker-1"}, "worker-1"),  # placed before history was kept
        (
            {"jobrelay.dev/cluster": "worker-2", "jobrelay.dev/placements": "worker-1,worker-2"},
            "worker-1>worker-2",
        ),
    ],
)
def test_the_workers_column_shows_every_placement_in_order(
    annotations: dict[str, Any], shown: str
) -> None:
    assert _workers({"metadata": {"annotations": annotations}}) == shown
