"""charts/jobrelay-worker installed with `helm install` on worker-1, and jobrelay reaching
worker-1 only with a token of the chart's ServiceAccount.

The chart opens one namespace (``namespaces``) labelled with the manager's origin and
does not let jobrelay create namespaces (``createNamespaces: false``). The test mints a
token for the ServiceAccount (TokenRequest, as `kubectl create token`), registers worker-1
with a kubeconfig holding only that token (its WorkerCluster and Secret on the manager,
as `jobrelay clusters add` writes them), relays a Job through the controller to it
(worker-2 cordoned), and checks that the same token cannot write anywhere else: the
chart's admission policy refuses a Job in an unlabelled namespace and in the account's
own namespace, and RBAC refuses a namespace. worker-1 is registered with its admin
kubeconfig again, and the release uninstalled, afterwards.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from jobrelay.fleet import workerclusters
from jobrelay.fleet.workerclusters import default_origin
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, NAMESPACES
from jobrelay.vocabulary.names import ORIGIN_LABEL
from tests.conftest import FleetHandle
from tests.e2e.conftest import NamespaceFactory
from tests.e2e.support import Relay
from tests.e2e.test_redispatch import cordoned
from tests.integration.chart.workerchart import (
    WORKER_CHART,
    helm,
    mint_token,
    token_kubeconfig,
    values_file,
)
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

WORKER = "worker-1"
FLEET_LABEL = "fleet.jobrelay.dev/local=true"  # what `fleet up` registers workers with
# A ValidatingAdmissionPolicy denial without a `reason` is 422 Invalid (RBAC's is 403).
POLICY_REFUSAL = (403, 422)


@dataclass(frozen=True)
class Installed:
    release_namespace: str
    account: str
    opened: str  # the namespace the chart opened to the manager (also on the manager)
    kubeconfig: dict[str, object]


async def policy_in_force(kubeconfig: dict[str, object]) -> None:
    """Until the worker's apiserver enforces the new admission policy: it loads policies
    through an informer, so for a moment after `helm install` a write it would refuse
    still passes (a dry run goes through admission and stores nothing)."""

    async def refused() -> bool:
        try:
            await worker.create(JOBS, job_manifest("probe", suspend=True), namespace="default",
                                dry_run=True)  # fmt: skip
        except ApiError as error:
            # The policy's refusal, not RBAC's (whose cache may lag the new binding).
            return error.code in POLICY_REFUSAL and "ValidatingAdmissionPolicy" in str(error)
        return False

    async with ApiClient.from_kubeconfig_dict(kubeconfig, cluster=WORKER) as worker:
        await eventually(refused, timeout=30, what="the chart's admission policy in force")


@pytest.fixture
async def installed(
    fleet: FleetHandle, clients: dict[str, ApiClient], make_namespace: NamespaceFactory
) -> AsyncIterator[Installed]:
    """The chart on worker-1, worker-1 registered with its token; undone after."""
    suffix = uuid.uuid4().hex[:6]
    release, release_namespace = f"jobrelay-worker-{suffix}", f"jobrelay-chart-{suffix}"
    # Named apart from the account `clusters add --create-service-account` makes for the
    # same origin (another test's, left on the worker), which helm would not adopt.
    account = f"jobrelay-worker-chart-{suffix}"
    opened = await make_namespace(["manager"])  # on worker-1 the chart makes it
    values = {
        "origin": await default_origin(clients["manager"]),
        "serviceAccount": {"name": account},
        "createNamespaces": False,
        "tokenSecret": {"create": False},
        "namespaces": [opened],
    }
    worker_kubeconfig = str(fleet.kubeconfig(WORKER))
    path = values_file(values)
    try:
        helm("install", release, str(WORKER_CHART), "-n", release_namespace,
             "--create-namespace", "-f", str(path), "--kubeconfig", worker_kubeconfig,
             "--wait", "--timeout", "2m")  # fmt: skip
        token = await mint_token(clients[WORKER], release_namespace, account)
        kubeconfig = token_kubeconfig(fleet.kubeconfig(WORKER), WORKER, account, token)
        await policy_in_force(kubeconfig)
        await workerclusters.register(
            clients["manager"], WORKER, kubeconfig, labels=dict([FLEET_LABEL.split("=")])
        )
        yield Installed(release_namespace, account, opened, kubeconfig)
    finally:
        path.unlink()
        await workerclusters.register(
            clients["manager"], WORKER, workerclusters.inline_kubeconfig(fleet.kubeconfig(WORKER)),
            labels=dict([FLEET_LABEL.split("=")]),
        )  # fmt: skip
        helm("uninstall", release, "-n", release_namespace, "--kubeconfig", worker_kubeconfig,
             "--wait", check=False)  # fmt: skip
        try:
            await clients[WORKER].delete(NAMESPACES, release_namespace)
        except ApiError as error:
            assert error.is_not_found, error


async def test_a_job_runs_on_a_worker_reached_with_the_charts_service_account(
    installed: Installed,
    relay: Relay,
    make_relay: Callable[[str], Awaitable[Relay]],
    clients: dict[str, ApiClient],
) -> None:
    # The opened namespace, as the chart made it (kept on uninstall: it holds workloads).
    namespace = await clients[WORKER].get(NAMESPACES, installed.opened)
    origin = await default_origin(clients["manager"])
    assert namespace["metadata"]["labels"][ORIGIN_LABEL] == origin
    # The controller reads the new Secret from the start (its Secret watch would reconnect
    # too, but a restart leaves no doubt which credential it holds).
    await relay.controller.restart(sig=signal.SIGTERM)
    on_opened = await make_relay(installed.opened)
    others = [worker for worker in relay.workers if worker != WORKER]
    async with cordoned(clients["manager"], others):
        await on_opened.submit(job_manifest("through-the-chart"))
        done = await on_opened.verify("through-the-chart", outcome="Complete")
    assert done.cluster == WORKER


async def test_the_token_writes_nowhere_else(
    installed: Installed, make_namespace: NamespaceFactory, clients: dict[str, ApiClient]
) -> None:
    origin = await default_origin(clients["manager"])
    # A namespace another manager opened (its origin label, not ours).
    theirs = await make_namespace([WORKER])
    await clients[WORKER].patch(
        NAMESPACES, theirs, {"metadata": {"labels": {ORIGIN_LABEL: "another"}}}
    )
    mine = {ORIGIN_LABEL: origin}
    async with ApiClient.from_kubeconfig_dict(installed.kubeconfig, cluster=WORKER) as worker:
        # RBAC allows Jobs in every namespace; the chart's admission policy does not.
        for namespace, why in (
            ("default", "jobrelay writes only in namespaces labelled"),
            (theirs, "jobrelay writes only in namespaces labelled"),
            (installed.release_namespace, "the namespace of its own credential"),
            ("kube-system", "kube-* namespaces"),
        ):
            stray = job_manifest("stray", suspend=True)
            with pytest.raises(ApiError) as refused:
                await worker.create(JOBS, stray, namespace=namespace)
            assert refused.value.code in POLICY_REFUSAL and why in str(refused.value), (
                namespace,
                refused.value,
            )
        # createNamespaces: false: no namespace is created at all (RBAC).
        with pytest.raises(ApiError) as refused:
            await worker.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": f"x-{uuid.uuid4().hex[:6]}",
                                                          "labels": mine}})  # fmt: skip
        assert refused.value.code == 403, refused.value
        # In the opened namespace it writes (what the relayed Job relied on), and deletes
        # only what carries its origin.
        own = job_manifest("own", suspend=True)
        own["metadata"]["labels"] = mine
        await worker.create(JOBS, own, namespace=installed.opened)
        await worker.delete(JOBS, "own", namespace=installed.opened)
        await clients[WORKER].create(
            JOBS, job_manifest("not-own", suspend=True), namespace=installed.opened
        )
        with pytest.raises(ApiError) as refused:
            await worker.delete(JOBS, "not-own", namespace=installed.opened)
        assert refused.value.code in POLICY_REFUSAL and "deletes only its own" in str(refused.value)
