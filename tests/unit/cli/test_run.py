"""`jobrelay run`: every flag reaches the controller's options, defaults come from options.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from click.testing import CliRunner

from jobrelay import run_command
from jobrelay.controller.options import ControllerOptions, LeaderElectionSettings
from jobrelay.kube.client import ApiClient
from jobrelay.kube.election.elector import LeadershipLost


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[ControllerOptions]:
    """The options `jobrelay run` would start the controller with (nothing is started)."""
    seen: list[ControllerOptions] = []

    async def fake_run(
        manager: Any,
        options: ControllerOptions,
        *,
        election_client: Any = None,
        review_client: Any = None,
    ) -> None:
        seen.append(options)
        # Leader election gets a client of its own; without it, none.
        assert (election_client is not None) == options.leader_election.enabled
        assert election_client is not manager
        # So do the API's SubjectAccessReviews, when it serves.
        assert (review_client is not None) == bool(options.api.address)
        assert review_client is None or review_client not in (manager, election_client)
        await manager.aclose()
        for client in (election_client, review_client):
            if client is not None:
                await client.aclose()

    monkeypatch.setattr(run_command.runner, "run", fake_run)
    monkeypatch.setattr(run_command, "setup_logging", lambda *_args: None)
    return seen


def _invoke(*args: str, kubeconfig: str) -> Any:
    return CliRunner().invoke(run_command.run, ["--kubeconfig", kubeconfig, *args])


def _kubeconfig_file(tmp_path: Any, server: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return str(path)


@pytest.fixture
def kubeconfig(tmp_path: Any) -> str:
    """A manager on loopback, as the local fleet's."""
    return _kubeconfig_file(tmp_path, "https://127.0.0.1:1", "kubeconfig")


@pytest.fixture
def remote_kubeconfig(tmp_path: Any) -> str:
    """A manager elsewhere (an in-cluster controller's, a cloud's)."""
    return _kubeconfig_file(tmp_path, "https://10.96.0.1:443", "remote.kubeconfig")


def test_without_flags_the_options_are_the_defaults(
    captured: list[ControllerOptions], remote_kubeconfig: str
) -> None:
    result = _invoke(kubeconfig=remote_kubeconfig)
    assert result.exit_code == 0, result.output
    assert captured == [ControllerOptions()]


