"""No secret ever leaves: the session's secret scan is live, and a controller fed real
credentials in broken kubeconfigs echoes none of them.

The scan at the end of the session (``secret_leak_watch`` in conftest.py) covers
every e2e module; this module proves, even when run alone, that the scan knows
the fleet's credentials (a planted one is found) and that, right after the
controller failed on three kubeconfigs holding real credentials, its log, the
manager's Events and the WorkerClusters' statuses hold none of them.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import SECRETS, WORKER_CLUSTERS
from jobrelay.localfleet.cluster_files import Credential
from jobrelay.vocabulary.names import FIELD_MANAGER
from tests.conftest import FleetHandle
from tests.e2e.leakwatch import LeakWatch
from tests.e2e.support import ControllerProcess
from tests.kubetools import condition, eventually
from tests.leakscan import scan

pytestmark = pytest.mark.e2e


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        yield client


def admin_kubeconfig(fleet: FleetHandle) -> dict[str, Any]:
    return workerclusters.inline_kubeconfig(fleet.kubeconfig(fleet.workers[0]))


def no_rights_token(fleet: FleetHandle) -> str:
    config = yaml.safe_load(
        fleet.kubeconfig(fleet.workers[0], Credential.NO_RIGHTS_TOKEN).read_text()
    )
    return str(config["users"][0]["user"]["token"])


def yaml_broken_at_the_key(fleet: FleetHandle) -> str:
    """The admin's kubeconfig with a stray colon on the client key's line: a parser's
    error points right at the key."""
    lines = yaml.safe_dump(admin_kubeconfig(fleet), width=1 << 20).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("client-key-data:"))
    lines[at] += ": oops"
    return "\n".join(lines) + "\n"


def key_of_another_identity(fleet: FleetHandle) -> str:
    """The admin's certificate with the manager's scheduler key: TLS refuses the pair."""
    config = admin_kubeconfig(fleet)
    key = fleet.state_dir / "manager" / "pki" / "scheduler.key"
    config["users"][0]["user"]["client-key-data"] = base64.b64encode(key.read_bytes()).decode()
    return yaml.safe_dump(config)


def with_no_rights_token(fleet: FleetHandle) -> str:
    config = admin_kubeconfig(fleet)
    config["users"][0]["user"] = {"token": no_rights_token(fleet)}
    return yaml.safe_dump(config)


BROKEN: dict[str, Callable[[FleetHandle], str]] = {
    "leak-yaml-at-key": yaml_broken_at_the_key,
    "leak-key-mismatch": key_of_another_identity,
    "leak-no-rights": with_no_rights_token,
}


async def test_the_scan_knows_the_fleets_credentials(
    fleet: FleetHandle, secret_leak_watch: LeakWatch
) -> None:
    needles = secret_leak_watch.needles()
    # Per cluster: 2 tokens, 5 keys at least (admin's is shared), the kubeconfigs' files.
    assert needles.secrets >= 7 * len(fleet.clusters), needles.secrets
    admin_key = (fleet.state_dir / "pki" / "admin.key").read_text().splitlines()
    planted = [
        ("token", f'{{"msg": "refused", "auth": "Bearer {no_rights_token(fleet)}"}}'),
        ("cut token", f"token={no_rights_token(fleet)[3:30]}..."),
        ("key line", f"bad key: {admin_key[2]}"),
    ]
    found = scan(planted, needles)
    assert sorted(leak.source for leak in found.leaks) == ["cut token:1", "key line:1", "token:1"]


async def test_real_credentials_in_broken_kubeconfigs_are_echoed_nowhere(
    controller: ControllerProcess,
    fleet: FleetHandle,
    manager: ApiClient,
    secret_leak_watch: LeakWatch,
) -> None:
    try:
        for name, broken in BROKEN.items():
            await register_text(manager, name, broken(fleet))
        for name in BROKEN:
            await eventually(
                functools.partial(refused, manager, name),
                timeout=45,
                what=f"{name}: Connected=False",
            )

            async def logged(name: str = name) -> bool:
                return name in controller.log_text()

            await eventually(logged, timeout=30, what=f"the controller's log naming {name}")
    finally:
        for name in BROKEN:
            await workerclusters.unregister(manager, name)
    report = secret_leak_watch.scan()
    print(secret_leak_watch.summary())
    assert report.bytes > 0 and secret_leak_watch.last_counts["Event versions"] > 0
    assert not report.leaks, secret_leak_watch.describe_leaks()


async def register_text(manager: ApiClient, name: str, text: str) -> None:
    """A WorkerCluster whose Secret holds ``text`` from the start (never a good kubeconfig)."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": workerclusters.secret_name(name),
            "namespace": workerclusters.DEFAULT_NAMESPACE,
        },
        "stringData": {workerclusters.SECRET_KEY: text},
    }
    worker = {
        "apiVersion": WORKER_CLUSTERS.api_version,
        "kind": WORKER_CLUSTERS.kind,
        "metadata": {"name": name},
        "spec": {
            "kubeconfigSecretRef": {"name": workerclusters.secret_name(name), "key": "kubeconfig"}
        },
    }
    await workerclusters.ensure_namespace(manager, workerclusters.DEFAULT_NAMESPACE)
    for resource, body, namespace in (
        (SECRETS, secret, workerclusters.DEFAULT_NAMESPACE),
        (WORKER_CLUSTERS, worker, None),
    ):
        await manager.patch(
            resource, name if resource is WORKER_CLUSTERS else workerclusters.secret_name(name), body,
            namespace=namespace, patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER,
            force=True,
        )  # fmt: skip


async def refused(manager: ApiClient, name: str) -> dict[str, Any] | None:
    try:
        found = await manager.get(WORKER_CLUSTERS, name)
    except ApiError:
        return None
    connected = condition(found, "Connected")
    return dict(connected) if connected and connected.get("status") == "False" else None
