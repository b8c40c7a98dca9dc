"""The chart installed as shipped, and the controller run the way its pod would run it.

``helm template`` of ``charts/jobrelay`` (a real Helm, the one ``jobrelay fleet build``
builds) into the namespace ``relay-ops`` (not ``jobrelay-system``: nothing may name
that by itself; the CLI finds it with no flag) with the Job and JobSet kinds. Every rendered object but the
Deployment is applied to the local manager as rendered (its CRDs too; kinds whose
CRDs the manager lacks, the monitoring and cert-manager ones, are left out and
named); the namespace is created as ``helm install --create-namespace`` would,
labelled to enforce Pod Security ``restricted``, and the workers' kubeconfig
Secrets are copied into it as ``jobrelay clusters add --namespace`` would.

Then the Deployment's container runs under bubblewrap (``tests/e2e/podsandbox.py``):
its args and env (fieldRefs resolved: POD_IP=127.0.0.1), uid/gid 65532 in a user
namespace without capabilities, the root filesystem read-only, only the chart's
volumes writable (a 16 MiB tmpfs at /tmp), and
in-cluster credentials of the chart's ServiceAccount (a TokenRequest token, the
manager's CA and the namespace at /var/run/secrets/kubernetes.io/serviceaccount,
KUBERNETES_SERVICE_HOST/PORT the manager's). It must become ready (/readyz), lead
(the Lease), relay a Job and a JobSet, and serve its aggregated API with the
certificate it made (selfSigned: the chart renders no Secret and no caBundle): the
chart's APIService (caBundle: written by the leader, the Secret's ca.crt) becomes
Available once the chart's Service reaches the sandbox (an FQDN EndpointSlice naming
127.0.0.1, as `jobrelay run --api-register` makes), and a user's logs request through
the manager's apiserver is served; straight to the port without the front-proxy
certificate it is refused. Through the chart's managedBy webhook (the same Service
and CA), a plain Job in a namespace labelled ``jobrelay.dev/relay: enabled`` is
relayed. Any 403 in its log is an RBAC gap of the chart;
the chart's admission policies are in force and act on the identity they name.

The chart's ports are set to free ones (the sandbox shares the host's network,
where other fleets run). Separately: the rendered pod template, as a Pod, passes a
server-side dry run in a namespace enforcing ``restricted``, and is refused there
without its seccompProfile (so the check bites).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from jobrelay.controller.options import lease_name_for
from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE, secret_name
from jobrelay.kinds.jobset import JobSetKind
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import (
    API_SERVICES,
    ENDPOINT_SLICES,
    JOBS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NAMESPACES,
    PODS,
    SECRETS,
    SUBJECT_ACCESS_REVIEWS,
    WORKER_CLUSTERS,
)
from jobrelay.localfleet import ports
from jobrelay.localfleet.binaries import BinaryError, resolver
from jobrelay.relayapi.managedby_webhook_rules import RELAY_ENABLED, RELAY_LABEL
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME, local_endpoints
from jobrelay.vocabulary.names import CLUSTER_ANNOTATION, DEFAULT_CONTROLLER_NAME, FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource
from tests.chart_render import KUBE_VERSION
from tests.conftest import FleetHandle
from tests.e2e.aggregated import webhook_in_force
from tests.e2e.podsandbox import PodFacts, PodFiles, SandboxedPod, host_tree, pod_command
from tests.e2e.support import ControllerProcess, Relay, workers_connected
from tests.e2e.test_admission_policy import (
    PLACEMENT_REFUSAL,
    POD_REFUSAL,
    RUN_FOREVER,
    TOKEN_USER,
    managed_job,
    pod_manifest,
    refused_by_policy,
    user_may_not_place,
)
from tests.e2e.test_jobset import JOBSETS, jobset_finished, jobset_manifest
from tests.e2e.test_pod_security import RESTRICTED, compliant_job, privileged_job
from tests.e2e.test_remote_logs import logs_path
from tests.e2e.test_worker_service_account import kubectl_can_i
from tests.kubetools import eventually, is_true, job_manifest

pytestmark = pytest.mark.e2e

CHART = Path(__file__).parents[2] / "charts" / "jobrelay"
SOURCE = Path(__file__).parents[2] / "src"
RELEASE = "shipped"
CHART_NAMESPACE = "relay-ops"
KINDS = [
    {"name": "Job.v1.batch", "resource": "jobs"},
    {"name": JobSetKind.ref.name, "resource": JobSetKind.ref.plural},
]
# Rendered only with their operators' CRDs, which the local manager does not have.
NOT_ON_THE_MANAGER = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "Certificate", "Issuer"}
LEASE = lease_name_for(DEFAULT_CONTROLLER_NAME)
# The selfSigned certificate's Secret, made by the controller (--api-cert-secret).
API_SECRET = f"{RELEASE}-jobrelay-api-tls"
# The image's entrypoint `jobrelay`: this interpreter with the checkout's package.
ENTRYPOINT = (sys.executable, "-m", "jobrelay")
# What the image holds: this interpreter, its venv and the source (a CI clone may be
# under /tmp, where the chart's emptyDir goes).
IMAGE_PATHS = (sys.base_prefix, sys.prefix, str(SOURCE))
POLICIES = "validatingadmissionpolicies"
# An apiserver refusal anywhere in the controller's log (its ApiError "403 Forbidden: ...",
# the apiserver's '... is forbidden: User ... cannot ...').
_REFUSED = re.compile(r"\b403\b|forbidden", re.IGNORECASE)
# Log fields that are no message (a timestamp may hold ".403").
_NOT_MESSAGES = frozenset({"time", "ts", "timestamp", "asctime", "created"})
# Kubernetes' Pod Security verdict on the privileged Job's dry-run Pod is a 403 the test
# asks for; the only one allowed.
_POD_SECURITY_VERDICT = 'violates PodSecurity "restricted'
# The namespace lifecycle plugin answers 403 for a namespace being deleted (an earlier
# module's, its Jobs still in the cache): not an authorization refusal.
_NAMESPACE_TERMINATING = "because it is being terminated"


# -- the chart, rendered ----------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    documents: list[dict[str, Any]]
    health_port: int
    metrics_port: int
    api_port: int

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [
            d
            for d in self.documents
            if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
        ]
        assert len(found) == 1, f"{len(found)} {kind} {name or ''} rendered"
        return found[0]

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def service_account(self) -> str:
        return str(self.one("ServiceAccount")["metadata"]["name"])

    @property
    def api_secret(self) -> dict[str, Any] | None:
        """The API certificate's Secret as rendered: none with the selfSigned source (the
        controller makes its own, API_SECRET)."""
        volumes = self.deployment["spec"]["template"]["spec"]["volumes"]
        names = [v["secret"]["secretName"] for v in volumes if v["name"] == "api-tls"]
        found = [d for d in self.documents if d["kind"] == "Secret"
                 and d["metadata"]["name"] in names]  # fmt: skip
        return found[0] if found else None


def render_chart(
    directory: Path, namespace: str = CHART_NAMESPACE, api: dict[str, Any] | None = None
) -> Rendered:
    """``helm template`` of the chart, with the Job and JobSet kinds and free ports (and
    ``api``'s values besides the port)."""
    try:
        helm = resolver.resolve_tools(build=False).helm
    except BinaryError as error:  # CI builds it first: a missing helm fails, never skips
        pytest.fail(str(error))
    health, metrics, api_port = ports.pick(3)
    values = directory / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "kinds": KINDS,
                "health": {"port": health},
                "monitoring": {"port": metrics},
                "api": {**(api or {}), "port": api_port},
            }
        )
    )
    answer = subprocess.run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", namespace,
         "--kube-version", KUBE_VERSION, "--include-crds", "--values", str(values)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert answer.returncode == 0, f"helm template failed: {answer.stderr}"
    documents = [doc for doc in yaml.safe_load_all(answer.stdout) if doc]
    return Rendered(documents, health, metrics, api_port)


