"""The controller on the manager with exactly the RBAC and admission policies deploy/ ships.

Every other e2e module runs jobrelay with the fleet's admin certificate. Here it
runs as the ServiceAccount ``jobrelay-system/jobrelay`` of ``deploy/rbac.yaml``
(a TokenRequest token, in a kubeconfig of its own), with ``deploy/namespace.yaml``,
``deploy/rbac.yaml`` and ``deploy/admission-policy.yaml`` applied as
``kubectl apply -k deploy/`` would: unmodified, but for the namespace the
kustomization sets on namespaced objects and on ServiceAccount subjects. So
anything the controller needs and the RBAC lacks shows up as a 403 in its log,
and both policies act on the identity they name.

The module starts its own controller (not the ``controller`` fixture): only one
controller of a name may run on the manager at a time, and modules run one
after another. Everything applied is deleted afterwards, the policies seen
lifted, except the namespace ``jobrelay-system``, which the fleet registers its
workers in.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.controller.options import lease_name_for
from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, LEASES, NAMESPACES, PODS, SECRETS
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, DEFAULT_CONTROLLER_NAME, FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.e2e.support import ControllerProcess, Relay, workers_connected
from tests.e2e.test_admission_policy import (
    DEPLOYED_CONTROLLER,
    PLACEMENT_REFUSAL,
    POD_REFUSAL,
    RUN_FOREVER,
    TOKEN_USER,
    applied,
    managed_job,
    pod_manifest,
    refused_by_policy,
    user_may_not_place,
)
from tests.e2e.test_jobset import JOBSETS, jobset_finished, jobset_manifest
from tests.e2e.test_pod_security import RESTRICTED, compliant_job, privileged_job
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

DEPLOY = Path(__file__).parents[2] / "deploy"
SHIPPED = ("namespace.yaml", "rbac.yaml")  # admission-policy.yaml: applied() of each policy
SERVICE_ACCOUNT = "jobrelay"
# Both kinds deploy/rbac.yaml has rules for (deploy/deployment.yaml's default is Jobs only).
CONTROLLER_KINDS = ["--kind", "Job.v1.batch", "--kind", JobSetKind.ref.name]

LEASE = lease_name_for(DEFAULT_CONTROLLER_NAME)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
RBAC = "rbac.authorization.k8s.io"
KINDS = {
    resource.kind: resource
    for resource in (
        NAMESPACES,
        SERVICE_ACCOUNTS,
        Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False),
        Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
        Resource(RBAC, "v1", "roles", "Role", namespaced=True),
        Resource(RBAC, "v1", "rolebindings", "RoleBinding", namespaced=True),
    )
}
# The TokenRequest subresource (POST .../serviceaccounts/NAME/token) as a creatable
# resource: ApiClient has no create on subresources, and only this test needs one.
TOKEN_REQUESTS = Resource(
    "", "v1", f"serviceaccounts/{SERVICE_ACCOUNT}/token", "TokenRequest", namespaced=True
)
# An apiserver refusal anywhere in the controller's log (its ApiError "403 Forbidden: ...",
# the apiserver's '... is forbidden: User ... cannot ...').
_REFUSED = re.compile(r"\b403\b|forbidden", re.IGNORECASE)
# Log fields that are no message (a timestamp may hold ".403").
_NOT_MESSAGES = frozenset({"time", "ts", "timestamp", "asctime", "created"})
# Kubernetes' Pod Security verdict on the privileged Job's dry-run Pod is a 403 the test
# asks for; the only one allowed.
_POD_SECURITY_VERDICT = 'violates PodSecurity "restricted'


def shipped_documents(file: str) -> list[dict[str, Any]]:
    """The objects of ``deploy/FILE`` as ``kubectl apply -k deploy/`` creates them."""
    documents = [doc for doc in yaml.safe_load_all((DEPLOY / file).read_text()) if doc]
    for doc in documents:
        if KINDS[doc["kind"]].namespaced:
            doc["metadata"]["namespace"] = DEFAULT_NAMESPACE
        for subject in doc.get("subjects") or ():
            if subject["kind"] == "ServiceAccount":
                subject.setdefault("namespace", DEFAULT_NAMESPACE)
    return documents


async def apply(manager: ApiClient, doc: dict[str, Any]) -> None:
    await manager.patch(
        KINDS[doc["kind"]], doc["metadata"]["name"], doc,
        namespace=doc["metadata"].get("namespace"), patch_type=PatchType.APPLY,
        field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip


async def granted(request: Awaitable[object]) -> bool:
    """False while RBAC refuses the request; NotFound counts as granted."""
    try:
        await request
    except ApiError as error:
        if error.code == 403:
            return False
        if not error.is_not_found:
            raise
    return True


def manager_kubeconfig(fleet: FleetHandle, token: str) -> dict[str, Any]:
    """A kubeconfig for the manager with its CA inline and the ServiceAccount's token."""
    admin = yaml.safe_load(fleet.kubeconfig("manager").read_text())
    cluster = admin["clusters"][0]["cluster"]
    ca = (fleet.kubeconfig("manager").parent / cluster["certificate-authority"]).read_bytes()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "manager",
                "cluster": {
                    "server": cluster["server"],
                    "certificate-authority-data": base64.b64encode(ca).decode(),
                },
            }
        ],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [
            {"name": "manager", "context": {"cluster": "manager", "user": SERVICE_ACCOUNT}}
        ],
        "current-context": "manager",
    }


