"""One line on stderr for a bad flag and for an unexpected error (the table over every
verb and bad kubeconfig is tests/integration/cli/test_one_line_errors.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"


def run(argv: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), **environment}
    return subprocess.run(
        [sys.executable, "-m", "jobrelay", *argv], env=env, capture_output=True, text=True,
        timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_bad_log_level_is_one_line() -> None:
    finished = run(["run", "--log-level", "loud"], {"KUBECONFIG": "/nonexistent"})
    assert finished.returncode == 2
    assert finished.stderr.count("\n") == 1, finished.stderr
    assert "'loud' is not one of" in finished.stderr
    assert "--help" in finished.stderr


def test_an_unexpected_error_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import click

    from jobrelay.cli import main

    def broken() -> None:
        raise RuntimeError("something odd")

    monkeypatch.setattr(main, "cli", click.command()(broken))
    with pytest.raises(SystemExit) as exited:
        main._main(args=[])
    assert exited.value.code == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1, said
    assert "RuntimeError: something odd (unexpected, a bug in jobrelay" in said