@pytest.fixture
def rendered(tmp_path: Path) -> Rendered:
    return render_chart(tmp_path)


# -- applying it ------------------------------------------------------------------------


async def resource_of(manager: ApiClient, doc: dict[str, Any]) -> Resource | None:
    """The resource of ``doc``'s kind from discovery; None when the manager does not serve it."""
    group, _, version = doc["apiVersion"].rpartition("/")
    try:
        served = await manager.discover(group, version)
    except ApiError as error:
        if error.is_not_found:
            return None
        raise
    for item in served:
        if item.get("kind") == doc["kind"] and "/" not in item["name"]:
            return Resource(group, version, item["name"], doc["kind"], bool(item["namespaced"]))
    return None


async def apply(manager: ApiClient, resource: Resource, doc: dict[str, Any]) -> None:
    await manager.patch(
        resource, doc["metadata"]["name"], doc, namespace=doc["metadata"].get("namespace"),
        patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip


@dataclass
class Installed:
    applied: list[tuple[str, str]]  # (kind, name) of every object applied, in order
    left_out: list[str]  # kinds rendered but not served by the manager


async def gone(manager: ApiClient, resource: Resource, name: str) -> bool:
    try:
        await manager.get(resource, name)
    except ApiError as error:
        if error.is_not_found:
            return True
        raise
    return False


@pytest.fixture
async def installed(
    rendered: Rendered, clients: dict[str, ApiClient], fleet: FleetHandle
) -> AsyncIterator[Installed]:
    """Every rendered object but the Deployment applied; removed after (the CRDs stay:
    the fleet's own is the same)."""
    manager = clients["manager"]
    # One left by an earlier run (even one stopped before its teardown) is removed first.
    with contextlib.suppress(ApiError):
        await manager.delete(NAMESPACES, CHART_NAMESPACE)
    await eventually(lambda: gone(manager, NAMESPACES, CHART_NAMESPACE), timeout=120,
                     what=f"namespace {CHART_NAMESPACE} gone")  # fmt: skip
    namespace = {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": CHART_NAMESPACE, "labels": RESTRICTED},
    }  # fmt: skip
    await manager.create(NAMESPACES, namespace)
    applied: list[tuple[Resource, dict[str, Any]]] = []
    left_out: list[str] = []
    try:
        for worker in fleet.workers:  # as `jobrelay clusters add --namespace` would
            secret = await manager.get(SECRETS, secret_name(worker), namespace=DEFAULT_NAMESPACE)
            copied = {
                "apiVersion": "v1", "kind": "Secret", "type": secret.get("type", "Opaque"),
                "metadata": {"name": secret_name(worker), "namespace": CHART_NAMESPACE},
                "data": secret["data"],
            }  # fmt: skip
            await manager.create(SECRETS, copied, namespace=CHART_NAMESPACE)
        for doc in rendered.documents:
            if doc["kind"] == "Deployment":
                continue
            resource = await resource_of(manager, doc)
            if resource is None:
                left_out.append(doc["kind"])
                continue
            await apply(manager, resource, doc)
            applied.append((resource, doc))
        yield Installed([(d["kind"], d["metadata"]["name"]) for _, d in applied], left_out)
    finally:
        for resource, doc in reversed(applied):
            if doc["kind"] == "CustomResourceDefinition":
                continue
            with contextlib.suppress(ApiError):
                await manager.delete(
                    resource, doc["metadata"]["name"], namespace=doc["metadata"].get("namespace")
                )
        with contextlib.suppress(ApiError):
            await manager.delete(NAMESPACES, CHART_NAMESPACE)


# -- the pod ----------------------------------------------------------------------------


def manager_ca_and_address(fleet: FleetHandle) -> tuple[bytes, str, int]:
    path = fleet.kubeconfig("manager")
    cluster = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]
    ca = (path.parent / cluster["certificate-authority"]).read_bytes()
    server = urlsplit(cluster["server"])
    assert server.hostname and server.port, cluster["server"]
    return ca, server.hostname, server.port


