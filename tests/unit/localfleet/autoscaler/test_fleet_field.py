"""The ``autoscaler`` field of a fleet configuration's worker, and the fleet's command line
for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.localfleet.autoscaled_workers import AUTOSCALER, autoscaler_command
from jobrelay.localfleet.autoscaler.__main__ import settings_from
from jobrelay.localfleet.autoscaler_field import AutoscalerShape
from jobrelay.localfleet.shape import ShapeError, parse, parse_yaml
from jobrelay.localfleet.startup import STAGES
from jobrelay.vocabulary.autoscaling_spec import AddableNodeShape, WorkerAutoscaling

ISSUE_EXAMPLE = """
clusters:
  worker-1: {nodes: 2}
  worker-2: {nodes: 2, autoscaler: {maxNodes: 4, cpu: "16", memory: 64Gi, delay: 20s}}
"""


def test_the_issue_example_makes_worker_2_autoscaled_and_round_trips() -> None:
    fleet = parse_yaml(ISSUE_EXAMPLE, "fleet.yaml")
    assert fleet.workers["worker-1"].autoscaler is None
    assert fleet.workers["worker-2"].autoscaler == AutoscalerShape(4, "16", "64Gi", 0, "20s")
    assert parse(yaml.safe_load(yaml.safe_dump(fleet.to_config())), "again") == fleet
    assert "autoscaler up to 4 x 16 CPU / 64Gi after 20s" in fleet.workers["worker-2"].describe()


def test_an_empty_field_takes_the_defaults_and_refuse_is_a_message() -> None:
    fleet = parse({"clusters": {"w": {"autoscaler": None}}}, "f")
    assert fleet.workers["w"].autoscaler == AutoscalerShape()
    refusing = parse({"clusters": {"w": {"autoscaler": {"refuse": "no quota"}}}}, "f")
    assert refusing.workers["w"].autoscaler == AutoscalerShape(refuse="no quota")


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        ({"w": {"autoscaler": {"maxNodes": -1}}}, "'maxNodes': -1 is not a whole number"),
        ({"w": {"autoscaler": {"maxNodes": 101}}}, "more than 100"),
        ({"w": {"autoscaler": {"cpu": "lots"}}}, "'cpu': 'lots' is not a quantity"),
        ({"w": {"autoscaler": {"delay": "soon"}}}, "'delay': 'soon' is not a duration"),
        ({"w": {"autoscaler": {"booking": "never"}}}, "'booking': 'never' is not a duration"),
        ({"w": {"autoscaler": {"size": 3}}}, "unknown key 'size'"),
        ({"w": {"autoscaler": {"refuse": True}}}, "'refuse' is the refusal's message"),
        ({"w": {"autoscaler": [4]}}, "expected a mapping"),
        ({"w": {}, "manager": {"autoscaler": {}}}, "only a worker"),
    ],
)
def test_errors_name_the_cluster_and_the_field(clusters: Any, message: str) -> None:
    with pytest.raises(ShapeError, match="field 'autoscaler'") as raised:
        parse({"clusters": clusters}, "fleet.yaml")
    assert message in str(raised.value)


def test_the_command_line_gives_the_stand_in_the_same_settings() -> None:
    shape = AutoscalerShape(
        max_nodes=2, cpu="32", memory="128Gi", gpu=4, delay="5s", refuse="x", booking="1m"
    )
    argv = autoscaler_command(Path("/k"), "worker-2", shape)
    assert argv[1:3] == ["-m", "jobrelay.localfleet.autoscaler"]
    args, settings = settings_from(argv[3:])
    assert (args.cluster, str(args.kubeconfig)) == ("worker-2", "/k")
    assert (settings.max_nodes, settings.cpu, settings.memory, settings.gpu) == (
        2,
        "32",
        "128Gi",
        4,
    )
    assert (settings.delay_seconds, settings.refuse, settings.booking_seconds) == (5, "x", 60)


def test_the_autoscaler_stops_with_the_last_stage_before_the_apiserver() -> None:
    assert AUTOSCALER in STAGES[-1]


def test_an_autoscaled_worker_is_registered_with_the_shape_its_stand_in_adds() -> None:
    block = AutoscalerShape(max_nodes=4, cpu="16", memory="64Gi").worker_cluster_autoscaling()
    found = WorkerAutoscaling.of({"autoscaling": block})
    assert found == WorkerAutoscaling((AddableNodeShape("16", "64Gi", 0, 4),))
    assert AutoscalerShape(max_nodes=0).worker_cluster_autoscaling() is None
