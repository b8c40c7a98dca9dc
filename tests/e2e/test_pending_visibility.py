"""What a tenant may see, a tenant sees (issue 34): a tenant with only a RoleBinding in its
namespace (no RelayQueue read, no right elsewhere) reads its waiting Job's true place in a
queue it shares with another namespace, from the controller's aggregated API
(``.../namespaces/NS/pendingworkloads``, by `kubectl get --raw`, `jobrelay get` and
`describe`),
and never the other namespace's workload names."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.relayapi.pending_rules import pending_path
from jobrelay.vocabulary.names import QUEUE_LABEL
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available, manager_get, user_kubeconfig
from tests.e2e.conftest import NamespaceFactory
from tests.e2e.support import ControllerProcess, Relay
from tests.e2e.test_cli import run
from tests.e2e.test_panel_api import ROLE_BINDINGS, ROLES, binding
from tests.e2e.test_queues import NAME_LABEL, QueueMaker, cpu_job, make_queue, priority_class
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

__all__ = ["make_queue", "priority_class"]  # fixtures, used by name

CONTROLLER_ARGS = API_ARGS
TENANT = "tenant-panel"  # the user test_panel_api's binding() names
RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, str]:
    return await api_available(controller, relay_fleet)


async def test_a_tenant_sees_its_true_position_and_no_other_namespaces_names(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str],
    make_queue: QueueMaker, priority_class: str, make_namespace: NamespaceFactory,
    tmp_path: Path,
) -> None:  # fmt: skip
    other = await make_namespace(["manager"])
    both = {"matchExpressions": [
        {"key": NAME_LABEL, "operator": "In", "values": [relay.namespace, other]}]}  # fmt: skip
    queue = await make_queue(relay.namespace, namespaceSelector=both,
                             nominalQuota={"cpu": "1"}, borrowingLimit={"cpu": "0"})  # fmt: skip
    blocker = job_manifest("blocker", cpu="1", annotations=RUN_FOREVER)
    blocker["metadata"]["labels"] = {QUEUE_LABEL: queue}
    await relay.submit(blocker)
    await relay.wait_placed("blocker")  # the queue's one CPU is taken until the test ends
    manager: ApiClient = relay.manager
    # Two of another namespace, of a higher priority: ahead of the tenant's, whatever the
    # creation seconds.
    for name in ("theirs-0", "theirs-1"):
        theirs = cpu_job(name, "1", "1s", **{QUEUE_LABEL: queue})
        theirs["spec"]["template"]["spec"]["priorityClassName"] = priority_class
        await manager.create(relay.resource, theirs, namespace=other)
    await relay.submit(cpu_job("mine", "1", "1s", **{QUEUE_LABEL: queue}))

    # The tenant: one Role in its namespace (its Jobs, and the API's path there).
    tenant = user_kubeconfig(relay_fleet, tmp_path, TENANT)
    await manager.create(ROLES, {"metadata": {"name": "tenant"}, "rules": [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]},
        {"apiGroups": ["api.jobrelay.dev"], "resources": ["pendingworkloads"],
         "verbs": ["get", "list"]},
    ]}, namespace=relay.namespace)  # fmt: skip
    await manager.create(ROLE_BINDINGS, binding("tenant", "Role", "tenant"),
                         namespace=relay.namespace)  # fmt: skip

    async def third() -> dict[str, Any] | None:
        process = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(tenant), "get", "--raw", pending_path(relay.namespace),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(process.communicate(), 30)
        if process.returncode != 0:
            return None  # RBAC or the controller's review cache not caught up yet
        body: dict[str, Any] = json.loads(out)
        items = body["items"]
        return body if items and items[0]["position"] == 3 else None

    body = await eventually(third, timeout=60, what="the tenant's Job third in the queue")
    (item,) = body["items"]
    assert (item["name"], item["queue"], item["aheadNotShown"]) == ("mine", queue, 2)
    assert item["namespace"] == relay.namespace and item["reason"]
    assert [q["name"] for q in body["queues"]] == [queue]
    assert body["queues"][0]["nominalQuota"] == {"cpu": "1"}
    text = json.dumps(body)
    assert "theirs" not in text and other not in text

    # Another namespace: refused (the tenant has no right there).
    refused = await manager_get(tenant, pending_path(other))
    assert refused.status_code == 403, refused.text
    assert "theirs" not in refused.text

    # `jobrelay get` as the tenant: the controller's position, in today's table.
    table = await run(relay_fleet, "get", "jobs", "-n", relay.namespace,
                      "--kubeconfig", str(tenant))  # fmt: skip
    assert table.code == 0, table
    header, *rows = table.stdout.splitlines()
    columns = header.split()
    at_queue, at_position = columns.index("QUEUE"), columns.index("POSITION")
    shown = {row.split()[1]: (row.split()[at_queue], row.split()[at_position]) for row in rows}
    assert shown == {"blocker": (queue, "-"), "mine": (queue, "3")}
    assert "theirs" not in table.stdout + table.stderr
    described = await run(relay_fleet, "describe", "job", "mine", "-n", relay.namespace,
                          "--kubeconfig", str(tenant))  # fmt: skip
    assert described.code == 0, described
    assert f"Queue:            {queue} (position 3)" in described.stdout.splitlines()