def test_without_flags_a_loopback_manager_gets_the_api_served_and_registered(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    # The README's first hour: a plain `jobrelay run` on the local fleet serves
    # `jobrelay logs` and the dashboard (--api-register auto).
    result = _invoke(kubeconfig=kubeconfig)
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert (options.api.address, options.api.register) == ("127.0.0.1:0", True)
    assert dataclasses.replace(options, api=ControllerOptions().api) == ControllerOptions()


@pytest.mark.parametrize(
    ("args", "loopback", "served"),
    [
        # The explicit forms `make demo` and the tests write keep working.
        (["--api-address", "127.0.0.1:0", "--api-register"], True, ("127.0.0.1:0", True)),
        (["--api-register", "--api-address", "127.0.0.1:0"], False, ("127.0.0.1:0", True)),
        (["--api-address", ":8443", "--api-register=always"], False, (":8443", True)),
        (["--api-address", ":8443", "--api-register", "auto"], False, (":8443", False)),
        (["--api-address", ":8443"], True, (":8443", True)),
        (["--api-register", "never"], True, ("", False)),
        (["--api-address", ":8443", "--api-register", "never"], True, (":8443", False)),
        # Registering needs something served: as before, nothing without an address.
        (["--api-register"], True, ("", False)),
    ],
)  # fmt: skip
def test_api_register_forms(
    captured: list[ControllerOptions],
    kubeconfig: str,
    remote_kubeconfig: str,
    args: list[str],
    loopback: bool,
    served: tuple[str, bool],
) -> None:
    result = _invoke(*args, kubeconfig=kubeconfig if loopback else remote_kubeconfig)
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert (options.api.address, options.api.register) == served


def test_an_unknown_api_register_mode_is_refused(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke("--api-register", "sometimes", kubeconfig=kubeconfig)
    assert result.exit_code == 2
    assert "auto" in result.output and captured == []


def test_every_flag_reaches_its_setting(captured: list[ControllerOptions], kubeconfig: str) -> None:
    result = _invoke(
        "--controller-name", "example.com/relay", "--origin", "east",
        "--kind", "Job.v1.batch", "--kind", "JobSet.v1alpha2.jobset.x-k8s.io",
        "--finished-condition", "Done", "--namespace", "relay",
        "--keep-finished-mirrors", "--no-create-namespaces",
        "--worker-sync-timeout", "5", "--worker-status-interval", "3", "--rejected-retry", "7",
        "--worker-health-timeout", "12",
        "--unplaceable-retry", "9", "--gc-interval", "30", "--concurrency", "4",
        "--retry-base-delay", "0.2", "--retry-max-delay", "8", "--retry-qps", "5",
        "--retry-burst", "10",
        kubeconfig=kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert (options.controller_name, options.origin) == ("example.com/relay", "east")
    assert options.kinds.names == ("Job.v1.batch", "JobSet.v1alpha2.jobset.x-k8s.io")
    assert options.kinds.finished_conditions == ("Done",)
    workers, relay = options.workers, options.relay
    assert (workers.namespace, relay.keep_finished_mirrors, relay.create_namespaces) == (
        "relay",
        True,
        False,
    )
    assert (workers.sync_timeout, workers.status_interval, relay.rejected_retry) == (5, 3, 7)
    assert workers.health_timeout == 12
    assert relay.unplaceable_retry == 9
    queue = options.queue
    assert (options.gc_interval, options.concurrency) == (30, 4)
    assert (queue.retry_base_delay, queue.retry_max_delay) == (0.2, 8)
    assert (queue.retry_qps, queue.retry_burst) == (5, 10)
    # The controller's identity is the pool's and the relay's: one name, one value.
    for part in (workers, relay):
        assert (part.controller_name, part.origin) == ("example.com/relay", "east")


@pytest.mark.parametrize(
    ("args", "seconds"),
    [([], 3600.0), (["--finished-mirror-ttl", "20s"], 20.0), (["--finished-mirror-ttl", "0"], 0.0),
     (["--finished-mirror-ttl=1h30m"], 5400.0)],
)  # fmt: skip
def test_the_finished_mirror_ttl_is_a_go_duration(
    captured: list[ControllerOptions], kubeconfig: str, args: list[str], seconds: float
) -> None:
    result = _invoke(*args, kubeconfig=kubeconfig)
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert options.relay.finished_mirror_ttl == seconds
    assert not options.relay.keep_finished_mirrors


@pytest.mark.parametrize("text", ["20", "-5s", "an hour"])
def test_a_finished_mirror_ttl_that_is_no_duration_is_refused(
    captured: list[ControllerOptions], kubeconfig: str, text: str
) -> None:
    result = _invoke("--finished-mirror-ttl", text, kubeconfig=kubeconfig)
    assert result.exit_code == 2
    assert "--finished-mirror-ttl" in result.output and captured == []


def test_a_badly_written_kind_is_refused_with_the_form_to_use(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke("--kind", "jobset", kubeconfig=kubeconfig)
    assert result.exit_code == 2
    assert "write Kind.version.group" in result.output
    assert captured == []


@pytest.mark.parametrize("origin", ["has spaces", "a/b", "x" * 64, "-leading-dash"])
def test_an_origin_that_is_not_a_label_value_is_refused(
    captured: list[ControllerOptions], kubeconfig: str, origin: str
) -> None:
    result = _invoke("--origin", origin, kubeconfig=kubeconfig)
    assert result.exit_code == 2
    assert "is not a label value" in result.output
    assert captured == []


def test_leader_election_and_health_flags_reach_their_settings(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke(
        "--leader-election-id", "relay-east.example", "--leader-election-lease-duration", "30",
        "--leader-election-renew-deadline", "20", "--leader-election-retry-period", "4",
        "--health-address", "127.0.0.1:0",
        kubeconfig=kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert options.leader_election == LeaderElectionSettings(
        enabled=True,
        lease_name="relay-east.example",
        lease_duration=30,
        renew_deadline=20,
        retry_period=4,
    )
    assert options.lease_name == "relay-east.example"
    assert options.health_address == "127.0.0.1:0"


def test_no_leader_elect_runs_alone(captured: list[ControllerOptions], kubeconfig: str) -> None:
    result = _invoke("--no-leader-elect", kubeconfig=kubeconfig)
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert options.leader_election.enabled is False
    assert options.lease_name == "jobrelay-relay"  # unused, but named all the same


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--leader-election-renew-deadline", "15"), "shorter than the lease duration"),
        (("--leader-election-retry-period", "9"), "shorter than the renew"),
        (("--leader-election-id", "Not_A_Name"), "not a valid Lease name"),
        (("--health-address", "8081"), "is not HOST:PORT"),
        (("--health-address", "localhost:http"), "is not HOST:PORT"),
        (("--metrics-address", "8080"), "is not HOST:PORT"),
    ],
)
def test_unsafe_or_malformed_election_and_health_flags_are_refused(
    captured: list[ControllerOptions], kubeconfig: str, args: tuple[str, ...], message: str
) -> None:
    result = _invoke(*args, kubeconfig=kubeconfig)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert captured == []


def test_unsafe_timings_do_not_matter_without_election(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke(
        "--no-leader-elect", "--leader-election-renew-deadline", "20", kubeconfig=kubeconfig
    )
    assert result.exit_code == 0, result.output


def test_lost_leadership_exits_with_code_1(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: str
) -> None:
    async def losing_run(
        manager: Any, options: Any, *, election_client: Any = None, review_client: Any = None
    ) -> None:
        await manager.aclose()
        await election_client.aclose()
        raise LeadershipLost("lease jobrelay-system/jobrelay-relay not renewed within 10s")

    monkeypatch.setattr(run_command.runner, "run", losing_run)
    monkeypatch.setattr(run_command, "setup_logging", lambda *_args: None)
    result = _invoke(kubeconfig=kubeconfig)
    assert result.exit_code == 1
    assert result.output == ""  # the runner logged the one line that says why


@pytest.mark.parametrize(
    ("args", "address"),
    [
        ((), ":8080"),
        (("--metrics-address", "127.0.0.1:0"), "127.0.0.1:0"),
        (("--metrics-address", ""), ""),
    ],
)
def test_metrics_are_served_on_8080_unless_told(
    captured: list[ControllerOptions], kubeconfig: str, args: tuple[str, ...], address: str
) -> None:
    result = _invoke(*args, kubeconfig=kubeconfig)
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert options.metrics_address == address


def test_install_crds_is_off_unless_given(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    assert _invoke(kubeconfig=kubeconfig).exit_code == 0
    assert _invoke("--install-crds", kubeconfig=kubeconfig).exit_code == 0
    assert [options.install_crds for options in captured] == [False, True]


def test_a_missing_crd_is_one_line_saying_what_to_do(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: str
) -> None:
    async def not_served(_client: Any) -> bool:
        return False

    async def supported(_client: Any, **_: Any) -> dict[str, str]:
        return {"gitVersion": "v1.35.4"}

    monkeypatch.setattr(run_command.runner.workerclusters, "crd_served", not_served)
    monkeypatch.setattr(ApiClient, "version", supported)
    monkeypatch.setattr(run_command, "setup_logging", lambda *_args: None)
    result = _invoke(kubeconfig=kubeconfig)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: the management cluster has no WorkerCluster CRD")
    assert "kubectl apply --server-side -f charts/jobrelay/files/crds/" in result.output
    assert "Traceback" not in result.output


def test_a_kinds_claimed_value_and_field_reach_the_kind_settings(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke(
        "--kind", "RayJob.v1.ray.io=kueue.x-k8s.io/multikueue", "--kind", "Job.v1.batch",
        "--kind", "Widget.v1.example.com",
        "--managed-by-field", "Widget.v1.example.com=spec.runPolicy.managedBy",
        kubeconfig=kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (options,) = captured
    assert options.kinds.names == ("RayJob.v1.ray.io", "Job.v1.batch", "Widget.v1.example.com")
    assert options.kinds.managed_by == (("RayJob.v1.ray.io", "kueue.x-k8s.io/multikueue"),)
    assert options.kinds.managed_by_fields == (
        ("Widget.v1.example.com", "spec.runPolicy.managedBy"),
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--kind", "RayJob.v1.ray.io=a,b"), "is not a managedBy value"),
        (("--managed-by-field", "Widget.v1.example.com=spec.x"), "spec.runPolicy.managedBy"),
    ],
)
def test_bad_claims_are_usage_errors(
    captured: list[ControllerOptions], kubeconfig: str, flags: tuple[str, ...], message: str
) -> None:
    result = _invoke(*flags, kubeconfig=kubeconfig)
    assert result.exit_code == 2 and message in result.output
    assert captured == []


@pytest.mark.parametrize(
    ("flag", "namespaces"),
    [
        ((), None),  # not given: Secrets read wherever the kubeconfig may (an admin's run)
        (("--dependency-secret-namespaces", ""), ()),  # the chart's default: none
        (("--dependency-secret-namespaces", "team-a, team-b,team-a"), ("team-a", "team-b")),
    ],
)
def test_the_namespaces_opened_to_secret_copying_reach_the_options(
    captured: list[ControllerOptions],
    kubeconfig: str,
    flag: tuple[str, ...],
    namespaces: tuple[str, ...] | None,
) -> None:
    result = _invoke(*flag, kubeconfig=kubeconfig)
    assert result.exit_code == 0, result.output
    assert captured[0].dependency_secret_namespaces == namespaces


def test_a_secret_namespace_that_is_no_namespace_name_is_refused(kubeconfig: str) -> None:
    result = _invoke("--dependency-secret-namespaces", "team-a,Team_B", kubeconfig=kubeconfig)
    assert result.exit_code == 2 and "'Team_B' is not a namespace name" in result.output
