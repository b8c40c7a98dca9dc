"""uvloop only where it installs (issue 35): pyproject's marker leaves it out on Windows, and
`jobrelay run` then runs on asyncio's own loop."""

from __future__ import annotations

import asyncio
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from jobrelay import run_command

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_uvloop_is_required_only_where_it_installs() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (uvloop,) = [Requirement(d) for d in dependencies if Requirement(d).name == "uvloop"]
    assert uvloop.marker is not None
    assert not uvloop.marker.evaluate({"sys_platform": "win32"})
    assert uvloop.marker.evaluate({"sys_platform": "linux"})
    assert uvloop.marker.evaluate({"sys_platform": "darwin"})


def test_run_uses_uvloop_when_installed_else_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    assert run_command.event_loop_runner() is uvloop.run
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on Windows: the import fails
    runner = run_command.event_loop_runner()
    assert runner is asyncio.run

    async def answer() -> None:
        await asyncio.sleep(0)

    runner(answer())
