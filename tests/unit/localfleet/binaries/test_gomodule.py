"""A binary's Go module information, as `go version -m` shows it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import jobset_module_info, write_go_binary, write_script

from jobrelay.localfleet.binaries import gomodule

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="needs Go on PATH")


@needs_go
def test_module_info_of_files_that_are_not_go_binaries(tmp_path: Path) -> None:
    assert gomodule.module_info(write_script(tmp_path / "sh", "x")) == ""
    (tmp_path / "empty").write_bytes(b"")
    assert gomodule.module_info(tmp_path / "empty") == ""
    assert gomodule.module_info(tmp_path / "missing") == ""


def test_module_info_is_what_go_version_m_shows_without_its_indentation(
    fake_go: Path, tmp_path: Path
) -> None:
    info = jobset_module_info("v0.11.0")
    assert gomodule.module_info(write_go_binary(tmp_path / "jobset", info)) == info
    assert gomodule.module_info(write_script(tmp_path / "sh", "x")) == ""
    assert gomodule.module_info(tmp_path) == ""  # never a walk through a directory


def test_without_go_the_module_information_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    binary = write_go_binary(tmp_path / "jobset", jobset_module_info("v0.11.0"))
    assert gomodule.module_info(binary) is None


def test_the_go_directive_of_a_go_mod() -> None:
    assert gomodule.go_directive("module x\n\ngo 1.24.3\n\nrequire y v1\n") == "1.24.3"
    assert gomodule.go_directive("module x\n") == "1.25.0"