@pytest.fixture
async def service_account_token(
    installed: Installed, rendered: Rendered, clients: dict[str, ApiClient]
) -> str:
    """A token of the chart's ServiceAccount (the TokenRequest API, as the kubelet's projection)."""
    requests = Resource(
        "", "v1", f"serviceaccounts/{rendered.service_account}/token", "TokenRequest",
        namespaced=True,
    )  # fmt: skip
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = await clients["manager"].create(requests, request, namespace=CHART_NAMESPACE)
    token: str = answer["status"]["token"]
    return token


@pytest.fixture
async def policies_in_force(
    installed: Installed,
    service_account_token: str,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    user: ApiClient,
    namespace: str,
) -> AsyncIterator[None]:
    """The chart's two admission policies acting on the identity they name; lifted after."""
    assert ("ValidatingAdmissionPolicy", "jobrelay-placement") in installed.applied
    ca, host, port = manager_ca_and_address(fleet)
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "m", "cluster": {
            "server": f"https://{host}:{port}",
            "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "users": [{"name": "sa", "user": {"token": service_account_token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "m", "user": "sa"}}],
    }  # fmt: skip
    manager = clients["manager"]
    async with ApiClient.from_kubeconfig_dict(config, cluster="manager-sa") as as_controller:

        async def controller_may_not_run_pods() -> bool:
            try:
                await as_controller.create(PODS, pod_manifest("policy-probe"), namespace=namespace)
            except ApiError as error:
                if refused_by_policy(error, POD_REFUSAL):
                    return True
                if error.code == 403:  # RBAC not in force yet
                    return False
                raise
            await manager.delete(PODS, "policy-probe", namespace=namespace, grace_period_seconds=0)
            return False

        async def in_force() -> bool:
            return await user_may_not_place(user, namespace) and await controller_may_not_run_pods()

        await eventually(in_force, timeout=60, what="the chart's admission policies in force")
        try:
            yield
        finally:
            # The fixture `installed` deletes them; later modules need them lifted.
            async def lifted() -> bool:
                return not await user_may_not_place(user, namespace)

            with contextlib.suppress(ApiError):
                for name in ("jobrelay-placement", "jobrelay-pods-dry-run-only"):
                    await manager.delete(
                        Resource("admissionregistration.k8s.io", "v1", POLICIES,
                                 "ValidatingAdmissionPolicy", namespaced=False), name,
                    )  # fmt: skip
            await eventually(lifted, timeout=60, what="the placement policy lifted")


