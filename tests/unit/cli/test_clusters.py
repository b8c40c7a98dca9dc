"""`jobrelay clusters cordon|uncordon|drain|remove|list` against an in-memory manager and worker:
what each verb writes, what it refuses, and what it tells the user to do next."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from tests.unit.cli.fakes import WORKER_CLUSTERS_PATH, FakeApiserver, worker_cluster

from jobrelay.cli import clusters as clusters_cli
from jobrelay.fleet import maintenance

SECRETS_PATH = "v1/secrets"
JOBS_PATH = "batch/v1/jobs"
NAMESPACE = "jobrelay-system"
MANAGER_UID = "5f2d9c1e-0000-4000-8000-00000000cafe"
OURS = {"jobrelay.dev/mirror": "jobrelay.dev.relay", "jobrelay.dev/origin": MANAGER_UID}


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver("manager")
    fake.put("v1/namespaces", {"metadata": {"name": "kube-system", "uid": MANAGER_UID}})
    monkeypatch.setattr(clusters_cli, "manager_client", lambda *_args: fake.client())
    # Retries of a broken watch come at once: the tests wait on nothing real.
    monkeypatch.setattr(maintenance, "_RETRY_INITIAL", 0.001)
    return fake


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> FakeApiserver:
    fake = FakeApiserver(
        "w1",
        served={
            "batch/v1": [
                {"name": "jobs", "kind": "Job", "namespaced": True},
                {"name": "jobs/status", "kind": "Job", "namespaced": True},
            ]
        },
    )

    def connect(kubeconfig: Any, context: str | None, name: str) -> Any:
        fake.connections.append((kubeconfig, context, name))
        return fake.client()

    monkeypatch.setattr(clusters_cli, "worker_connector", connect)
    return fake


def register(manager: FakeApiserver, name: str = "w1", **status: Any) -> None:
    """A WorkerCluster and its kubeconfig Secret, as `clusters add` leaves them."""
    manager.put(WORKER_CLUSTERS_PATH, worker_cluster(name, **status))
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        "current-context": "c",
    }
    manager.put(
        SECRETS_PATH,
        {
            "metadata": {"name": f"worker-{name}-kubeconfig", "namespace": NAMESPACE},
            "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()},
        },
    )


def mirror(worker: FakeApiserver, name: str, namespace: str = "team-a", **labels: str) -> None:
    worker.put(JOBS_PATH, {"metadata": {"name": name, "namespace": namespace, "labels": labels}})


def invoke(*args: str) -> Result:
    return CliRunner().invoke(clusters_cli.clusters, list(args))


def spec(manager: FakeApiserver, name: str = "w1") -> dict[str, Any]:
    obj = manager.worker_cluster(name)
    assert obj is not None
    spec: dict[str, Any] = obj["spec"]
    return spec


def patches(manager: FakeApiserver) -> list[Any]:
    return [body for method, _, body in manager.writes() if method == "PATCH"]


# -- cordon / uncordon --------------------------------------------------------------------


def test_cordon_sets_cordoned_and_says_how_to_undo(manager: FakeApiserver) -> None:
    register(manager, active=2)
    result = invoke("cordon", "w1")
    assert result.exit_code == 0, result.output
    assert spec(manager)["cordoned"] is True
    assert "worker cluster w1 cordoned: no new workloads are placed on it" in result.output
    assert "`jobrelay clusters uncordon w1` undoes this" in result.output


def test_cordon_twice_writes_nothing_the_second_time(manager: FakeApiserver) -> None:
    register(manager, cordoned=True, drain="NotStarted")
    result = invoke("cordon", "w1")
    assert result.exit_code == 0, result.output
    assert patches(manager) == []
    assert result.output == (
        "worker cluster w1 was already cordoned and draining (NotStarted): nothing changed\n"
    )


@pytest.mark.parametrize("verb", ["cordon", "uncordon", "drain", "remove"])
def test_every_verb_on_an_unknown_worker_says_how_to_list_them(
    manager: FakeApiserver, verb: str
) -> None:
    result = invoke(verb, "nope")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: no worker cluster named nope (`jobrelay clusters list` shows those registered)\n"
    )


def test_a_missing_crd_says_to_install_it(manager: FakeApiserver) -> None:
    manager.crd_served = False
    result = invoke("cordon", "w1")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: the management cluster has no WorkerCluster CRD (workerclusters.jobrelay.dev): "
        "install jobrelay's CRDs with its chart (crds.install, the default) or "
        "`kubectl apply --server-side -f charts/jobrelay/files/crds/`\n"
    )


def test_uncordon_clears_cordon_and_drain(manager: FakeApiserver) -> None:
    register(manager, active=1, cordoned=True, drain="All")
    result = invoke("uncordon", "w1")
    assert result.exit_code == 0, result.output
    assert spec(manager)["cordoned"] is False
    assert "drain" not in spec(manager)
    assert "uncordoned and its drain (All) cancelled" in result.output
    assert "those already moved elsewhere stay where they are" in result.output


def test_uncordon_of_a_schedulable_worker_writes_nothing(manager: FakeApiserver) -> None:
    register(manager, active=0)
    result = invoke("uncordon", "w1")
    assert result.exit_code == 0, result.output
    assert patches(manager) == []
    assert result.output == "worker cluster w1 was not cordoned: nothing changed\n"


# -- drain ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "before", "mode"),
    [
        ((), None, "NotStarted"),
        (("--force",), None, "All"),
        (("--force",), "NotStarted", "All"),
        ((), "All", "All"),  # re-running without --force to wait never weakens the drain
    ],
)
def test_drain_cordons_and_sets_the_mode(
    manager: FakeApiserver, flags: tuple[str, ...], before: str | None, mode: str
) -> None:
    register(manager, active=3, drain=before, cordoned=before is not None)
    result = invoke("drain", "w1", "--no-wait", *flags)
    assert result.exit_code == 0, result.output
    assert (spec(manager)["cordoned"], spec(manager)["drain"]) == (True, mode)
    assert f"draining ({mode}" in result.output
    assert "not waiting: `jobrelay clusters list` shows its unfinished mirrors" in result.output


def test_drain_waits_and_prints_each_new_count(manager: FakeApiserver) -> None:
    register(manager, active=2)
    manager.controller.extend(
        [
            {"status": {"activeMirrors": 2}},  # unchanged: printed once
            {"status": {"activeMirrors": 1}},
            {"status": {"activeMirrors": 0}},
        ]
    )
    result = invoke("drain", "w1")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "worker cluster w1 cordoned and draining (NotStarted): workloads whose mirror has not "
        "started move to other workers; running ones finish here",
        "worker cluster w1: 2 unfinished mirrors left",
        "worker cluster w1: 1 unfinished mirror left",
        "worker cluster w1 is drained: no unfinished mirrors remain",
        "`jobrelay clusters remove w1` removes it",
    ]


def test_drain_timeout_exits_1_and_leaves_the_drain_in_place(manager: FakeApiserver) -> None:
    register(manager, active=2)
    result = invoke("drain", "w1", "--timeout", "0.05")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: worker cluster w1 still has 2 unfinished mirrors after 0.05s; the drain "
        "(NotStarted) stays in place and the controller carries on: run `jobrelay clusters "
        "drain w1` to wait again, `jobrelay clusters drain w1 --force` to move running "
        "workloads too, or `jobrelay clusters uncordon w1` to cancel it\n"
    )
    assert spec(manager)["drain"] == "NotStarted"


def test_drain_of_a_disconnected_worker_says_the_count_is_old(manager: FakeApiserver) -> None:
    register(manager, active=2, connected="False")
    manager.worker_cluster("w1")["status"]["conditions"][0]["reason"] = "Timeout"  # type: ignore[index]
    result = invoke("drain", "w1", "--timeout", "0.05")
    assert result.exit_code == 1
    assert (
        "worker cluster w1: 2 unfinished mirrors left (not connected: Timeout; "
        "the count is from its last contact)"
    ) in result.stdout


def test_drain_without_a_controller_says_so(manager: FakeApiserver) -> None:
    register(manager)  # no status at all
    result = invoke("drain", "w1", "--timeout", "0")
    assert result.exit_code == 1
    assert "no status.activeMirrors: is `jobrelay run` running?" in result.stderr


def test_drain_waits_for_the_controller_to_see_the_new_generation(
    manager: FakeApiserver,
) -> None:
    register(manager, active=0)
    manager.worker_cluster("w1")["status"]["observedGeneration"] = 1  # type: ignore[index]
    manager.controller.append({"status": {"observedGeneration": 2}})
    result = invoke("drain", "w1")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:3] == [
        "worker cluster w1: waiting for the controller to see the drain",
        "worker cluster w1 is drained: no unfinished mirrors remain",
    ]


@pytest.mark.parametrize("mishap", ["break", "gone"])
def test_drain_survives_a_broken_or_expired_watch(manager: FakeApiserver, mishap: str) -> None:
    register(manager, active=1)
    manager.watch_mishaps.append(mishap)
    manager.controller.extend([{"status": {"activeMirrors": 1}}, {"status": {"activeMirrors": 0}}])
    result = invoke("drain", "w1")
    assert result.exit_code == 0, result.output
    assert "is drained" in result.stdout
    if mishap == "break":
        assert "cannot watch worker cluster w1" in result.stderr
        assert "retrying in" in result.stderr


def test_drain_of_a_worker_deleted_meanwhile_fails_clearly(manager: FakeApiserver) -> None:
    register(manager, active=1)
    manager.watch_mishaps.append("delete")
    result = invoke("drain", "w1")
    assert result.exit_code == 1
    assert result.stderr == "error: worker cluster w1 was deleted while draining\n"


def test_ctrl_c_while_draining_leaves_the_drain_and_says_so(manager: FakeApiserver) -> None:
    register(manager, active=1)
    manager.watch_mishaps.append("interrupt")
    result = invoke("drain", "w1", "--force")
    assert result.exit_code == 130
    assert result.stderr == (
        "interrupted: worker cluster w1 stays cordoned and draining (All) and the controller "
        "carries on; `jobrelay clusters drain w1` waits again, `jobrelay clusters uncordon w1` "
        "cancels the drain\n"
    )
    assert spec(manager)["drain"] == "All"


def test_drain_on_an_old_crd_says_to_update_it(manager: FakeApiserver) -> None:
    register(manager, active=1)
    manager.pruned_spec_fields.add("drain")
    result = invoke("drain", "w1")
    assert result.exit_code == 1
    assert "predates spec.drain" in result.stderr
    assert "`helm upgrade` of the chart" in result.stderr


# -- remove ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"active": 2}, "worker cluster w1 has 2 unfinished mirrors: run `jobrelay clusters drain w1`"),
        ({}, "the controller never reported them (no status.activeMirrors)"),
        ({"active": 1, "drain": "NotStarted", "cordoned": True},
         "is draining (NotStarted) but still has 1 unfinished mirror: wait with `jobrelay clusters drain w1`"),
        ({"active": 1, "lost": "2026-01-01T00:00:00Z"},
         "was declared lost at 2026-01-01T00:00:00Z"),
    ],
)  # fmt: skip
def test_remove_refuses_while_mirrors_may_be_unfinished(
    manager: FakeApiserver, worker: FakeApiserver, status: dict[str, Any], expected: str
) -> None:
    register(manager, **status)
    mirror(worker, "job-1", **OURS)
    result = invoke("remove", "w1")
    assert result.exit_code == 1
    assert expected in result.stderr
    assert "--force" in result.stderr
    assert manager.writes() == [] and worker.writes() == []
    assert manager.worker_cluster("w1") is not None


@pytest.mark.parametrize("drain", [None, "NotStarted", "All"])
def test_remove_deletes_our_mirrors_then_the_worker(
    manager: FakeApiserver, worker: FakeApiserver, drain: str | None
) -> None:
    register(manager, active=0, drain=drain, cordoned=drain is not None)
    mirror(worker, "done-1", **OURS)
    mirror(worker, "done-2", namespace="team-b", **OURS)
    mirror(worker, "theirs", **{**OURS, "jobrelay.dev/mirror": "example.com.relay"})
    # Another management cluster shares the worker, with a controller of the same name.
    mirror(worker, "other-manager", **{**OURS, "jobrelay.dev/origin": "other-uid"})
    mirror(worker, "plain")
    result = invoke("remove", "w1")
    assert result.exit_code == 0, result.output
    assert sorted(name for _, _, name in worker.objects) == ["other-manager", "plain", "theirs"]
    assert manager.worker_cluster("w1") is None
    assert manager.get(SECRETS_PATH, "worker-w1-kubeconfig", NAMESPACE) is None
    assert result.stdout.splitlines()[1:] == [
        "worker cluster w1: deleted 2 Job.v1.batch mirror(s)",
        f"removed worker cluster w1 (its WorkerCluster and Secret {NAMESPACE}/worker-w1-kubeconfig)",
    ]
    # A worker not yet cordoned is cordoned first: nothing new lands while it is cleaned.
    if drain is None:
        assert patches(manager)[0] == {"spec": {"cordoned": True}}


@pytest.mark.parametrize(
    ("status_origin", "flag", "deleted"),
    [("from-status", [], "from-status"), ("from-status", ["--origin", "from-flag"], "from-flag")],
)
def test_remove_deletes_the_mirrors_of_the_controllers_origin(
    manager: FakeApiserver,
    worker: FakeApiserver,
    status_origin: str,
    flag: list[str],
    deleted: str,
) -> None:
    """The controller publishes its origin on the WorkerCluster; --origin overrides it."""
    register(manager, active=0, origin=status_origin)
    for origin in ("from-status", "from-flag", MANAGER_UID):
        mirror(worker, origin, **{**OURS, "jobrelay.dev/origin": origin})
    result = invoke("remove", "w1", *flag)
    assert result.exit_code == 0, result.output
    assert deleted not in {name for _, _, name in worker.objects}
    assert len(worker.objects) == 2


def test_remove_refuses_an_origin_that_is_not_a_label_value() -> None:
    result = invoke("remove", "w1", "--origin", "not a label/value")
    assert result.exit_code == 2
    assert "is not a label value" in result.output


def test_remove_reaches_the_worker_with_its_secret(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=0)
    assert invoke("remove", "w1").exit_code == 0
    ((kubeconfig, context, name),) = worker.connections
    assert (kubeconfig["current-context"], context, name) == ("c", None, "w1")


def test_remove_of_an_unreachable_worker_is_refused_without_force(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=0)
    worker.unreachable = True
    result = invoke("remove", "w1")
    assert result.exit_code == 1
    assert "cannot delete its mirrors (Unreachable: cannot connect" in result.stderr
    assert "nothing was removed and it stays cordoned" in result.stderr
    assert "`jobrelay clusters remove w1 --force` to remove it anyway" in result.stderr
    assert (
        "kubectl --kubeconfig WORKER-KUBECONFIG delete Job.v1.batch --all-namespaces "
        "-l jobrelay.dev/mirror=jobrelay.dev.relay"
    ) in result.stderr
    assert manager.worker_cluster("w1") is not None
    assert spec(manager)["cordoned"] is True


def test_remove_force_of_an_unreachable_worker_removes_it_and_says_what_may_remain(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=0)
    worker.unreachable = True
    result = invoke("remove", "w1", "--force", "--kind", "Job.v1.batch",
                    "--kind", "JobSet.v1alpha2.jobset.x-k8s.io")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "so some may remain. Removing it anyway (--force)" in result.stdout
    assert (
        "kubectl --kubeconfig WORKER-KUBECONFIG delete "
        "Job.v1.batch,JobSet.v1alpha2.jobset.x-k8s.io --all-namespaces"
    ) in result.stdout
    assert manager.worker_cluster("w1") is None


def test_remove_with_a_missing_secret_says_so(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=0)
    del manager.objects[(SECRETS_PATH, NAMESPACE, "worker-w1-kubeconfig")]
    result = invoke("remove", "w1")
    assert result.exit_code == 1
    assert (
        "cannot delete its mirrors (InvalidKubeconfig: Secret jobrelay-system/worker-w1-kubeconfig is missing)"
        in result.stderr
    )


def test_remove_force_drains_with_all_waits_then_removes(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=3)
    mirror(worker, "moved-away", **OURS)
    manager.controller.extend([{"status": {"activeMirrors": 1}}, {"status": {"activeMirrors": 0}}])
    result = invoke("remove", "w1", "--force")
    assert result.exit_code == 0, result.output
    assert patches(manager)[0] == {"spec": {"cordoned": True, "drain": "All"}}
    assert result.stdout.splitlines() == [
        "--force: draining worker cluster w1 with All before removing it",
        "worker cluster w1: 3 unfinished mirrors left",
        "worker cluster w1: 1 unfinished mirror left",
        "worker cluster w1 is drained: no unfinished mirrors remain",
        "worker cluster w1: deleted 1 Job.v1.batch mirror(s)",
        f"removed worker cluster w1 (its WorkerCluster and Secret {NAMESPACE}/worker-w1-kubeconfig)",
    ]
    assert worker.objects == {}


def test_remove_force_removes_after_the_timeout_anyway(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=3)
    result = invoke("remove", "w1", "--force", "--timeout", "0.05")
    assert result.exit_code == 0, result.output
    assert (
        "worker cluster w1 still has 3 unfinished mirrors after 0.05s of draining; removing it "
        "anyway (--force)"
    ) in result.stdout
    assert manager.worker_cluster("w1") is None


def test_ctrl_c_during_a_forced_removal_removes_nothing(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=3)
    manager.watch_mishaps.append("interrupt")
    result = invoke("remove", "w1", "--force")
    assert result.exit_code == 130
    assert result.stderr.startswith(
        "interrupted: nothing removed; worker cluster w1 stays cordoned and draining (All)"
    )
    assert "`jobrelay clusters remove w1 --force` resumes" in result.stderr
    assert manager.worker_cluster("w1") is not None


def test_remove_skips_kinds_the_worker_does_not_serve(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=0)
    result = invoke("remove", "w1", "--kind", "JobSet.v1alpha2.jobset.x-k8s.io")
    assert result.exit_code == 0, result.output
    assert (
        "worker cluster w1: no mirrors left to delete (not served there, so none: "
        "JobSet.v1alpha2.jobset.x-k8s.io)"
    ) in result.stdout


def test_remove_with_another_controller_name_deletes_its_mirrors(
    manager: FakeApiserver, worker: FakeApiserver
) -> None:
    register(manager, active=0)
    mirror(worker, "ours", **OURS)
    mirror(worker, "theirs", **{**OURS, "jobrelay.dev/mirror": "example.com.relay"})
    result = invoke("remove", "w1", "--controller-name", "example.com/relay")
    assert result.exit_code == 0, result.output
    assert [name for _, _, name in worker.objects] == ["ours"]


def test_remove_with_a_malformed_kind_is_a_usage_error(manager: FakeApiserver) -> None:
    result = invoke("remove", "w1", "--kind", "jobs")
    assert result.exit_code == 2
    assert "write Kind.version.group" in result.stderr


def test_remove_of_an_unknown_worker_deletes_a_stray_secret(manager: FakeApiserver) -> None:
    register(manager, "w2")
    del manager.objects[(WORKER_CLUSTERS_PATH, "", "w2")]
    result = invoke("remove", "w2")
    assert result.exit_code == 1
    assert "no worker cluster named w2" in result.stderr
    assert manager.get(SECRETS_PATH, "worker-w2-kubeconfig", NAMESPACE) is None


# -- list -------------------------------------------------------------------------------------


def test_list_shows_state_and_unknown_counts(manager: FakeApiserver) -> None:
    register(manager, "a", active=0)
    register(manager, "b", active=2, cordoned=True)
    register(manager, "c", active=1, cordoned=True, drain="All")
    register(manager, "d", active=4, lost="2026-01-01T00:00:00Z", connected="False")
    register(manager, "e")
    manager.worker_cluster("d")["status"]["conditions"][0]["message"] = "cannot connect"  # type: ignore[index]
    manager.worker_cluster("a")["status"]["capacity"] = {  # type: ignore[index]
        "nodes": 4,
        "schedulableNodes": 3,
        "allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4", "pods": "440"},
        "requested": {"cpu": "11500m", "memory": "4Gi", "pods": "7"},
        "reserved": {"cpu": "500m"},
    }
    manager.worker_cluster("b")["status"]["capacity"] = {"allocatable": {"cpu": "lots"}}  # type: ignore[index]
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "NAME  CONNECTED  ACTIVE  STATE          CAPACITY" + " " * 52 + "LABELS / MESSAGE",
        "a     True            0  Schedulable    "
        "nodes 3/4, cpu 12/64, memory 4Gi/256Gi, nvidia.com/gpu 0/4",
        "b     True            2  Cordoned       -",
        "c     True            1  Draining(All)  -",
        "d     False           4  Lost           -"
        + " " * 59
        + "lost since 2026-01-01T00:00:00Z; cannot connect",
        "e     Unknown         -  Schedulable    -",
    ]


# -- errors of the management cluster -----------------------------------------------------------


def test_an_unreachable_manager_says_what_to_check(manager: FakeApiserver) -> None:
    manager.unreachable = True
    result = invoke("cordon", "w1")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot connect to https://manager (connection refused)")
    assert "check --kubeconfig and --context" in result.stderr


def test_a_forbidden_request_names_the_rights_needed(manager: FakeApiserver) -> None:
    register(manager, active=0)
    manager.refuse = (403, "Forbidden")
    result = invoke("drain", "w1", "--no-wait")
    assert result.exit_code == 1
    assert "the management cluster refused the request (403 Forbidden" in result.stderr
    assert (
        "needs to get, list, watch, patch and delete workerclusters.jobrelay.dev" in result.stderr
    )
