"""Where the CLI finds the controller (its namespace, the kinds it runs) without being
told: the pure order, and `clusters add` / `remove` / `version` following it."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.cli.fakes import WORKER_CLUSTERS_PATH, FakeApiserver, worker_cluster

from jobrelay.cli import clusters as clusters_cli
from jobrelay.cli import clusters_add, version
from jobrelay.cli.controller_namespace import (
    DEFAULT_CONTROLLER_NAMESPACE,
    LeaseSighting,
    NamespaceSource,
    choose_controller_namespace,
    kinds_for_verb,
)
from jobrelay.kube.election.election_rules import LeaseFreshness, LeaseState
from jobrelay.vocabulary.names import KINDS_ANNOTATION

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MANAGER_UID = "5f2d9c1e-0000-4000-8000-00000000cafe"
OURS = {"jobrelay.dev/mirror": "jobrelay.dev.relay", "jobrelay.dev/origin": MANAGER_UID}
SECRETS_PATH = "v1/secrets"


def seen(namespace: str, state: LeaseState, minutes_ago: float | None) -> LeaseSighting:
    renewed = None if minutes_ago is None else NOW - timedelta(minutes=minutes_ago)
    return LeaseSighting(namespace, LeaseFreshness(state, "pod", renewed))


FRESH, STALE = LeaseState.FRESH, LeaseState.STALE


@pytest.mark.parametrize(
    ("flag", "env", "sightings", "service", "expected"),
    [
        ("ops", "env-ns", [seen("relay-ops", FRESH, 0)], "svc", ("ops", NamespaceSource.FLAG)),
        (None, "env-ns", [seen("relay-ops", FRESH, 0)], "svc",
         ("env-ns", NamespaceSource.ENVIRONMENT)),
        (None, "  ", [seen("relay-ops", FRESH, 0)], None, ("relay-ops", NamespaceSource.LEASE)),
        # A fresh Lease (a controller leads there now) beats a later-renewed stale one.
        (None, None, [seen("old", STALE, 0), seen("relay-ops", FRESH, 1)], None,
         ("relay-ops", NamespaceSource.LEASE)),
        # Two former installs: the latest renewed; a tie: the first name.
        (None, None, [seen("a", STALE, 9), seen("b", STALE, 2)], None,
         ("b", NamespaceSource.LEASE)),
        (None, None, [seen("z", FRESH, 1), seen("y", FRESH, 1)], None,
         ("y", NamespaceSource.LEASE)),
        (None, None, [seen("never", STALE, None), seen("once", STALE, 60)], None,
         ("once", NamespaceSource.LEASE)),
        (None, None, [], "relay-ops", ("relay-ops", NamespaceSource.API_SERVICE)),
        (None, None, [], None, (DEFAULT_CONTROLLER_NAMESPACE, NamespaceSource.DEFAULT)),
        ("", "", [], "", (DEFAULT_CONTROLLER_NAMESPACE, NamespaceSource.DEFAULT)),
    ],
)  # fmt: skip
def test_the_controllers_namespace_comes_from_the_first_source_that_says(
    flag: str | None,
    env: str | None,
    sightings: list[LeaseSighting],
    service: str | None,
    expected: tuple[str, NamespaceSource],
) -> None:
    assert choose_controller_namespace(flag, env, sightings, service) == expected


names = st.text("abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=20)
sightings = st.lists(
    st.builds(
        seen, names, st.sampled_from([FRESH, STALE]),
        st.one_of(st.none(), st.floats(0, 10_000, allow_nan=False)),
    ),
    max_size=5,
)  # fmt: skip


@given(st.one_of(st.none(), names), st.one_of(st.none(), names), sightings,
       st.one_of(st.none(), names))  # fmt: skip
def test_a_given_namespace_always_wins_and_one_is_always_chosen(
    flag: str | None, env: str | None, found: list[LeaseSighting], service: str | None
) -> None:
    namespace, source = choose_controller_namespace(flag, env, found, service)
    assert namespace
    if flag:
        assert (namespace, source) == (flag, NamespaceSource.FLAG)
    elif env:
        assert (namespace, source) == (env, NamespaceSource.ENVIRONMENT)
    elif found:
        assert namespace in {s.namespace for s in found}
        # The order of the sightings (the apiserver's) never changes the choice.
        assert choose_controller_namespace(None, None, found[::-1], service)[0] == namespace
        if any(s.freshness.state is FRESH for s in found):
            assert any(s.namespace == namespace and s.freshness.state is FRESH for s in found)


REF = "relay-ops/jobrelay-relay"


@pytest.mark.parametrize(
    ("given_kinds", "recorded", "expected", "warned"),
    [
        (("RayJob.v1.ray.io",), ("Job.v1.batch",), ("RayJob.v1.ray.io",), None),
        ((), ("Job.v1.batch", "RayJob.v1.ray.io=kueue.x-k8s.io/multikueue@spec.managedBy",
              "junk", "Job.v1.batch"),
         ("Job.v1.batch", "RayJob.v1.ray.io"), None),
        ((), None, ("Job.v1.batch",), "no jobrelay controller has led this manager"),
        ((), (), ("Job.v1.batch",), "records no kinds (an older jobrelay)"),
        ((), ("junk",), ("Job.v1.batch",), "records no kinds"),
    ],
)  # fmt: skip
def test_a_clusters_verb_takes_its_kinds_from_the_flag_else_the_lease(
    given_kinds: tuple[str, ...],
    recorded: tuple[str, ...] | None,
    expected: tuple[str, ...],
    warned: str | None,
) -> None:
    kinds, warning = kinds_for_verb(given_kinds, recorded, REF, ("Job.v1.batch",))
    assert kinds == expected
    if warned is None:
        assert warning is None
    else:
        assert warning is not None and warned in warning
        assert warning.startswith("warning: ") and "--kind" in warning and REF in warning


# -- the commands -------------------------------------------------------------------------


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    fake.put("v1/namespaces", {"metadata": {"name": "kube-system", "uid": MANAGER_UID}})
    for module in (clusters_cli, clusters_add, version):
        monkeypatch.setattr(module, "manager_client", lambda *_args: fake.client())
    # The CLI only checks that the CRDs are served (and no discovery endpoint is faked).
    monkeypatch.setattr(clusters_add.workerclusters, "check_crds", _nothing)

    async def register(_client: Any, name: str, _stored: Any, **settings: Any) -> None:
        fake.put(SECRETS_PATH, {"metadata": {"name": f"worker-{name}-kubeconfig",
                                             "namespace": settings["namespace"]}})  # fmt: skip

    monkeypatch.setattr(clusters_add.workerclusters, "register", register)
    return fake


async def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


def worker_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "w",
        "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "w", "user": {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
    }))  # fmt: skip
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(clusters_cli.clusters, list(args))


def secret_namespaces(manager: FakeApiserver) -> list[str]:
    return [ns for (path, ns, _), _ in manager.objects.items() if path == SECRETS_PATH]


def test_add_stores_the_secret_where_the_controller_reads_it(
    manager: FakeApiserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = str(worker_kubeconfig(tmp_path))
    manager.lead(namespace="relay-ops")  # the chart installed into relay-ops
    result = run("add", "w1", "--worker-kubeconfig", kubeconfig)
    assert result.exit_code == 0, result.output
    assert secret_namespaces(manager) == ["relay-ops"]
    assert "Secret relay-ops/worker-w1-kubeconfig" in result.stderr
    # -n, then $JOBRELAY_NAMESPACE, come first.
    assert run("add", "w2", "--worker-kubeconfig", kubeconfig, "-n", "flagged").exit_code == 0
    monkeypatch.setenv("JOBRELAY_NAMESPACE", "from-env")
    assert run("add", "w3", "--worker-kubeconfig", kubeconfig).exit_code == 0
    assert sorted(secret_namespaces(manager)) == ["flagged", "from-env", "relay-ops"]


def test_add_without_a_lease_follows_the_apiservice_else_the_default(
    manager: FakeApiserver, tmp_path: Path
) -> None:
    kubeconfig = str(worker_kubeconfig(tmp_path))
    assert run("add", "w1", "--worker-kubeconfig", kubeconfig).exit_code == 0
    manager.put("apiregistration.k8s.io/v1/apiservices", {
        "metadata": {"name": "v1alpha1.api.jobrelay.dev"},
        "spec": {"service": {"namespace": "served-here", "name": "jobrelay-api"}},
    })  # fmt: skip
    assert run("add", "w2", "--worker-kubeconfig", kubeconfig).exit_code == 0
    assert sorted(secret_namespaces(manager)) == [DEFAULT_CONTROLLER_NAMESPACE, "served-here"]


@pytest.fixture
def ray_worker(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("w1", served={
        "batch/v1": [{"name": "jobs", "kind": "Job", "namespaced": True}],
        "ray.io/v1": [{"name": "rayjobs", "kind": "RayJob", "namespaced": True}],
    })  # fmt: skip
    monkeypatch.setattr(clusters_cli, "worker_connector", lambda *_args: fake.client())
    return fake


def register(manager: FakeApiserver, namespace: str) -> None:
    manager.put(WORKER_CLUSTERS_PATH, worker_cluster("w1", active=0))
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k"}}],
    }  # fmt: skip
    data = base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()
    manager.put(SECRETS_PATH, {
        "metadata": {"name": "worker-w1-kubeconfig", "namespace": namespace},
        "data": {"kubeconfig": data},
    })  # fmt: skip


def test_remove_deletes_the_mirrors_of_every_kind_the_leader_records(
    manager: FakeApiserver, ray_worker: FakeApiserver
) -> None:
    manager.lead(namespace="relay-ops",
                 annotations={KINDS_ANNOTATION: "Job.v1.batch,RayJob.v1.ray.io"})  # fmt: skip
    register(manager, "relay-ops")
    ray_worker.put("batch/v1/jobs", {"metadata": {"name": "j", "namespace": "t", "labels": OURS}})
    ray_worker.put("ray.io/v1/rayjobs",
                   {"metadata": {"name": "r", "namespace": "t", "labels": OURS}})  # fmt: skip
    result = run("remove", "w1")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert ray_worker.objects == {}
    assert "worker cluster w1: deleted 1 Job.v1.batch, 1 RayJob.v1.ray.io mirror(s)" in (
        result.stdout
    )
    assert secret_namespaces(manager) == []
    assert "Secret relay-ops/worker-w1-kubeconfig" in result.stdout


def test_remove_with_no_controller_ever_says_which_kinds_it_assumed(
    manager: FakeApiserver, ray_worker: FakeApiserver
) -> None:
    register(manager, DEFAULT_CONTROLLER_NAMESPACE)
    ray_worker.put("ray.io/v1/rayjobs",
                   {"metadata": {"name": "r", "namespace": "t", "labels": OURS}})  # fmt: skip
    result = run("remove", "w1")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(
        "warning: no jobrelay controller has led this manager (no readable Lease "
        "jobrelay-system/jobrelay-relay), so the kinds it runs are unknown: using --kind "
        "Job.v1.batch"
    )
    assert list(ray_worker.objects) == [("ray.io/v1/rayjobs", "t", "r")]  # not its kind


def test_version_reads_the_lease_where_the_controller_runs(manager: FakeApiserver) -> None:
    manager.lead(namespace="relay-ops", annotations={"jobrelay.dev/version": "9.9.9"})
    result = CliRunner().invoke(version.version, [])
    assert result.exit_code == 0, result.output
    assert "Server Version: 9.9.9 (leader pod-a, Lease relay-ops/jobrelay-relay)" in result.stdout
    short = CliRunner().invoke(version.version, ["-n", "elsewhere"])
    assert short.exit_code == 1 and "no Lease elsewhere/jobrelay-relay" in short.output