@contextlib.asynccontextmanager
async def running_pod(
    deployment: dict[str, Any],
    rendered: Rendered,
    token: str,
    fleet: FleetHandle,
    manager: ApiClient,
    directory: Path,
) -> AsyncIterator[SandboxedPod]:
    """``deployment``'s container, running as its pod would; stopped by PID whatever happens."""
    ca, host, port = manager_ca_and_address(fleet)
    files = PodFiles(directory / "pod")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    # The Secret as stored, the kubelet's source (selfSigned: no volume, none).
    secret_dirs = {
        volume["name"]: files.secret_volume(volume, await manager.get(
            SECRETS, volume["secret"]["secretName"], namespace=CHART_NAMESPACE))
        for volume in volumes if volume["name"] == "api-tls"
    }  # fmt: skip
    facts = PodFacts(
        name=f"{RELEASE}-jobrelay-{uuid.uuid4().hex[:10]}-{uuid.uuid4().hex[:5]}",
        namespace=CHART_NAMESPACE,
        ip="127.0.0.1",
        service_host=host,
        service_port=port,
        entrypoint=ENTRYPOINT,
        image_env={"PYTHONPATH": str(SOURCE), "PYTHONUNBUFFERED": "1"},
        image_paths=IMAGE_PATHS,
    )
    command = pod_command(
        deployment,
        facts,
        secret_dirs=secret_dirs,
        service_account_dir=files.service_account(token, ca, CHART_NAMESPACE),
        tree=host_tree(),
    )
    process = SandboxedPod(command, ENTRYPOINT, directory / "controller.log", workers=fleet.workers)
    try:
        await process.start(manager)  # clears WorkerCluster status as the admin
        await process.wait_ready(manager)
        yield process
        await process.stop()  # SIGTERM by PID; must exit 0
        refusals = refusals_in_log(process)
        assert not refusals, "the controller was refused:\n" + "\n".join(refusals[:20])
    finally:
        if process.running:
            await process.kill()


