"""`jobrelay fleet build`: everything (`make test`), or only what a fleet runs (`make demo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobrelay.cli import fleet
from jobrelay.localfleet.binaries import resolver


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    called: list[str] = []

    def binaries(*_args: Any, **_kwargs: Any) -> Any:
        called.append("fleet")
        return resolver.Binaries(*(Path(f"/cache/{n}") for n in range(7)))

    def tools(*_args: Any, **_kwargs: Any) -> Any:
        called.append("tools")
        return resolver.Tools(*(Path(f"/cache/tool{n}") for n in range(7)))

    monkeypatch.setattr(fleet.resolver, "resolve", binaries)
    monkeypatch.setattr(fleet.resolver, "resolve_tools", tools)
    return called


def test_build_builds_the_fleet_and_the_tests_tools(resolved: list[str]) -> None:
    result = CliRunner().invoke(fleet.fleet, ["build"])
    assert result.exit_code == 0, result.output
    assert resolved == ["fleet", "tools"]
    assert "promtool" in result.output and "kube_apiserver" in result.output


def test_fleet_only_leaves_the_tests_tools_to_make_test(resolved: list[str]) -> None:
    result = CliRunner().invoke(fleet.fleet, ["build", "--fleet-only"])
    assert result.exit_code == 0, result.output
    assert resolved == ["fleet"]
    assert "promtool" not in result.output and "helm" not in result.output


def test_make_demo_builds_only_the_fleet_and_make_test_everything() -> None:
    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text()
    demo = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "fleet build --fleet-only" in demo and " build" not in demo.splitlines()[0]
    assert "\ntest: build\n" in makefile
    assert "\nbuild: deps\n\t$(PYTHON) -m jobrelay fleet build\n" in makefile
