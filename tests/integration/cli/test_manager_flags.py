"""`--kubeconfig`/`--context` mean the management cluster on every `clusters` command, on the
group and on the subcommand (the subcommand's win): the defect was that `jobrelay clusters
--kubeconfig X --context Y cordon w1` ignored the group's flags and cordoned w1 on
$KUBECONFIG's current context, another management cluster.

Two "managers" on the real fleet: the manager and worker-2 (the WorkerCluster CRD installed
there for the test), each with a WorkerCluster of the same name; one kubeconfig file with a
context for each, and $KUBECONFIG pointing at the other one's.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import WORKER_CLUSTERS
from tests.kubetools import jobrelay_cli as jobrelay

pytestmark = pytest.mark.integration

OTHER = "worker-2"  # plays a second management cluster


@dataclass
class Managers:
    kubeconfig: Path  # both contexts: "real" (the manager) and "other" (worker-2)
    other_only: Path  # a kubeconfig of worker-2 alone ($KUBECONFIG in the tests)
    worker: str  # the WorkerCluster's name on both


def renamed(path: Path, name: str) -> dict[str, Any]:
    """A kubeconfig's one cluster, user and context, all called ``name``."""
    document = yaml.safe_load(path.read_text())
    for key in ("clusters", "users", "contexts"):
        (entry,) = document[key]
        entry["name"] = name
    document["contexts"][0]["context"].update(cluster=name, user=name)
    document["current-context"] = name
    for entry in document["users"] + document["clusters"]:  # files relative to their kubeconfig
        for field, value in list(next(v for k, v in entry.items() if k != "name").items()):
            if isinstance(value, str) and field in (
                "certificate-authority", "client-certificate", "client-key"
            ) and not Path(value).is_absolute():  # fmt: skip
                entry[next(k for k in entry if k != "name")][field] = str(path.parent / value)
    return document


@pytest.fixture
async def managers(
    fleet: Any, clients: dict[str, ApiClient], tmp_path: Path
) -> AsyncIterator[Managers]:
    real = renamed(fleet.kubeconfig("manager"), "real")
    other = renamed(fleet.kubeconfig(OTHER), "other")
    both = {
        "apiVersion": "v1", "kind": "Config", "current-context": "other",
        **{key: real[key] + other[key] for key in ("clusters", "users", "contexts")},
    }  # fmt: skip
    (tmp_path / "both").write_text(yaml.safe_dump(both))
    (tmp_path / "other").write_text(yaml.safe_dump(other))
    name = f"flags-{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": "jobrelay.dev/v1alpha1", "kind": "WorkerCluster",
        "metadata": {"name": name},
        "spec": {"kubeconfigSecretRef": {"name": workerclusters.secret_name(name)}},
    }  # fmt: skip
    await workerclusters.install_crd(clients[OTHER])
    for cluster in ("manager", OTHER):
        await clients[cluster].create(WORKER_CLUSTERS, body)
    try:
        yield Managers(tmp_path / "both", tmp_path / "other", name)
    finally:
        for cluster in ("manager", OTHER):
            try:
                await clients[cluster].delete(WORKER_CLUSTERS, name)
            except ApiError as error:
                if not error.is_not_found:
                    raise


async def cordoned(client: ApiClient, name: str) -> bool:
    return bool(((await client.get(WORKER_CLUSTERS, name)).get("spec") or {}).get("cordoned"))


@pytest.mark.parametrize(
    "where",
    [
        ["clusters", "--kubeconfig", "{both}", "--context", "real", "cordon", "{name}"],
        ["clusters", "cordon", "{name}", "--kubeconfig", "{both}", "--context", "real"],
        ["clusters", "--kubeconfig", "{both}", "cordon", "{name}", "--context", "real"],
        # the subcommand's flags win over the group's
        [
            "clusters",
            "--context",
            "other",
            "cordon",
            "{name}",
            "--kubeconfig",
            "{both}",
            "--context",
            "real",
        ],
    ],
    ids=["group-flags", "subcommand-flags", "mixed", "subcommand-wins"],
)
async def test_cordon_acts_on_the_named_manager_only(
    managers: Managers, clients: dict[str, ApiClient], where: list[str]
) -> None:
    argv = [a.format(both=managers.kubeconfig, name=managers.worker) for a in where]
    code, out, err = await jobrelay(managers.other_only, *argv)
    assert code == 0, out + err
    assert await cordoned(clients["manager"], managers.worker)
    assert not await cordoned(clients[OTHER], managers.worker), "cordoned on $KUBECONFIG's"


async def test_uncordon_drain_and_list_follow_the_group_flags(
    managers: Managers, clients: dict[str, ApiClient]
) -> None:
    group = ["clusters", "--kubeconfig", str(managers.kubeconfig), "--context", "real"]
    code, out, err = await jobrelay(managers.other_only, *group, "drain", managers.worker,
                                    "--no-wait")  # fmt: skip
    assert code == 0, out + err
    assert await cordoned(clients["manager"], managers.worker)
    assert not await cordoned(clients[OTHER], managers.worker)
    code, out, err = await jobrelay(managers.other_only, *group, "list", "-o", "name")
    assert code == 0, out + err
    assert f"workercluster.jobrelay.dev/{managers.worker}" in out
    code, out, err = await jobrelay(managers.other_only, *group, "uncordon", managers.worker)
    assert code == 0, out + err
    assert not await cordoned(clients["manager"], managers.worker)


async def registered(client: ApiClient, name: str) -> bool:
    try:
        await client.get(WORKER_CLUSTERS, name)
    except ApiError as error:
        if error.is_not_found:
            return False
        raise
    return True


async def test_add_registers_on_the_named_manager_with_the_worker_kubeconfig(
    managers: Managers, clients: dict[str, ApiClient], fleet: Any
) -> None:
    """New spelling: the group's --kubeconfig/--context are the manager's, the worker's is
    --worker-kubeconfig; no deprecation warning."""
    name = f"{managers.worker}-new"
    try:
        code, out, err = await jobrelay(
            managers.other_only, "clusters", "--kubeconfig", str(managers.kubeconfig),
            "--context", "real", "add", name, "--worker-kubeconfig", str(fleet.kubeconfig("worker-1")),
        )  # fmt: skip
        # No deprecation warning: stderr only says where the kubeconfig Secret went.
        assert code == 0, out + err
        assert err.splitlines() == [
            f"its kubeconfig is in Secret jobrelay-system/worker-{name}-kubeconfig, "
            "where the controller reads it"
        ], err
        assert await registered(clients["manager"], name)
        assert not await registered(clients[OTHER], name)
    finally:
        await workerclusters.unregister(clients["manager"], name)


async def test_the_old_add_kubeconfig_spelling_still_works_with_a_warning(
    managers: Managers, clients: dict[str, ApiClient], fleet: Any
) -> None:
    """`clusters add NAME --kubeconfig WORKER` (no --worker-kubeconfig): the worker's, as
    before, with a deprecation warning on stderr; the manager is the group's."""
    name = f"{managers.worker}-old"
    try:
        code, out, err = await jobrelay(
            managers.other_only, "clusters", "--kubeconfig", str(managers.kubeconfig),
            "--context", "real", "add", name, "--kubeconfig", str(fleet.kubeconfig("worker-1")),
        )  # fmt: skip
        assert code == 0, out + err
        assert err.startswith("warning: `clusters add NAME --kubeconfig FILE` is deprecated")
        assert "--worker-kubeconfig" in err
        assert await registered(clients["manager"], name)
        assert not await registered(clients[OTHER], name)
    finally:
        await workerclusters.unregister(clients["manager"], name)