@pytest.fixture
async def pod(
    policies_in_force: None,
    rendered: Rendered,
    service_account_token: str,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    tmp_path: Path,
) -> AsyncIterator[SandboxedPod]:
    """The chart's Deployment, running as its pod would."""
    async with running_pod(
        rendered.deployment, rendered, service_account_token, fleet, clients["manager"], tmp_path
    ) as process:
        yield process


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
        if (
            _REFUSED.search(text)
            and _POD_SECURITY_VERDICT not in text
            and _NAMESPACE_TERMINATING not in text
        ):
            found.append(line)
    return found


async def http_get(
    port: int,
    path: str,
    *,
    tls: ssl.SSLContext | None = None,
    server_name: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One HTTP/1.1 GET to 127.0.0.1:``port`` (TLS verified as ``server_name``): status, body."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls, server_hostname=server_name if tls else None
    )
    try:
        lines = [f"GET {path} HTTP/1.1", "Host: localhost", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        body = _unchunked(body)
    return status, body


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out


# -- the tests --------------------------------------------------------------------------


async def test_the_controller_runs_as_its_pod_would(
    pod: SandboxedPod,
    installed: Installed,
    rendered: Rendered,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    user: ApiClient,
    namespace: str,
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
    service_account_token: str,
) -> None:
    process, manager = pod, clients["manager"]
    # Everything the chart renders by default was applied, but the Deployment.
    kinds = {kind for kind, _ in installed.applied}
    assert {
        "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
        "Role", "RoleBinding", "Service", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    } <= kinds, kinds  # fmt: skip
    assert set(installed.left_out) <= NOT_ON_THE_MANAGER, installed.left_out

    # Ready (/readyz on the chart's health port) and leading (the Lease in its namespace).
    health = await eventually(
        lambda: leading(rendered), timeout=60, what="/readyz 200 as the leader"
    )
    lease = await manager.get(LEASES, LEASE, namespace=CHART_NAMESPACE)
    assert lease["spec"]["holderIdentity"] == health["identity"], (lease["spec"], health)
    await eventually(
        lambda: workers_connected(manager, fleet.workers), timeout=60, what="workers Connected"
    )

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
        await relay.wait_active("moved")

        # The aggregated API, with the one certificate the controller made in its Secret
        # (the chart renders none): the leader wrote its CA into the chart's APIService
        # and webhook, served through the manager's apiserver.
        assert rendered.api_secret is None
        secret_ca = await api_secret_ca(manager)
        registration = await eventually(
            lambda: with_ca_bundle(manager, secret_ca), timeout=60,
            what="the APIService's caBundle written by the leader",
        )  # fmt: skip
        assert registration["spec"]["service"] == {
            "namespace": CHART_NAMESPACE, "name": f"{RELEASE}-jobrelay-api", "port": 443,
        }  # fmt: skip
        await reach_the_sandbox(manager, rendered)
        logs = logs_path(namespace, "moved")
        text = await eventually(
            lambda: logs_through_the_manager(user, logs), timeout=60,
            what="the logs through the APIService",
        )  # fmt: skip
        assert text, "an empty log"
        service = f"{RELEASE}-jobrelay-api.{CHART_NAMESPACE}.svc"
        tls = ssl.create_default_context(cadata=secret_ca)
        status, _ = await http_get(rendered.api_port, logs, tls=tls, server_name=service)
        assert status == 401  # straight to the port: no front-proxy certificate
        await cli_finds_the_controller_unaided(fleet, manager, namespace, "moved")
        await user.delete(JOBS, "moved", namespace=namespace)
        await relay.wait_gone("moved")

        # The chart's managedBy webhook (the API's Service and CA, failurePolicy Fail),
        # served by the pod: a plain Job in a namespace labelled enabled is relayed.
        webhooks = await manager.get(
            MUTATING_WEBHOOK_CONFIGURATIONS, f"{RELEASE}-jobrelay-managedby"
        )
        assert {w["failurePolicy"] for w in webhooks["webhooks"]} == {"Fail"}
        assert {base64.b64decode(w["clientConfig"]["caBundle"]).decode()
                for w in webhooks["webhooks"]} == {secret_ca}  # fmt: skip
        enabled = {"metadata": {"labels": {RELAY_LABEL: RELAY_ENABLED}}}
        await manager.patch(NAMESPACES, namespace, enabled)
        try:
            # The apiserver sees the new label through its namespace informer: wait for it
            # (CI under load once created the Job before, and it came back undefaulted).
            await webhook_in_force(
                manager, JOBS, namespace, job_manifest("probe"),
                lambda job: job["spec"].get("managedBy") == DEFAULT_CONTROLLER_NAME,
            )  # fmt: skip
            created = await relay.submit(job_manifest("plain"), managed=False)
            assert created["spec"]["managedBy"] == DEFAULT_CONTROLLER_NAME
            await relay.verify("plain", outcome="Complete")
        finally:
            # Once the pod stops, Fail refuses the Jobs of an enabled namespace: the
            # teardown's policy probes create some here.
            unlabelled = {"metadata": {"labels": {RELAY_LABEL: None}}}
            await manager.patch(NAMESPACES, namespace, unlabelled)

    # A JobSet too: its rules (jobsets, jobsets/status) are granted as well.
    async with Relay(
        clients, fleet.workers, namespace, process, resource=JOBSETS, is_finished=jobset_finished
    ) as jobsets:
        await jobsets.submit(jobset_manifest("set", duration="200ms", leader=False, replicas=1))
        finished = await jobsets.wait_finished("set", timeout=90)
        assert is_true(finished, "Completed"), finished.get("status")

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
        assert 'violates PodSecurity "restricted:latest"' in event["message"], event["message"]
        await relay.submit(compliant_job("compliant"))
        await relay.verify("compliant", outcome="Complete")
    assert (await manager.list(PODS, namespace=restricted)).items == []

    process.assert_alive()
    process.assert_clean_log()
    refusals = refusals_in_log(process)
    assert not refusals, "the controller was refused:\n" + "\n".join(refusals[:20])
    assert service_account_token not in process.log_text()


async def cli_finds_the_controller_unaided(
    fleet: FleetHandle, manager: ApiClient, namespace: str, running: str
) -> None:
    """The operator's CLI with no --namespace and no $JOBRELAY_NAMESPACE: `clusters add`
    re-adds a worker (its Secret as stored, its labels) and the Secret lands in the
    chart's namespace, where the controller reads it; `version` reads the Lease there;
    `get` and `logs` of the ``running`` Job work, the workload's namespace being the
    kubeconfig context's."""
    worker = fleet.workers[0]
    registration = await manager.get(WORKER_CLUSTERS, worker)
    labels = registration["metadata"].get("labels") or {}
    stored = await manager.get(SECRETS, secret_name(worker), namespace=CHART_NAMESPACE)
    assert "jobrelay.dev/worker" not in (stored["metadata"].get("labels") or {})  # the copy
    manager_file = fleet.kubeconfig("manager")
    document = yaml.safe_load(manager_file.read_text())
    current = next(c for c in document["contexts"] if c["name"] == document["current-context"])
    with tempfile.TemporaryDirectory() as directory:
        worker_file = Path(directory) / "worker.kubeconfig"
        worker_file.write_bytes(base64.b64decode(stored["data"]["kubeconfig"]))
        # The operator's context names the workloads' namespace (kubectl's habit); the
        # manager's file, after it, gives the cluster and the credentials.
        overlay = Path(directory) / "context.kubeconfig"
        overlay.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "ops",
            "contexts": [{"name": "ops", "context": {**current["context"], "namespace": namespace}}],
        }))  # fmt: skip
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("JOBRELAY_NAMESPACE", "JOBRELAY_KUBECONFIG")
        }
        env.update(PYTHONPATH=str(SOURCE), KUBECONFIG=f"{overlay}:{manager_file}")

        async def jobrelay(*args: str) -> tuple[int, str, str]:
            process = await asyncio.create_subprocess_exec(
                *ENTRYPOINT, *args, env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(60):
                out, err = await process.communicate()
            assert process.returncode is not None
            return process.returncode, out.decode(), err.decode()

        label_flags = [flag for k, v in labels.items() for flag in ("--label", f"{k}={v}")]
        code, out, err = await jobrelay(
            "clusters", "add", worker, "--worker-kubeconfig", str(worker_file), *label_flags
        )
        assert code == 0, out + err
        assert f"Secret {CHART_NAMESPACE}/{secret_name(worker)}" in err, err
        written = await manager.get(SECRETS, secret_name(worker), namespace=CHART_NAMESPACE)
        assert written["metadata"]["labels"]["jobrelay.dev/worker"] == worker
        await eventually(
            lambda: workers_connected(manager, fleet.workers), timeout=60, what="workers Connected"
        )
        code, out, err = await jobrelay("version")
        assert code == 0 and f"Lease {CHART_NAMESPACE}/{LEASE})" in out, out + err
        code, out, err = await jobrelay("get", "job", running, "-o", "name")
        assert (code, out, err) == (0, f"job.batch/{running}\n", ""), out + err
        code, out, err = await jobrelay("logs", f"job/{running}")
        assert code == 0 and out, out + err


async def leading(rendered: Rendered) -> dict[str, Any] | None:
    """/readyz's body once it answers 200 as the leader."""
    with contextlib.suppress(OSError):
        status, body = await http_get(rendered.health_port, "/readyz")
        health: dict[str, Any] = json.loads(body)
        return health if status == 200 and health.get("role") == "leader" else None
    return None


async def test_it_needs_no_writable_tmp(
    installed: Installed,
    rendered: Rendered,
    service_account_token: str,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    tmp_path: Path,
) -> None:
    """Without the chart's /tmp volume too: every certificate (the API's, the workers'
    inline ones) is loaded from memory (it exited with "No usable temporary directory")."""
    manager = clients["manager"]
    deployment = copy.deepcopy(rendered.deployment)
    pod_spec = deployment["spec"]["template"]["spec"]
    pod_spec["volumes"] = [v for v in pod_spec["volumes"] if v["name"] != "tmp"]
    (container,) = pod_spec["containers"]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "tmp"]
    async with running_pod(
        deployment, rendered, service_account_token, fleet, manager, tmp_path
    ) as process:
        await eventually(lambda: leading(rendered), timeout=60, what="/readyz 200 as the leader")
        # Every worker connected: their kubeconfigs' inline certificates were loaded.
        await eventually(
            lambda: workers_connected(manager, fleet.workers), timeout=60, what="workers Connected"
        )
        # The API answers with the Secret's certificate (a refusal without credentials).
        secret_ca = await api_secret_ca(manager)
        service = f"{RELEASE}-jobrelay-api.{CHART_NAMESPACE}.svc"
        status, _ = await http_get(
            rendered.api_port, logs_path("x", "y"),
            tls=ssl.create_default_context(cadata=secret_ca), server_name=service,
        )  # fmt: skip
        assert status == 401
        process.assert_clean_log()


