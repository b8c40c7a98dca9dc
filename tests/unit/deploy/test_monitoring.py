"""The chart's files/prometheus-rules.yaml and files/grafana-dashboard.json name only metrics
jobrelay exposes; every alert links its runbook in docs/failure-modes.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.controller.instrument import Instruments
from jobrelay.observe.metrics import ControllerState, QueueState, exposed_names

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "charts" / "jobrelay" / "files"
FAILURE_MODES = ROOT / "docs" / "failure-modes.md"
RUNBOOKS = "https://github.com/jobrelay/jobrelay/blob/main/docs/failure-modes.md#"
_METRIC = re.compile(r"\b(?:jobrelay|process|python)_[a-z0-9_]+\b")
# The per-worker label is `worker`: `cluster` collides with Thanos's, Mimir's and
# kube-prometheus's external label.
_OLD_LABEL = re.compile(r"\b(?:from_)?cluster\b")
# The deployment's own port and the alerts jobrelay's README promises operators.
REQUIRED_ALERTS = {
    "JobrelayWorkerDisconnected",
    "JobrelayQueueBackingUp",
    "JobrelayDispatchLatencyHigh",
}


def _exposed() -> frozenset[str]:
    # A leader: every gauge is exposed (a standby has no queue gauges).
    leading = ControllerState(
        leader=True, ready=True, queue=QueueState(0, 0, 0, 0.0), held={}, queues=(),
        fairness_error=0.0, api_certificate_expiry=0.0, api_service_available=True,
    )  # fmt: skip
    return exposed_names(Instruments(lambda: leading).metrics.registry)


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


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_no_expression_uses_the_old_cluster_label(source: str) -> None:
    expressions = [r["expr"] for r in _rules()] if source == "rules" else _dashboard_expressions()
    for expression in expressions:
        assert not _OLD_LABEL.search(expression), expression


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


def test_every_alert_links_its_own_runbook_section() -> None:
    anchors = _anchors(FAILURE_MODES.read_text())
    for rule in _rules():
        url = rule["annotations"].get("runbook_url", "")
        assert url.startswith(RUNBOOKS), f"{rule['alert']}: runbook_url {url!r}"
        anchor = url.removeprefix(RUNBOOKS)
        assert anchor == rule["alert"].lower(), f"{rule['alert']}: not its own section"
        assert anchor in anchors, f"{rule['alert']}: docs/failure-modes.md has no #{anchor}"


def test_every_metric_is_documented() -> None:
    documented = (ROOT / "docs" / "metrics.md").read_text()
    for name in _exposed():
        family = re.sub(r"_(?:total|bucket|count|sum)$", "", name)
        if family.startswith("jobrelay_"):
            assert f"`{family}" in documented, f"docs/metrics.md does not describe {family}"


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
