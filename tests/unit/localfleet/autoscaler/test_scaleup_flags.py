"""The stand-in autoscaler's flags and the nodes it adds."""

from __future__ import annotations

import pytest

from jobrelay.localfleet.autoscaler.__main__ import settings_from
from jobrelay.localfleet.autoscaler.scaleup_driver import (
    AUTOSCALED_LABEL,
    REQUEST_LABEL,
    _index_of,
    scaleup_node,
)
from jobrelay.localfleet.autoscaler.scaleup_rules import ScaleUpSettings


def test_flags_make_the_settings() -> None:
    argv = ["--kubeconfig", "k", "--cluster", "worker-2", "--delay", "1m30s", "--max-nodes",
            "2", "--cpu", "32", "--memory", "128Gi", "--gpu", "4", "--refuse", "no quota"]  # fmt: skip
    args, settings = settings_from(argv)
    assert args.cluster == "worker-2"
    assert settings == ScaleUpSettings(
        delay_seconds=90, max_nodes=2, cpu="32", memory="128Gi", gpu=4, refuse="no quota"
    )
    assert settings_from(["--kubeconfig", "k", "--cluster", "w"])[1] == ScaleUpSettings()


@pytest.mark.parametrize("flag", [["--delay", "soon"], ["--cpu", "0"], ["--max-nodes", "-1"]])
def test_bad_flags_stop_it(flag: list[str]) -> None:
    with pytest.raises(SystemExit):
        settings_from(["--kubeconfig", "k", "--cluster", "w", *flag])


def test_an_added_node_is_a_kwok_node_of_the_shape_marked_with_its_request() -> None:
    node = scaleup_node("worker-2", 3, ScaleUpSettings(cpu="16", gpu=2), "uid-1")
    labels = node["metadata"]["labels"]
    assert node["metadata"]["name"] == "worker-2-scaleup-3"
    assert labels["type"] == "kwok" and labels["fleet.jobrelay.dev/cluster"] == "worker-2"
    assert labels[AUTOSCALED_LABEL] == "true" and labels[REQUEST_LABEL] == "uid-1"
    assert node["status"]["capacity"] == {
        "cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2",
    }  # fmt: skip
    assert _index_of("worker-2-scaleup-3", "worker-2") == 3
    assert _index_of("worker-2-node-1", "worker-2") is None