async def api_secret_ca(manager: ApiClient) -> str:
    """The CA of the certificate the controller made in its Secret (the selfSigned source)."""
    stored = await manager.get(SECRETS, API_SECRET, namespace=CHART_NAMESPACE)
    return base64.b64decode(stored["data"]["ca.crt"]).decode()


async def with_ca_bundle(manager: ApiClient, ca: str) -> dict[str, Any] | None:
    """The chart's APIService once its caBundle is ``ca``."""
    registration = await manager.get(API_SERVICES, API_SERVICE_NAME)
    bundle = (registration.get("spec") or {}).get("caBundle")
    return registration if bundle and base64.b64decode(bundle).decode() == ca else None


async def reach_the_sandbox(manager: ApiClient, rendered: Rendered) -> None:
    """The chart's Service reaches the sandboxed pod on the host: an FQDN EndpointSlice
    naming 127.0.0.1 (loopback is refused in IP slices), its port named as the Service's."""
    endpoints = local_endpoints(CHART_NAMESPACE, "127.0.0.1", rendered.api_port)
    endpoints["metadata"]["labels"]["kubernetes.io/service-name"] = f"{RELEASE}-jobrelay-api"
    endpoints["ports"][0]["name"] = "api"
    await apply(manager, ENDPOINT_SLICES, endpoints)


