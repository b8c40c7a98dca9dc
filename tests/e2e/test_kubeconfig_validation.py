"""Kubeconfig Secrets that would make the controller read its files or run commands
are refused, on the real fleet, with a controller running.

- Every refused field (``exec``, ``tokenFile``, ``client-certificate``,
  ``client-key``, ``certificate-authority``, ``auth-provider``,
  ``insecure-skip-tls-verify: true``) gets its own WorkerCluster and Secret,
  written straight through the API as anyone allowed to write Secrets could. Each
  must show ``Connected=False``, reason ``InvalidKubeconfig``, a message naming
  the field by its path, and no secret value (neither there nor in the log).
- Nothing was acted on: every one of these kubeconfigs points at a listener the
  test holds, which must never see a connection (for ``tokenFile`` with an
  ``http://`` server: the file's content would have gone there as a bearer
  token); the exec plugin's command would create a file, which must never exist.
  Both are checked after the controller has re-read each Secret several times:
  each Secret is rotated to a variant naming another entry, and the condition's
  message must name that entry (conditions, not sleeps).
- ``jobrelay run --allow-exec-credentials``: an exec plugin that prints an
  ExecCredential with a valid fleet token connects its worker (and so the same
  plugin provably runs when allowed); ``tokenFile`` stays refused.

One controller serves all refusals; the allowed case has its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import WORKER_CLUSTERS
from jobrelay.localfleet.cluster_files import Credential
from tests.conftest import FleetHandle
from tests.e2e.support import ControllerProcess
from tests.e2e.test_worker_connection import register_raw, rotate
from tests.kubetools import condition, eventually

pytestmark = pytest.mark.e2e

STATUS_INTERVAL = 1  # an unusable Secret is read again every status interval
CONTROLLER_ARGS = ("--worker-status-interval", str(STATUS_INTERVAL), "--no-leader-elect")
SHOWS_WITHIN = 40.0
# How many times each Secret is rotated (and so re-read, re-checked) before the end.
REREADS = 3
SECRET_VALUE = "s3cr3t-kubeconfig-VALUE-5e1d7a"
EXEC_API = "client.authentication.k8s.io/v1beta1"


class Listener:
    """A TCP listener on 127.0.0.1 that counts connections (and never answers)."""

    def __init__(self) -> None:
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()

    async def __aenter__(self) -> Listener:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])


@contextlib.asynccontextmanager
async def running_controller(
    fleet: FleetHandle, log_dir: Path, *extra: str
) -> AsyncIterator[ControllerProcess]:
    process = ControllerProcess(
        fleet.kubeconfig("manager"),
        log_dir / "controller.log",
        workers=fleet.workers,
        extra_args=[*CONTROLLER_ARGS, *extra],
    )
    try:
        await process.start()
        await process.wait_ready()
        yield process
        process.assert_alive()
        await process.stop()
        process.assert_clean_log()
    finally:
        if process.running:
            await process.kill()


def exec_plugin(tmp_path: Path, marker: Path, token: str = SECRET_VALUE) -> dict[str, Any]:
    """An exec plugin whose command creates ``marker`` and prints an ExecCredential."""
    script = tmp_path / "plugin.py"
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": token}}
    script.write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        f"print({json.dumps(json.dumps(credential))})\n"
    )
    return {"apiVersion": EXEC_API, "command": sys.executable, "args": [str(script)]}


@dataclass(frozen=True)
class Refused:
    """A kubeconfig field that must be refused, where it sits, and the message's words."""

    section: str  # "users" or "clusters"
    fields: Callable[[Path, Path], dict[str, Any]]  # (tmp_path, exec marker) -> fields
    says: str
    scheme: str = "https"


REFUSED = {
    "exec": Refused(
        "users", lambda tmp, marker: {"exec": exec_plugin(tmp, marker)},
        "exec credential plugins are refused (jobrelay run --allow-exec-credentials allows them)",
    ),
    "token-file": Refused(
        "users", lambda tmp, marker: {"tokenFile": str(tmp / "token")}, "tokenFile is refused",
        scheme="http",
    ),
    "client-certificate": Refused(
        "users",
        lambda tmp, marker: {"client-certificate": str(tmp / "token"), "client-key-data": "a2V5"},
        "client-certificate names a file",
    ),
    "client-key": Refused(
        "users",
        lambda tmp, marker: {"client-certificate-data": "Y2VydA==", "client-key": str(tmp / "token")},
        "client-key names a file",
    ),
    "certificate-authority": Refused(
        "clusters", lambda tmp, marker: {"certificate-authority": str(tmp / "token")},
        "certificate-authority names a file",
    ),
    "auth-provider": Refused(
        "users",
        lambda tmp, marker: {"auth-provider": {"name": "oidc", "config": {"id-token": SECRET_VALUE}}},
        "auth-provider is refused",
    ),
    "insecure-skip-tls-verify": Refused(
        "clusters", lambda tmp, marker: {"insecure-skip-tls-verify": True},
        "insecure-skip-tls-verify: true is refused",
    ),
}  # fmt: skip


def refused_kubeconfig(case: Refused, tmp_path: Path, marker: Path, port: int, entry: str) -> str:
    """A kubeconfig whose user (or cluster) ``entry`` carries the refused field, an inline
    token with the secret value beside it, and the listener as its server."""
    fields = case.fields(tmp_path, marker)
    user: dict[str, Any] = {"token": SECRET_VALUE}
    cluster: dict[str, Any] = {"server": f"{case.scheme}://127.0.0.1:{port}"}
    target = user if case.section == "users" else cluster
    target.update(fields)
    cluster_name = entry if case.section == "clusters" else "c"
    user_name = entry if case.section == "users" else "u"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": cluster}],
            "users": [{"name": user_name, "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": cluster_name, "user": user_name}}],
            "current-context": "x",
        }
    )


