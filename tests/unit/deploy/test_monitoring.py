"""The chart's files/prometheus-rules.yaml and files/grafana-dashboard.json name only metrics jobrelay exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.controller.instrument import Instruments
from jobrelay.observe.metrics import ControllerState, exposed_names

DEPLOY = Path(__file__).resolve().parents[3] / "charts" / "jobrelay" / "files"
_METRIC = re.compile(r"\bjobrelay_[a-z0-9_]+\b")
# The deployment's own port and the alerts jobrelay's README promises operators.
REQUIRED_ALERTS = {
    "JobrelayWorkerDisconnected",
    "JobrelayQueueBackingUp",
    "JobrelayDispatchLatencyHigh",
}


def _exposed() -> frozenset[str]:
    idle = ControllerState(False, False, 0, 0, 0, 0.0, 0)
    return exposed_names(Instruments(lambda: idle).metrics.registry)


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load((DEPLOY / "prometheus-rules.yaml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]


def test_the_alerts_operators_are_promised_are_there() -> None:
    assert {rule["alert"] for rule in _rules()} >= REQUIRED_ALERTS


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_expression_names_only_exposed_metrics(source: str) -> None:
    expressions = [r["expr"] for r in _rules()] if source == "rules" else _dashboard_expressions()
    assert expressions
    exposed = _exposed()
    for expression in expressions:
        named = set(_METRIC.findall(expression))
        assert named, f"{expression!r} names no jobrelay metric"
        assert named <= exposed, f"{expression!r}: no such metric {sorted(named - exposed)}"


def test_dashboard_panels_do_not_overlap() -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"panel {panel['title']!r} overlaps another"
        cells |= mine
