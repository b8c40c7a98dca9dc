"""The alert rules, checked and tested with promtool (`promtool check rules`, `promtool test
rules` on the hand-written cases of tests/promtool/): every alert fires when it should,
stays quiet when it should not, and clears."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.promtool_binary import promtool as built_promtool

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "charts" / "jobrelay" / "files" / "prometheus-rules.yaml"
CASES = ROOT / "tests" / "promtool" / "alerts_test.yaml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return built_promtool(print, build=False)
    except BinaryError as error:
        pytest.fail(f"promtool is needed to test the alert rules: {error}")


def _run(promtool: Path, *argv: str) -> str:
    done = subprocess.run(
        [str(promtool), *argv], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _alerts() -> set[str]:
    document = yaml.safe_load(RULES.read_text())
    return {rule["alert"] for group in document["groups"] for rule in group["rules"]}


def test_promtool_checks_the_rules(promtool: Path) -> None:
    assert f"SUCCESS: {len(_alerts())} rules found" in _run(promtool, "check", "rules", str(RULES))


def test_promtool_runs_every_hand_written_case(promtool: Path) -> None:
    assert "SUCCESS" in _run(promtool, "test", "rules", str(CASES))


def test_every_alert_has_a_case_firing_and_a_case_quiet() -> None:
    cases: list[dict[str, Any]] = yaml.safe_load(CASES.read_text())["tests"]
    checks = [check for case in cases for check in case["alert_rule_test"]]
    fires = {c["alertname"] for c in checks if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in checks if not c.get("exp_alerts")}
    assert fires == _alerts(), f"no firing case for {sorted(_alerts() - fires)}"
    assert quiet == _alerts(), f"no quiet case for {sorted(_alerts() - quiet)}"
