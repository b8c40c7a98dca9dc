"""`clusters add` and `install` never write a CRD (issue 35): whoever owns jobrelay's CRDs
(the chart, GitOps, an admin) installs them. With one missing, each verb fails in one line
saying how to install it, before it writes anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from tests.unit.cli.fakes import FakeApiserver

from jobrelay import run_command
from jobrelay.cli import clusters_add
from jobrelay.fleet import workerclusters

SERVED = {"jobrelay.dev/v1alpha1": [{"name": "workerclusters"}, {"name": "relayqueues"}]}
MISSING = (
    "error: the management cluster has no WorkerCluster CRD (workerclusters.jobrelay.dev): "
    "install jobrelay's CRDs with its chart (crds.install, the default) or "
    "`kubectl apply --server-side -f charts/jobrelay/files/crds/`\n"
)


@pytest.fixture
def worker_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "worker"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    return path


def _crd_requests(fake: FakeApiserver) -> list[Any]:
    return [r for r in fake.requests if "customresourcedefinitions" in r[1]]


@pytest.mark.parametrize("served", [False, True], ids=["crds-missing", "crds-served"])
def test_clusters_add_checks_the_crds_and_never_writes_one(
    monkeypatch: pytest.MonkeyPatch, worker_kubeconfig: Path, served: bool
) -> None:
    manager = FakeApiserver("manager", served=SERVED if served else {})
    monkeypatch.setattr(clusters_add, "manager_client", lambda *_args: manager.client())
    registered: list[str] = []

    async def register(_client: Any, name: str, *_args: Any, **_kwargs: Any) -> None:
        registered.append(name)

    monkeypatch.setattr(workerclusters, "register", register)
    result = CliRunner().invoke(
        clusters_add.add, ["w1", "--worker-kubeconfig", str(worker_kubeconfig)]
    )
    assert not _crd_requests(manager)
    if served:
        assert result.exit_code == 0, result.output
        assert registered == ["w1"]
    else:
        assert (result.exit_code, result.stderr) == (1, MISSING)
        assert not registered and not manager.writes()


def test_install_creates_no_crd_and_says_how_when_one_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = FakeApiserver("manager")
    monkeypatch.setattr(run_command, "manager_client", lambda *_args: manager.client())
    result = CliRunner().invoke(run_command.install, [])
    assert (result.exit_code, result.stderr) == (1, MISSING)
    assert not manager.writes()
