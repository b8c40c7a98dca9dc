"""Fixtures for the local fleet's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import VERSIONS, FakeBinaries, write_script


@pytest.fixture
def fake_binaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBinaries:
    """Point JOBRELAY_K8S_BIN_DIR, JOBRELAY_ETCD_BINARY and JOBRELAY_KWOK_BINARY at fakes.

    Call it with ``component=version`` (underscores for dashes) to fake another
    version, ``component=None`` to leave that binary out, and
    ``run={component: shell}`` for what a component does when started.
    """

    def make(run: dict[str, str] | None = None, **overrides: str | None) -> Path:
        directory = tmp_path / "fakebin"
        versions = {**VERSIONS, **{k.replace("_", "-"): v for k, v in overrides.items()}}
        for name, version in versions.items():
            if version is not None:
                write_script(directory / name, version, when_run=(run or {}).get(name, "exit 1"))
        monkeypatch.setenv("JOBRELAY_K8S_BIN_DIR", str(directory))
        monkeypatch.setenv("JOBRELAY_ETCD_BINARY", str(directory / "etcd"))
        monkeypatch.setenv("JOBRELAY_KWOK_BINARY", str(directory / "kwok"))
        return directory

    return make
