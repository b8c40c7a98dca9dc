"""`jobrelay logs` through workers added with `clusters add --create-service-account`.

Every worker of the fleet is registered the way docs/add-a-worker.md tells operators to
(``WORKERS_ADDED``, tests/e2e/worker_identity.py): the controller holds only the token of
the least-privilege ServiceAccount made there, whose pods/log right is granted per
namespace opened to the origin (the RoleBinding of its namespaced ClusterRole, which the
relay makes before it creates the first mirror there, charts/jobrelay-worker/files/
worker-access.yaml). A running plain Job (nothing copied for it) prints its lines. Where
the worker refuses (the grant of that namespace revoked by the worker's admin, as in a
namespace not opened to the origin), `jobrelay logs` says so on stderr and exits 5, and
the refusal is never a line of the output.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.fleet.serviceaccount import ROLE_BINDINGS, account_name
from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import SECRETS
from jobrelay.localfleet.cluster import SIMULATED_LOG, Credential
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, manager_client
from tests.e2e.support import Relay
from tests.e2e.test_remote_logs import jobrelay_logs, lines, registered, running_pods
from tests.e2e.worker_identity import SERVICE_ACCOUNT
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

CONTROLLER_ARGS = API_ARGS
WORKERS_ADDED = SERVICE_ACCOUNT
__all__ = ["registered"]  # the module's fixture, shared with test_remote_logs


async def stored_user(manager: ApiClient, worker: str) -> dict[str, Any]:
    """The user of the kubeconfig jobrelay holds for ``worker``."""
    secret = await manager.get(
        SECRETS, workerclusters.secret_name(worker), namespace=workerclusters.DEFAULT_NAMESPACE
    )
    kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    user: dict[str, Any] = kubeconfig["users"][0]["user"]
    return user


async def jobs_as_of(
    fleet: FleetHandle, worker: str, namespace: str, created: dict[str, Any]
) -> list[str]:
    """The Jobs of ``namespace`` on ``worker`` as the worker's store held them when
    ``created`` (an object of that apiserver, never changed since) was made: a list at
    exactly its resourceVersion."""
    params = {
        "resourceVersion": created["metadata"]["resourceVersion"],
        "resourceVersionMatch": "Exact",
    }
    # The worker's apiserver as its token admin (the helper takes any cluster's kubeconfig).
    async with await manager_client(fleet.kubeconfig(worker, Credential.TOKEN)) as http:
        answer = await http.get(f"/apis/batch/v1/namespaces/{namespace}/jobs", params=params)
    assert answer.status_code == 200, answer.text
    return [item["metadata"]["name"] for item in answer.json()["items"]]


async def test_logs_of_a_running_job_through_a_least_privilege_worker(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    manager = relay.clients["manager"]
    for worker in relay_fleet.workers:  # a token, never the worker's admin credential
        assert list(await stored_user(manager, worker)) == ["token"], worker
    await relay.submit(
        job_manifest("plain", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    worker = await relay.wait_placed("plain")
    await running_pods(relay, worker, "plain", 1)
    # The relay bound the account's namespaced ClusterRole there (nothing was copied)
    # before it created the mirror: the pod's log was readable from its start. The
    # worker's store as of the binding's own revision holds no mirror yet.
    name = account_name(await workerclusters.default_origin(manager))
    binding = await relay.clients[worker].get(ROLE_BINDINGS, name, namespace=relay.namespace)
    assert binding["roleRef"]["name"] == f"{name}-namespaced"
    then = await jobs_as_of(relay_fleet, worker, relay.namespace, binding)
    assert then == [], f"the mirror existed before its namespace's binding: {then}"

    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "plain")
    assert (code, out, err) == (0, lines(*SIMULATED_LOG), "")

    # The worker's admin revokes the grant (the namespace is as one never opened to the
    # origin): the worker refuses, and `jobrelay logs` says so, never in the output.
    await relay.clients[worker].delete(ROLE_BINDINGS, name, namespace=relay.namespace)

    async def refused() -> tuple[int, str, str] | None:
        answer = await jobrelay_logs(user, "-n", relay.namespace, "plain")
        return answer if answer[0] != 0 else None  # the worker's authorizer catching up

    code, out, err = await eventually(refused, timeout=30, what="the worker's refusal")
    assert code == 5, (code, out, err)
    assert "[jobrelay:" not in out and out == "", out
    assert "the worker refused to read the log of pod plain-" in err, err
    assert "(Forbidden)" in err and f"namespace {relay.namespace}" in err, err
