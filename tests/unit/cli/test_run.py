"""`jobrelay run`: every flag reaches the controller's options, defaults come from options.py."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from jobrelay.cli import run as run_command
from jobrelay.controller.options import ControllerOptions


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[ControllerOptions]:
    """The options `jobrelay run` would start the controller with (nothing is started)."""
    seen: list[ControllerOptions] = []

    async def fake_run(manager: Any, options: ControllerOptions) -> None:
        seen.append(options)
        await manager.aclose()

    monkeypatch.setattr(run_command.runner, "run", fake_run)
    monkeypatch.setattr(run_command, "setup_logging", lambda *_args: None)
    return seen


def _invoke(*args: str, kubeconfig: str) -> Any:
    return CliRunner().invoke(run_command.run, ["--kubeconfig", kubeconfig, *args])


@pytest.fixture
def kubeconfig(tmp_path: Any) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return str(path)


def test_without_flags_the_options_are_the_defaults(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke(kubeconfig=kubeconfig)
    assert result.exit_code == 0, result.output
    assert captured == [ControllerOptions()]


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
    workers = options.workers
    assert (workers.namespace, workers.keep_finished_mirrors, workers.create_namespaces) == (
        "relay",
        True,
        False,
    )
    assert (workers.sync_timeout, workers.status_interval, workers.rejected_retry) == (5, 3, 7)
    assert workers.health_timeout == 12
    assert options.placement.unplaceable_retry == 9
    queue = options.queue
    assert (queue.gc_interval, queue.concurrency) == (30, 4)
    assert (queue.retry_base_delay, queue.retry_max_delay) == (0.2, 8)
    assert (queue.retry_qps, queue.retry_burst) == (5, 10)


def test_a_badly_written_kind_is_refused_with_the_form_to_use(
    captured: list[ControllerOptions], kubeconfig: str
) -> None:
    result = _invoke("--kind", "jobset", kubeconfig=kubeconfig)
    assert result.exit_code == 2
    assert "write Kind.version.group" in result.output
    assert captured == []