async def wait_connected(
    manager: ApiClient, worker: str, status: str, reason: str, says: Sequence[str] = ()
) -> str:
    """Until the WorkerCluster shows Connected=status (reason) with all of ``says``; its message."""

    async def check() -> str | None:
        try:
            found = await manager.get(WORKER_CLUSTERS, worker)
        except ApiError:
            return None
        connected = condition(found, "Connected") or {}
        message = str(connected.get("message", ""))
        matches = (connected.get("status"), connected.get("reason")) == (status, reason)
        return message if matches and all(s in message for s in says) else None

    try:
        return await eventually(
            check, timeout=SHOWS_WITHIN, what=f"{worker}: Connected={status} ({reason}) {says}"
        )
    except AssertionError as error:
        with contextlib.suppress(ApiError):
            seen = (await manager.get(WORKER_CLUSTERS, worker)).get("status")
            raise AssertionError(f"{error}; its status: {seen}") from None
        raise


def secrets_of(fleet: FleetHandle) -> list[str]:
    """What no status and no log may show: the test's value and the fleet's worker token."""
    token_config = yaml.safe_load(fleet.kubeconfig(fleet.workers[0], Credential.TOKEN).read_text())
    return [SECRET_VALUE, str(token_config["users"][0]["user"]["token"])]


def assert_not_shown(where: str, text: str, secrets: Sequence[str]) -> None:
    leaked = [secret[:6] + "..." for secret in secrets if secret in text]
    assert not leaked, f"{where} shows secret values (starting {leaked})"


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        yield client


async def test_each_unsafe_field_is_refused_and_never_acted_on(
    fleet: FleetHandle, manager: ApiClient, tmp_path: Path
) -> None:
    secrets = secrets_of(fleet)
    # The file every path field names: it holds a real, valid token of the fleet.
    (tmp_path / "token").write_text(secrets[1])
    marker = tmp_path / "exec-plugin-ran"
    names = {case: f"kc-refused-{case}"[:40] for case in REFUSED}
    async with Listener() as listener, running_controller(fleet, tmp_path) as controller:
        log_from = controller.log_size()
        try:
            for case, refused in REFUSED.items():
                text = refused_kubeconfig(refused, tmp_path, marker, listener.port, "entry-0")
                await register_raw(manager, names[case], {workerclusters.SECRET_KEY: text})
            for round_ in range(REREADS + 1):
                entry = f"entry-{round_}"
                for case, refused in REFUSED.items():
                    if round_:  # rotated: the controller must read and check it again
                        text = refused_kubeconfig(refused, tmp_path, marker, listener.port, entry)
                        await rotate(manager, names[case], text)
                for case, refused in REFUSED.items():
                    where = f'{refused.section}[0] "{entry}"'
                    message = await wait_connected(
                        manager, names[case], "False", "InvalidKubeconfig",
                        (f"Secret {workerclusters.DEFAULT_NAMESPACE}/{workerclusters.secret_name(names[case])}",
                         where, refused.says),
                    )  # fmt: skip
                    assert_not_shown(f"{case}'s condition", message, secrets)
                assert not marker.exists(), "the exec credential plugin ran"
                assert listener.connections == 0, "a refused kubeconfig's server was contacted"
            status = json.dumps([await manager.get(WORKER_CLUSTERS, n) for n in names.values()])
            assert_not_shown("the WorkerClusters", status, secrets)
            assert_not_shown("the controller's log", controller.log_text(log_from), secrets)
        finally:
            for name in names.values():
                await workerclusters.unregister(manager, name)


async def test_allow_exec_credentials_runs_plugins_but_still_refuses_token_files(
    fleet: FleetHandle, manager: ApiClient, tmp_path: Path
) -> None:
    worker = fleet.workers[0]
    token_config = workerclusters.inline_kubeconfig(fleet.kubeconfig(worker, Credential.TOKEN))
    token = token_config["users"][0]["user"].pop("token")
    marker = tmp_path / "exec-plugin-ran"
    token_config["users"][0]["user"]["exec"] = exec_plugin(tmp_path, marker, token)
    (tmp_path / "token").write_text(token)
    token_file = json.loads(json.dumps(token_config))
    token_file["users"][0]["user"] = {"tokenFile": str(tmp_path / "token")}
    names = {"exec": "kc-allowed-exec", "token-file": "kc-allowed-token-file"}
    async with running_controller(fleet, tmp_path, "--allow-exec-credentials") as controller:
        log_from = controller.log_size()
        try:
            await register_raw(
                manager, names["exec"], {workerclusters.SECRET_KEY: yaml.safe_dump(token_config)}
            )
            await register_raw(
                manager,
                names["token-file"],
                {workerclusters.SECRET_KEY: yaml.safe_dump(token_file)},
            )
            await wait_connected(manager, names["exec"], "True", "Connected")
            assert marker.exists(), "connected, yet the exec plugin never ran"
            await wait_connected(
                manager,
                names["token-file"],
                "False",
                "InvalidKubeconfig",
                ("tokenFile is refused",),
            )
            assert_not_shown("the controller's log", controller.log_text(log_from), [token])
        finally:
            for name in names.values():
                await workerclusters.unregister(manager, name)
