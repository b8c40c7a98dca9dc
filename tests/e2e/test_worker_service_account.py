"""`jobrelay clusters add --create-service-account` on the local fleet.

worker-1 is registered again from its admin kubeconfig with
--create-service-account: jobrelay then reaches it only with the token of the
ServiceAccount made there, places a Job on it (worker-2 cordoned), creating
the Job's namespace, and the Job completes with the Secret and ConfigMap it uses copied
there. What the token may do, as the worker's own authorizer reports it
(SelfSubjectRulesReview), is the documented cluster-wide ClusterRole
(fleet/serviceaccount.py worker_rules and the bind rules, which charts/jobrelay-worker
renders too) and what every authenticated user may do: no Secret anywhere but in the
namespaces opened to it (issue 33: `get secrets -n kube-system` and `list secrets
--all-namespaces` are 403, `kubectl auth can-i list secrets --all-namespaces` is no).
worker-1 is registered with its admin kubeconfig again afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.fleet.serviceaccount import (
    ROLE_BINDINGS,
    WorkerAccount,
    account_name,
    worker_rules,
)
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS, JOBS, SECRETS
from jobrelay.manifests import worker_access
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.e2e.conftest import NamespaceFactory
from tests.e2e.support import Relay
from tests.e2e.test_redispatch import cordoned
from tests.kubetools import eventually, job_manifest

pytestmark = pytest.mark.e2e

WORKER = "worker-1"
FLEET_LABEL = "fleet.jobrelay.dev/local=true"  # what `fleet up` registers workers with
RULES_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
    namespaced=False,
)  # fmt: skip
ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
    namespaced=False,
)  # fmt: skip
# What the default system:basic-user ClusterRole grants every authenticated user.
EVERYONE = {
    ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "create"),
    ("authentication.k8s.io", "selfsubjectreviews", "create"),
}

Triple = tuple[str, str, str]


async def cli(*args: str) -> str:
    """`python -m jobrelay ARGS`; its output, failing the test on a non-zero exit."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    text = output.decode()
    assert process.returncode == 0, (
        f"jobrelay {' '.join(args)} exited {process.returncode}:\n{text}"
    )
    return text


def triples(rules: list[dict[str, Any]]) -> set[Triple]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


def documented_rules(name: str) -> list[dict[str, Any]]:
    """The cluster-wide ClusterRole's rules: worker_rules, then the bind rules."""
    rules = worker_rules([JOBS], create_namespaces=True)
    made: list[dict[str, Any]] = worker_access.account_objects(name, "jobrelay-system", rules)[
        "clusterRole"
    ]["rules"]
    return made


def kubectl_can_i(kubeconfig: dict[str, Any], *args: str) -> str:
    """`kubectl auth can-i ARGS` with ``kubeconfig``: "yes" or "no"."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "the e2e tests need kubectl on the PATH"
    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig") as handle:
        yaml.safe_dump(kubeconfig, handle)
        handle.flush()
        done = subprocess.run(
            [kubectl, "--kubeconfig", handle.name, "auth", "can-i", *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    return done.stdout.strip()


async def stored_kubeconfig(manager: ApiClient) -> dict[str, Any]:
    secret = await manager.get(
        SECRETS, workerclusters.secret_name(WORKER), namespace=workerclusters.DEFAULT_NAMESPACE
    )
    loaded: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    return loaded


@pytest.fixture
async def registered_with_service_account(
    fleet: FleetHandle, clients: dict[str, ApiClient]
) -> AsyncIterator[str]:
    """worker-1 registered with --create-service-account (twice: it is idempotent); the
    CLI's output. Registered with its admin kubeconfig again after."""
    args = (
        "clusters", "add", WORKER, "--kubeconfig", str(fleet.kubeconfig(WORKER)),
        "--create-service-account", "--label", FLEET_LABEL, "--kind", "Job.v1.batch",
        "--manager-kubeconfig", str(fleet.kubeconfig("manager")),
    )  # fmt: skip
    try:
        first = await cli(*args)
        token = (await stored_kubeconfig(clients["manager"]))["users"][0]["user"]["token"]
        again = await cli(*args)
        assert (await stored_kubeconfig(clients["manager"]))["users"][0]["user"]["token"] == token
        assert first == again
        yield first
    finally:
        await workerclusters.register(
            clients["manager"], WORKER, workerclusters.inline_kubeconfig(fleet.kubeconfig(WORKER)),
            labels=dict([FLEET_LABEL.split("=")]),
        )  # fmt: skip


