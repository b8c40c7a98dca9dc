"""`kubectl-jobrelay`: a console script of the same click group, named as kubectl shows it."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from jobrelay.cli import main as main_module

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_pyproject_declares_both_console_scripts() -> None:
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    assert scripts["jobrelay"] == "jobrelay.cli.main:main"
    assert scripts["kubectl-jobrelay"] == "jobrelay.cli.main:plugin_main"


def test_the_plugin_is_the_same_group_named_kubectl_jobrelay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["kubectl-jobrelay", "--help"])
    with pytest.raises(SystemExit) as exited:
        main_module.plugin_main()
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: kubectl jobrelay [OPTIONS] COMMAND [ARGS]...")
    for verb in ("get", "describe", "top", "clusters", "jobs"):
        assert f"  {verb} " in out