async def logs_through_the_manager(user: ApiClient, path: str) -> str | None:
    """The log through the manager's apiserver; None while the APIService is not available."""
    try:
        async with user.stream_subresource(API_SERVICES, path, {}) as chunks:
            return b"".join([chunk async for chunk in chunks]).decode()
    except ApiError as error:
        if error.code == 503:
            return None
        raise


# -- Pod Security of the rendered pod ---------------------------------------------------


def pod_of(rendered: Rendered, namespace: str) -> dict[str, Any]:
    """The Deployment's pod template as a Pod of ``namespace``."""
    template = copy.deepcopy(rendered.deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": "jobrelay-pod", "namespace": namespace},
        "spec": template["spec"],
    }


@pytest.fixture
async def restricted_namespace(
    rendered: Rendered,
    clients: dict[str, ApiClient],
    make_namespace: Callable[[Iterable[str]], Awaitable[str]],
) -> str:
    """A namespace enforcing ``restricted``, with the ServiceAccount and the Secret the pod names."""
    manager = clients["manager"]
    name = await make_namespace(["manager"])
    await manager.patch(NAMESPACES, name, {"metadata": {"labels": RESTRICTED}})
    for doc in (rendered.one("ServiceAccount"), rendered.api_secret):
        if doc is None:
            continue  # selfSigned: no Secret rendered, none mounted
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = name
        resource = await resource_of(manager, doc)
        assert resource is not None
        await apply(manager, resource, doc)
    return name