async def policy_in_force(kubeconfig: dict[str, Any]) -> None:
    """Until the worker's apiserver enforces the account's admission policy."""

    async def refused() -> bool:
        try:
            await worker.create(
                JOBS, job_manifest("probe", suspend=True), namespace="default", dry_run=True
            )
        except ApiError as error:
            # The policy's refusal, not RBAC's (whose cache may lag the new binding).
            return error.code in (403, 422) and "ValidatingAdmissionPolicy" in str(error)
        return False

    async with ApiClient.from_kubeconfig_dict(kubeconfig, cluster=WORKER) as worker:
        await eventually(refused, timeout=30, what="the account's admission policy in force")


async def test_registered_with_a_service_account_token_and_never_the_admins(
    registered_with_service_account: str, fleet: FleetHandle, clients: dict[str, ApiClient]
) -> None:
    output = registered_with_service_account
    origin = await workerclusters.default_origin(clients["manager"])
    name = account_name(origin)  # one credential per manager
    account = WorkerAccount(name=name)
    for line in (
        "Namespace jobrelay-system", f"ServiceAccount jobrelay-system/{name}",
        f"ClusterRole {name}", f"ClusterRoleBinding {name}", f"ClusterRole {name}-namespaced",
        f"ValidatingAdmissionPolicy {name}", f"ValidatingAdmissionPolicyBinding {name}",
        f"Secret jobrelay-system/{name}-token",
        f"registered worker cluster {WORKER} as {account.username}",
    ):  # fmt: skip
        assert line in output, output
    stored = await stored_kubeconfig(clients["manager"])
    [user] = stored["users"]
    assert list(user["user"]) == ["token"]  # no client certificate, key or admin token
    admin = yaml.safe_load(fleet.kubeconfig(WORKER).read_text())
    assert stored["clusters"][0]["cluster"]["server"] == admin["clusters"][0]["cluster"]["server"]
    assert stored["clusters"][0]["cluster"]["certificate-authority-data"]
    assert user["user"]["token"] not in output  # the CLI names the Secret, never prints it

    async with ApiClient.from_kubeconfig_dict(stored, cluster=WORKER) as worker:
        review = await worker.create(
            RULES_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
             "spec": {"namespace": "default"}},
        )  # fmt: skip
        rules = review["status"]["resourceRules"]
        # One rule names its object: the one ClusterRole it may bind.
        assert [rule["resourceNames"] for rule in rules if rule.get("resourceNames")] == [
            [f"{name}-namespaced"]
        ]
        assert triples(rules) - EVERYONE == triples(documented_rules(name))

        async def allowed(
            verb: str, group: str, resource: str, namespace: str = "default", named: str = ""
        ) -> bool:
            attributes = {"verb": verb, "group": group, "resource": resource,
                          "namespace": namespace, "name": named}  # fmt: skip
            answer = await worker.create(
                ACCESS_REVIEWS,
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                 "spec": {"resourceAttributes": attributes}},
            )  # fmt: skip
            return bool(answer["status"]["allowed"])

        # No Secret of the worker's own, nor any listed everywhere: 403 from the worker, and
        # what kubectl says of the credential.
        for read in (
            worker.get(SECRETS, "any", namespace="kube-system"),
            worker.list(SECRETS, namespace="kube-system"),
            worker.list(SECRETS),
        ):
            with pytest.raises(ApiError) as refused:
                await read
            assert refused.value.code == 403, refused.value
        assert not await allowed("list", "", "secrets", namespace="")
        assert kubectl_can_i(stored, "list", "secrets", "--all-namespaces") == "no"
        assert kubectl_can_i(stored, "get", "secrets", "-n", "kube-system") == "no"
        # It binds only its namespaced ClusterRole, and escalates nothing.
        binds = ("bind", "rbac.authorization.k8s.io", "clusterroles", "")
        assert await allowed(*binds, named=f"{name}-namespaced")
        assert not await allowed(*binds, named="cluster-admin")
        assert not await allowed("escalate", "rbac.authorization.k8s.io", "clusterroles")

        table = {
            ("create", "batch", "jobs"): True,
            ("delete", "batch", "jobs"): True,
            ("update", "batch", "jobs"): False,
            ("patch", "batch", "jobs/status"): False,
            ("create", "", "namespaces"): True,
            ("list", "", "namespaces"): True,  # which are open to this manager
            ("update", "", "namespaces"): False,
            ("delete", "", "namespaces"): False,
            # The ConfigMaps, Secrets and ServiceAccounts workloads reference are copied
            # (docs/dependencies.md) only into namespaces opened to it, through a
            # RoleBinding there: none in "default".
            ("get", "", "secrets"): False,
            ("list", "", "secrets"): False,
            ("update", "", "configmaps"): False,
            ("create", "", "serviceaccounts"): False,
            ("create", "", "serviceaccounts/token"): False,
            ("create", "", "pods"): False,
            ("get", "", "pods"): False,
            ("get", "", "pods/log"): False,
            # The RoleBinding of an opened namespace (the admission policy keeps it there).
            ("create", "rbac.authorization.k8s.io", "rolebindings"): True,
            ("update", "rbac.authorization.k8s.io", "rolebindings"): False,
            # Capacity for placement: its Nodes and Pods are watched, never changed.
            ("list", "", "nodes"): True,
            ("watch", "", "pods"): True,
            ("patch", "", "nodes"): False,
            ("delete", "", "pods"): False,
            # Where data is, for placement: its PersistentVolumeClaims watched, never changed.
            ("list", "", "persistentvolumeclaims"): True,
            ("watch", "", "persistentvolumeclaims"): True,
            ("get", "", "persistentvolumeclaims"): False,
            ("create", "", "persistentvolumeclaims"): False,
            # Worker Events about mirrors and their pods, relayed to the manager: read only.
            ("watch", "", "events"): True,
            ("create", "", "events"): False,
            ("create", "rbac.authorization.k8s.io", "clusterrolebindings"): False,
        }
        answers = {request: await allowed(*request) for request in table}
        assert answers == table

        # RBAC allows Jobs anywhere; the worker's admission policy does not. The worker's
        # apiserver loads a new policy through an informer: for a moment after
        # `clusters add` a write it would refuse still passes. Wait for a dry run (which
        # stores nothing) to be refused by the policy before the real writes.
        await policy_in_force(stored)
        for namespace in ("default", "kube-system"):  # unlabelled; the worker's own
            stray = {**job_manifest("stray"), "metadata": {"name": "stray"}}
            with pytest.raises(ApiError) as refused:
                await worker.create(JOBS, stray, namespace=namespace)
            assert refused.value.code in (403, 422), refused.value
            assert "jobrelay" in str(refused.value), refused.value
            # Nor a copy of a workload's ConfigMap there.
            stray_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stray"}}
            with pytest.raises(ApiError) as refused:
                await worker.create(CONFIGMAPS, stray_map, namespace=namespace)
            assert refused.value.code in (403, 422), refused.value
            # Nor its namespaced ClusterRole bound there (it would read Secrets there).
            with pytest.raises(ApiError) as refused:
                await worker.create(
                    ROLE_BINDINGS,
                    worker_access.namespace_binding(name, "jobrelay-system", origin, namespace),
                    namespace=namespace,
                )
            assert refused.value.code in (403, 422), refused.value
            assert "jobrelay" in str(refused.value), refused.value