def refusals_in_log(process: ControllerProcess) -> list[str]:
    """Every log line with a 403 or "forbidden", but for the Pod Security verdicts asked for."""
    found = []
    for line in process.log_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            text = json.dumps({k: v for k, v in record.items() if k not in _NOT_MESSAGES})
        else:
            text = line
        if _REFUSED.search(text) and _POD_SECURITY_VERDICT not in text:
            found.append(line)
    return found


@pytest.fixture
async def shipped_rbac(clients: dict[str, ApiClient]) -> AsyncIterator[None]:
    """deploy/namespace.yaml and deploy/rbac.yaml applied; deleted after, but the namespace."""
    manager = clients["manager"]
    documents = [doc for file in SHIPPED for doc in shipped_documents(file)]
    try:
        for doc in documents:
            await apply(manager, doc)
        yield
    finally:
        for doc in reversed(documents):
            if doc["kind"] == "Namespace":  # the fleet's: its WorkerCluster Secrets live there
                continue
            with contextlib.suppress(ApiError):
                await manager.delete(
                    KINDS[doc["kind"]], doc["metadata"]["name"],
                    namespace=doc["metadata"].get("namespace"),
                )  # fmt: skip


@pytest.fixture
async def service_account_token(shipped_rbac: None, clients: dict[str, ApiClient]) -> str:
    """A token of the controller's ServiceAccount, from the TokenRequest API."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = await clients["manager"].create(TOKEN_REQUESTS, request, namespace=DEFAULT_NAMESPACE)
    token: str = answer["status"]["token"]
    return token


@pytest.fixture
def controller_kubeconfig(service_account_token: str, fleet: FleetHandle, tmp_path: Path) -> Path:
    """A kubeconfig file for the manager: its CA inline and the ServiceAccount's token."""
    path = tmp_path / "jobrelay-sa.kubeconfig"
    path.touch(mode=0o600)  # private before the token is written into it
    path.write_text(yaml.safe_dump(manager_kubeconfig(fleet, service_account_token)))
    return path


@pytest.fixture
async def as_controller(controller_kubeconfig: Path, namespace: str) -> AsyncIterator[ApiClient]:
    """The manager as the controller's ServiceAccount, once its RBAC is in force."""
    async with ApiClient.from_kubeconfig(controller_kubeconfig, cluster="manager-sa") as client:

        async def in_force() -> bool:
            # One rule of each binding: the ClusterRole's last, and both Roles.
            probe = pod_manifest("rbac-probe")
            return (
                await granted(client.create(PODS, probe, namespace=namespace, dry_run=True))
                and await granted(client.list(SECRETS, namespace=DEFAULT_NAMESPACE))
                and await granted(client.get(LEASES, LEASE, namespace=DEFAULT_NAMESPACE))
            )

        await eventually(in_force, timeout=60, what="deploy/rbac.yaml in force")
        yield client


@pytest.fixture
async def shipped_policies(
    clients: dict[str, ApiClient], as_controller: ApiClient, user: ApiClient, namespace: str
) -> AsyncIterator[None]:
    """Both policies of deploy/admission-policy.yaml, as shipped, in force; lifted after."""
    manager = clients["manager"]

    async def placement_refused() -> bool:
        return await user_may_not_place(user, namespace)

    async def controller_may_not_run_pods() -> bool:
        try:
            await as_controller.create(PODS, pod_manifest("policy-probe"), namespace=namespace)
        except ApiError as error:
            if refused_by_policy(error, POD_REFUSAL):
                return True
            raise
        await manager.delete(PODS, "policy-probe", namespace=namespace, grace_period_seconds=0)
        return False

    async with (
        applied(manager, "jobrelay-placement", DEPLOYED_CONTROLLER, placement_refused),
        applied(
            manager, "jobrelay-pods-dry-run-only", DEPLOYED_CONTROLLER, controller_may_not_run_pods
        ),
    ):
        yield


