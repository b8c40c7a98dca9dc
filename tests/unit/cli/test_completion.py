"""Shell completion (click's own, `_JOBRELAY_COMPLETE=bash_source jobrelay`): verbs, resource
types, and names and namespaces read from the manager."""

from __future__ import annotations

import pytest
from click.shell_completion import ShellComplete
from tests.unit.cli.fakes import FakeApiserver

from jobrelay.cli import common
from jobrelay.cli import get as get_cli
from jobrelay.cli.main import cli


def complete(args: list[str], incomplete: str) -> list[str]:
    completer = ShellComplete(cli, {}, "jobrelay", "_JOBRELAY_COMPLETE")
    return [item.value for item in completer.get_completions(args, incomplete)]


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    for module in (common, get_cli):
        monkeypatch.setattr(module, "manager_client", lambda *_args: fake.client())
    for name in ("hello", "help-me", "other"):
        fake.put("batch/v1/jobs", {"metadata": {"name": name, "namespace": "team-a"},
                                   "spec": {"managedBy": "jobrelay.dev/relay"}})  # fmt: skip
    for name in ("team-a", "team-b", "kube-system"):
        fake.put("v1/namespaces", {"metadata": {"name": name}})
    return fake


def test_verbs_and_types() -> None:
    assert {"get", "describe", "top", "clusters", "jobs"} <= set(complete([], ""))
    assert complete(["get"], "job") == ["jobs", "jobsets"]


def test_names_of_managed_jobs_in_the_namespace(manager: FakeApiserver) -> None:
    assert complete(["get", "jobs", "-n", "team-a"], "hel") == ["hello", "help-me"]
    assert complete(["describe", "job", "-n", "team-a"], "o") == ["other"]


def test_namespaces(manager: FakeApiserver) -> None:
    assert complete(["get", "-n"], "team") == ["team-a", "team-b"]


def test_an_unreachable_manager_completes_nothing(manager: FakeApiserver) -> None:
    manager.unreachable = True
    assert complete(["get", "jobs", "-n", "team-a"], "hel") == []
