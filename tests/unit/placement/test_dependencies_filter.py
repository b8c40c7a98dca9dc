"""The ForeignDependencies filter: a worker holding, under a name the workload needs, an
object jobrelay did not make is passed over, with the reason."""

from __future__ import annotations

import pytest

from jobrelay.placement.decision import place
from jobrelay.placement.filters import ForeignDependencies
from jobrelay.placement.model import Cluster, Request
from jobrelay.placement.workload import Workload


@pytest.mark.parametrize(
    ("namespace", "held", "reason"),
    [
        ("team-a", (), None),
        (
            "team-a",
            ("configmap/settings",),
            "configmap/settings in team-a was not made by jobrelay",
        ),
        (
            "team-a",
            ("configmap/settings", "secret/creds"),
            "configmap/settings, secret/creds in team-a were not made by jobrelay",
        ),
        ("", ("serviceaccount/runner",), "serviceaccount/runner was not made by jobrelay"),
    ],
)
def test_reason(namespace: str, held: tuple[str, ...], reason: str | None) -> None:
    request = Request(Workload((), namespace=namespace))
    cluster = Cluster("worker-1", foreign_dependencies=held)
    assert ForeignDependencies().reject(request, cluster) == reason


def test_the_explanation_names_the_worker_and_the_object() -> None:
    clusters = [
        Cluster("worker-1", blind=True, foreign_dependencies=("configmap/settings",)),
        Cluster("worker-2", blind=True),
    ]
    decision = place(clusters, Workload((), namespace="team-a"))
    assert decision.cluster == "worker-2"
    assert "worker-1: configmap/settings in team-a was not made by jobrelay" in decision.explain()
    alone = place(clusters[:1], Workload((), namespace="team-a"))
    assert alone.cluster is None
    assert not alone.never_fits  # its owner may delete it