async def test_the_rendered_pod_is_admitted_where_restricted_is_enforced(
    rendered: Rendered, restricted_namespace: str, clients: dict[str, ApiClient]
) -> None:
    manager = clients["manager"]
    pod_body = pod_of(rendered, restricted_namespace)
    admitted = await manager.create(PODS, pod_body, namespace=restricted_namespace, dry_run=True)
    assert admitted["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert (await manager.list(PODS, namespace=restricted_namespace)).items == []


async def test_without_its_seccomp_profile_the_pod_is_refused(
    rendered: Rendered, restricted_namespace: str, clients: dict[str, ApiClient]
) -> None:
    pod_body = pod_of(rendered, restricted_namespace)
    del pod_body["spec"]["securityContext"]["seccompProfile"]
    with pytest.raises(ApiError) as refused:
        await clients["manager"].create(
            PODS, pod_body, namespace=restricted_namespace, dry_run=True
        )
    assert refused.value.code == 403, refused.value
    assert 'violates PodSecurity "restricted' in refused.value.message
    assert "seccompProfile" in refused.value.message


async def test_the_controller_may_not_read_secrets_everywhere(
    installed: Installed,
    rendered: Rendered,
    service_account_token: str,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
) -> None:
    """Issue 33: the chart's ServiceAccount (default values) reads Secrets only in its own
    namespace (worker kubeconfigs): no list across namespaces, none in kube-system, as the
    manager's authorizer answers it and as `kubectl auth can-i` says."""
    user = f"system:serviceaccount:{CHART_NAMESPACE}:{rendered.service_account}"

    async def allowed(verb: str, namespace: str) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                     "resourceAttributes": {"verb": verb, "resource": "secrets",
                                            "namespace": namespace}},
        }  # fmt: skip
        answer = await clients["manager"].review(SUBJECT_ACCESS_REVIEWS, review)
        return bool(answer["status"].get("allowed"))

    # The chart's RBAC is applied (the fixture waits for nothing: RBAC may lag a moment).
    await eventually(
        lambda: allowed("list", CHART_NAMESPACE), timeout=30, what="the chart's Role in force"
    )
    assert not await allowed("list", "")
    assert not await allowed("watch", "")
    assert not await allowed("get", "kube-system")
    ca, host, port = manager_ca_and_address(fleet)
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "m", "cluster": {
            "server": f"https://{host}:{port}",
            "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "users": [{"name": "sa", "user": {"token": service_account_token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "m", "user": "sa"}}],
    }  # fmt: skip
    assert kubectl_can_i(config, "list", "secrets", "--all-namespaces") == "no"
    assert kubectl_can_i(config, "list", "secrets", "-n", CHART_NAMESPACE) == "yes"
