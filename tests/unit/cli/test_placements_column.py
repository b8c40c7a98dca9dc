"""`jobrelay jobs` (an alias of `jobrelay get`): what it shows of each workload's placements,
now get's PLACEMENTS column (-o wide)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobrelay.cli import workloads
from jobrelay.kinds.catalog import DEDICATED

JOB = DEDICATED["Job.v1.batch"]


def _workers(obj: dict[str, Any]) -> str:
    return workloads.row(JOB, obj, datetime.now(UTC)).placements


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