@pytest.fixture
async def deployed_controller(
    shipped_policies: None,
    controller_kubeconfig: Path,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    tmp_path: Path,
) -> AsyncIterator[ControllerProcess]:
    """``jobrelay run`` as the ServiceAccount; stopped by PID whatever happens."""
    process = ControllerProcess(
        controller_kubeconfig,
        tmp_path / "controller.log",
        workers=fleet.workers,
        extra_args=CONTROLLER_KINDS,
    )
    try:
        await process.start(clients["manager"])  # clears WorkerCluster status as the admin
        await process.wait_ready(clients["manager"])
        yield process
        await process.stop()  # SIGTERM by PID; must exit 0
        # Also when a step failed first: a refusal in the log is the likeliest cause.
        refusals = refusals_in_log(process)
        assert not refusals, "the controller was refused:\n" + "\n".join(refusals[:20])
    finally:
        if process.running:
            await process.kill()


async def test_the_controller_works_with_the_shipped_rbac_and_policies(
    deployed_controller: ControllerProcess,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    user: ApiClient,
    namespace: str,
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
    service_account_token: str,
) -> None:
    process, manager = deployed_controller, clients["manager"]

    # Ready: caches synced and every worker Connected, as written by the ServiceAccount.
    await eventually(
        lambda: workers_connected(manager, fleet.workers), timeout=60, what="workers Connected"
    )
    ready = await eventually(
        _record_of(process, "ready"), timeout=60, what="the controller's readiness log line"
    )
    assert any(r.get("event") == "synced" for r in process.run_records()), ready

    async with Relay(clients, fleet.workers, namespace, process) as relay:
        # A managed Job is placed, dispatched, completes; status and Events written back.
        await relay.submit(job_manifest("runs"))
        done = await relay.verify("runs", outcome="Complete")  # checks the Dispatched Event
        assert done.cluster in fleet.workers

        # Only the controller places: a user may not move the Job it placed.
        await user.create(
            JOBS, managed_job("moved", {"team": "a"}, template_annotations=RUN_FOREVER),
            namespace=namespace,
        )  # fmt: skip
        placed = await relay.wait_placed("moved")
        other = next(worker for worker in fleet.workers if worker != placed)
        with pytest.raises(ApiError) as refused:
            await user.patch(
                JOBS, "moved", {"metadata": {"annotations": {CLUSTER_ANNOTATION: other}}},
                namespace=namespace,
            )  # fmt: skip
        assert refused_by_policy(refused.value, PLACEMENT_REFUSAL), refused.value
        assert f"may not be set or changed by {TOKEN_USER}" in refused.value.message
        kept = await user.patch(
            JOBS, "moved", {"metadata": {"annotations": {"team": "b"}}}, namespace=namespace
        )
        assert kept["metadata"]["annotations"][CLUSTER_ANNOTATION] == placed
        await relay.wait_active("moved")
        await user.delete(JOBS, "moved", namespace=namespace)
        await relay.wait_gone("moved")

    # A JobSet too: its rules (jobsets, jobsets/status) are granted as well.
    async with Relay(
        clients, fleet.workers, namespace, process, resource=JOBSETS, is_finished=jobset_finished
    ) as jobsets:
        await jobsets.submit(jobset_manifest("set", duration="200ms", leader=False, replicas=1))
        finished = await jobsets.wait_finished("set", timeout=90)
        assert is_true(finished, "Completed"), finished.get("status")
        await jobsets.wait_event(
            finished["metadata"]["uid"],
            lambda e: e.get("reason") == "Dispatched",
            what="a Dispatched Event on the JobSet",
        )

    # Pod Security: the dry-run Pod create is granted and passes the dry-run-only policy,
    # and the manager's verdict keeps a privileged Job off every worker.
    restricted = await make_namespace(["manager"])
    await manager.patch(NAMESPACES, restricted, {"metadata": {"labels": RESTRICTED}})
    async with Relay(clients, fleet.workers, restricted, process) as relay:
        held = await relay.submit(privileged_job("privileged"))
        event = await relay.wait_event(
            held["metadata"]["uid"],
            lambda e: e.get("reason") == "PodSecurityViolation",
            timeout=60,
            what="a PodSecurityViolation Warning",
        )
        assert event["type"] == "Warning", event
        assert 'violates PodSecurity "restricted:latest"' in event["message"], event["message"]
        await relay.submit(compliant_job("compliant"))
        await relay.verify("compliant", outcome="Complete")
        still = await relay.get("privileged")
        assert CLUSTER_ANNOTATION not in (still["metadata"].get("annotations") or {})
        for worker in fleet.workers:
            assert relay.jobs_named("privileged", worker) == [], f"it reached {worker}"
    # The verdicts were dry runs: the manager stores no Pod of the controller's.
    assert (await manager.list(PODS, namespace=restricted)).items == []

    # The ServiceAccount was refused nothing (an RBAC gap would be a 403 here).
    process.assert_alive()
    process.assert_clean_log()
    refusals = refusals_in_log(process)
    assert not refusals, "the controller was refused:\n" + "\n".join(refusals[:20])
    assert service_account_token not in process.log_text()


def _record_of(
    process: ControllerProcess, event: str
) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def found() -> dict[str, Any] | None:
        return next((r for r in process.run_records() if r.get("event") == event), None)

    return found
