"""promtool: found in the cache, named by JOBRELAY_PROMTOOL_BINARY, or a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrelay.localfleet.binaries import BinaryError
from jobrelay.localfleet.binaries.promtool_binary import promtool


def _script(path: Path, says: str) -> Path:
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    path.chmod(0o755)
    return path


def test_missing_and_not_to_be_built_says_how_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("JOBRELAY_PROMTOOL_BINARY", raising=False)
    with pytest.raises(BinaryError, match="jobrelay fleet build"):
        promtool(print, build=False)


def test_a_cached_build_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBRELAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("JOBRELAY_PROMTOOL_BINARY", raising=False)
    directory = tmp_path / "bin" / "promtool-v0.316.0"
    directory.mkdir(parents=True)
    binary = _script(directory / "promtool", "promtool, version 3.16.0")
    assert promtool(print, build=False) == binary


def test_an_explicit_binary_must_be_promtool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _script(tmp_path / "promtool", "promtool, version 3.16.0 (branch: HEAD)")
    monkeypatch.setenv("JOBRELAY_PROMTOOL_BINARY", str(good))
    assert promtool(print, build=False) == good
    bad = _script(tmp_path / "other", "helm v3.22.0")
    monkeypatch.setenv("JOBRELAY_PROMTOOL_BINARY", str(bad))
    with pytest.raises(BinaryError, match="not promtool"):
        promtool(print, build=False)
