"""`jobrelay clusters add` refuses the kubeconfigs the controller would refuse, before
writing anything, and keeps inlining the admin's certificate, key and CA files.

Each refused kubeconfig is worker-1's admin kubeconfig (file paths, as the local
fleet writes them) with one field changed; the command must exit 1 naming the
field, print no secret value, and leave no Secret and no WorkerCluster behind.
"""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import SECRETS, WORKER_CLUSTERS
from tests.integration.fleet.test_clusters_cli import NAMESPACE, Cli
from tests.kubetools import exists

pytestmark = pytest.mark.integration

SECRET_VALUE = "s3cr3t-cli-VALUE-0d4b77"
EXEC_PLUGIN = {
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "command": sys.executable,
    "args": ["-c", f"print('{SECRET_VALUE}')"],
}


@pytest.fixture
def cli(fleet: Any) -> Cli:
    return Cli(fleet.kubeconfig("manager"))


def with_user(**fields: Any) -> Callable[[dict[str, Any], Path], None]:
    def change(config: dict[str, Any], tmp_path: Path) -> None:
        config["users"][0]["user"] = {
            k: str(tmp_path / v) if k == "tokenFile" else v for k, v in fields.items()
        }

    return change


def insecure(config: dict[str, Any], tmp_path: Path) -> None:
    config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    del config["clusters"][0]["cluster"]["certificate-authority"]


REFUSED = {
    "token-file": (with_user(tokenFile="token"), 'users[0] "worker-1-user": tokenFile is refused'),
    "exec": (
        with_user(exec=EXEC_PLUGIN),
        'users[0] "worker-1-user": exec credential plugins are refused '
        "(jobrelay clusters add --allow-exec-credentials allows them)",
    ),
    "auth-provider": (
        with_user(**{"auth-provider": {"name": "oidc", "config": {"id-token": SECRET_VALUE}}}),
        'users[0] "worker-1-user": auth-provider is refused',
    ),
    "insecure-skip-tls-verify": (
        insecure, 'clusters[0] "worker-1": insecure-skip-tls-verify: true is refused'
    ),
}  # fmt: skip


def changed_kubeconfig(
    fleet: Any, tmp_path: Path, change: Callable[[dict[str, Any], Path], None]
) -> Path:
    config = yaml.safe_load(fleet.kubeconfig("worker-1").read_text())
    (tmp_path / "token").write_text(SECRET_VALUE)
    change(config, tmp_path)
    path = tmp_path / "worker.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("case", list(REFUSED))
async def test_add_refuses_the_field_and_writes_nothing(
    case: str, cli: Cli, fleet: Any, clients: dict[str, ApiClient], tmp_path: Path
) -> None:
    change, says = REFUSED[case]
    name = f"cli-refused-{uuid.uuid4().hex[:6]}"
    path = changed_kubeconfig(fleet, tmp_path, change)
    code, out, err = await cli.run("add", name, "--kubeconfig", str(path))
    assert code == 1, out + err
    assert says in err, err
    assert SECRET_VALUE not in out + err
    manager = clients["manager"]
    assert not await exists(manager, WORKER_CLUSTERS, name, None)
    assert not await exists(manager, SECRETS, workerclusters.secret_name(name), NAMESPACE)


async def test_add_allow_exec_credentials_stores_the_plugin(
    cli: Cli, fleet: Any, clients: dict[str, ApiClient], tmp_path: Path
) -> None:
    name = f"cli-exec-{uuid.uuid4().hex[:6]}"
    path = changed_kubeconfig(fleet, tmp_path, with_user(exec=EXEC_PLUGIN))
    try:
        code, out, err = await cli.run(
            "add", name, "--kubeconfig", str(path), "--allow-exec-credentials"
        )
        assert code == 0, out + err
        secret = await clients["manager"].get(
            SECRETS, workerclusters.secret_name(name), namespace=NAMESPACE
        )
        stored = yaml.safe_load(base64.b64decode(secret["data"][workerclusters.SECRET_KEY]))
        assert stored["users"][0]["user"] == {"exec": EXEC_PLUGIN}
        # The CA file was inlined; no path is left for the controller to read.
        cluster = stored["clusters"][0]["cluster"]
        assert "certificate-authority" not in cluster and cluster["certificate-authority-data"]
    finally:
        await workerclusters.unregister(clients["manager"], name, namespace=NAMESPACE)


async def test_add_inlines_the_admins_certificate_files(
    cli: Cli, fleet: Any, clients: dict[str, ApiClient]
) -> None:
    name = f"cli-files-{uuid.uuid4().hex[:6]}"
    try:
        code, out, err = await cli.run(
            "add", name, "--kubeconfig", str(fleet.kubeconfig("worker-1"))
        )
        assert code == 0, out + err
        secret = await clients["manager"].get(
            SECRETS, workerclusters.secret_name(name), namespace=NAMESPACE
        )
        text = base64.b64decode(secret["data"][workerclusters.SECRET_KEY]).decode()
        user = yaml.safe_load(text)["users"][0]["user"]
        assert set(user) == {"client-certificate-data", "client-key-data"}
        assert str(fleet.state_dir) not in text  # no path of the admin's machine stored
    finally:
        await workerclusters.unregister(clients["manager"], name, namespace=NAMESPACE)