async def test_a_job_runs_on_a_worker_reached_only_with_the_token(
    registered_with_service_account: str,
    relay: Relay,
    make_namespace: NamespaceFactory,
    make_relay: Callable[[str], Awaitable[Relay]],
    clients: dict[str, ApiClient],
) -> None:
    # The controller reads the new Secret from the start (its Secret watch would reconnect
    # too, but a restart leaves no doubt which credential it holds).
    await relay.controller.restart(sig=signal.SIGTERM)
    # Only on the manager: jobrelay creates the namespace on the worker (namespaces create).
    namespace = await make_namespace(["manager"])
    on_manager = await make_relay(namespace)
    others = [worker for worker in relay.workers if worker != WORKER]
    # With a ConfigMap its pods mount and a Secret its env reads: copied with the token's
    # rights, into the namespace jobrelay created and bound its namespaced ClusterRole in.
    await clients["manager"].create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
         "data": {"mode": "fast"}},
        namespace=namespace,
    )  # fmt: skip
    await clients["manager"].create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
         "stringData": {"value": "s3cret"}},
        namespace=namespace,
    )  # fmt: skip
    manifest = job_manifest("with-token")
    pod = manifest["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "settings", "configMap": {"name": "settings"}}]
    pod["containers"][0]["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "token", "key": "value"}}}
    ]
    async with cordoned(clients["manager"], others):
        await on_manager.submit(manifest)
        done = await on_manager.verify("with-token", outcome="Complete")
    assert done.cluster == WORKER
    # Copied with the token's rights before the mirror was created (the copies go with the
    # finished mirror: the worker's garbage collector removes them).
    copied = {record.get("msg") for record in relay.controller.run_records()}
    for dependency in ("secret/token", "configmap/settings"):
        assert f"created copy of {dependency} in {namespace} on {WORKER}" in copied, dependency
    worker = clients[WORKER]
    origin = await workerclusters.default_origin(clients["manager"])
    name = account_name(origin)
    binding = await worker.get(ROLE_BINDINGS, name, namespace=namespace)
    assert binding["roleRef"]["name"] == f"{name}-namespaced"
