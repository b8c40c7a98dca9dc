"""Fixtures for the local fleet's unit tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.unit.localfleet.fakes import (
    VERSIONS,
    FakeBinaries,
    jobset_module_info,
    write_fake_go,
    write_fake_manifests,
    write_go_binary,
    write_script,
)


@pytest.fixture(autouse=True)
def no_port_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ports as a user without JOBRELAY_FLEET_PORTS has them (the e2e suite sets it per
    test process); the tests of that setting set it themselves."""
    monkeypatch.delenv("JOBRELAY_FLEET_PORTS", raising=False)


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``go`` first on PATH, reading the module information of fake Go binaries."""
    go = write_fake_go(tmp_path / "fakego")
    monkeypatch.setenv("PATH", f"{go.parent}:{os.environ.get('PATH', '')}")
    return go


@pytest.fixture
def fake_binaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_go: Path) -> FakeBinaries:
    """Point JOBRELAY_K8S_BIN_DIR, JOBRELAY_ETCD_BINARY, JOBRELAY_KWOK_BINARY and
    JOBRELAY_JOBSET_BINARY at fakes (the JobSet one with its manifests beside it), with
    the fake ``go`` on PATH to read the JobSet one's module information.

    Call it with ``component=version`` (underscores for dashes) to fake another
    version, ``component=None`` to leave that binary out, and
    ``run={component: shell}`` for what a component does when started.
    """

    def make(run: dict[str, str] | None = None, **overrides: str | None) -> Path:
        directory = tmp_path / "fakebin"
        versions = {**VERSIONS, **{k.replace("_", "-"): v for k, v in overrides.items()}}
        for name, version in versions.items():
            when_run = (run or {}).get(name, "exit 1")
            if version is None:
                continue
            if name == "jobset-controller":
                write_go_binary(directory / name, jobset_module_info(version), when_run=when_run)
            else:
                write_script(directory / name, version, when_run=when_run)
        write_fake_manifests(directory)
        monkeypatch.setenv("JOBRELAY_K8S_BIN_DIR", str(directory))
        monkeypatch.setenv("JOBRELAY_ETCD_BINARY", str(directory / "etcd"))
        monkeypatch.setenv("JOBRELAY_KWOK_BINARY", str(directory / "kwok"))
        monkeypatch.setenv("JOBRELAY_JOBSET_BINARY", str(directory / "jobset-controller"))
        return directory

    return make
