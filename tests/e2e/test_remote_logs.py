"""Remote logs through the manager's aggregation layer: `jobrelay logs`, `kubectl get --raw`.

The whole path is real: the controller serves its aggregated API
(``--api-address``) and, as leader, registers ``APIService
v1alpha1.api.jobrelay.dev`` with a Service reaching it (``--api-register``). A
user of the manager (the fleet's bearer-token admin, or a client certificate of
a user no RoleBinding names) calls ``/apis/api.jobrelay.dev/v1alpha1/...`` on the
manager's apiserver, which authenticates them and forwards the request with its
front-proxy certificate; the controller trusts only that certificate, checks the
forwarded user with a SubjectAccessReview, then streams ``pods/log`` from the
worker, whose apiserver proxies it to KWOK's kubelet server (every simulated pod
prints ``cluster.SIMULATED_LOG``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from jobrelay.kube.resources import API_SERVICES, PODS
from jobrelay.localfleet import pki
from jobrelay.localfleet.cluster import (
    SIMULATED_LOG,
    SIMULATED_PREVIOUS_LOG,
    Credential,
)
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from jobrelay.relayapi.route_rules import API_PATH, POD_HEADER
from jobrelay.vocabulary.resource import Resource
from tests.conftest import FleetHandle
from tests.e2e.aggregated import API_ARGS, api_available, available, manager_get, user_kubeconfig
from tests.e2e.leakwatch import fleet_secrets, reference_secrets
from tests.e2e.support import ControllerProcess, Relay
from tests.e2e.worker_identity import SERVICE_ACCOUNT
from tests.kubetools import eventually, job_manifest, jobrelay_cli
from tests.leakscan import Needles, scan

pytestmark = pytest.mark.e2e
# Workers added as docs/add-a-worker.md says: the least-privilege identity reads the logs.
WORKERS_ADDED = SERVICE_ACCOUNT

CONTROLLER_ARGS = API_ARGS
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
RBAC = "rbac.authorization.k8s.io"
ROLES = Resource(RBAC, "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding", namespaced=True)
# What every answer of this module is kept for: scanned for credentials at the end.
ANSWERS: list[tuple[str, str]] = []


@pytest.fixture(scope="module")
async def registered(controller: ControllerProcess, relay_fleet: FleetHandle) -> dict[str, str]:
    """The controller's own address and serving CA, once the APIService is Available."""
    return await api_available(controller, relay_fleet)


@pytest.fixture(scope="module")
def stranger(relay_fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user the manager knows by a client certificate, whom no RoleBinding names."""
    return user_kubeconfig(relay_fleet, tmp_path_factory.mktemp("stranger"), "stranger")


async def jobrelay_logs(kubeconfig: Path, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run `jobrelay logs` to its end: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", "logs", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    ANSWERS.append((f"jobrelay logs {' '.join(args)}", out.decode() + err.decode()))
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def lines(*texts: str) -> str:
    return "".join(f"{text}\n" for text in texts)


async def get(kubeconfig: Path, path: str, **params: str) -> httpx2.Response:
    """A raw request to the manager's apiserver as the kubeconfig's user, kept for the
    module's scan for credentials."""
    response = await manager_get(kubeconfig, path, **params)
    ANSWERS.append((f"GET {path}", response.text))
    return response


def logs_path(namespace: str, name: str, what: str = "log", plural: str = "jobs") -> str:
    return f"{API_PATH}/namespaces/{namespace}/{plural}/{name}/{what}"


def expired_service_account_token(fleet: FleetHandle) -> str:
    """A service account token the manager signed (its key) that expired an hour ago."""
    key = serialization.load_pem_private_key(
        (fleet.state_dir / "manager" / "pki" / "sa.key").read_bytes(), password=None
    )
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    now = int(time.time())

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims = {
        "iss": "https://kubernetes.default.svc", "aud": ["https://kubernetes.default.svc"],
        "sub": "system:serviceaccount:default:default", "iat": now - 7200, "nbf": now - 7200,
        "exp": now - 3600,
        "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "default",
                                                                     "uid": "0000"}},
    }  # fmt: skip
    signing_input = f"{part({'alg': 'ES256', 'typ': 'JWT'})}.{part(claims)}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    signature = base64.urlsafe_b64encode(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
    return f"{signing_input}.{signature.rstrip(b'=').decode()}"


async def running_pods(relay: Relay, worker: str, name: str, count: int) -> list[dict[str, Any]]:
    client = relay.clients[worker]

    async def check() -> list[dict[str, Any]] | None:
        found = await client.list(
            PODS, namespace=relay.namespace, label_selector=f"batch.kubernetes.io/job-name={name}"
        )
        running = [p for p in found.items if p.get("status", {}).get("phase") == "Running"]
        return running if len(running) >= count else None

    return await eventually(check, timeout=60, what=f"{count} running pods of {name}")


async def follow_to_the_end(
    relay: Relay, worker: str, pod: dict[str, Any], argv: tuple[str, ...], name: str
) -> None:
    """Run ``argv`` (a follow of the pod's log): it prints the pod's lines, keeps running
    while the pod runs, and ends cleanly, with nothing more, once the pod ends."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        out = b""
        async with asyncio.timeout(30):
            while out.count(b"\n") < len(SIMULATED_LOG):
                out += await process.stdout.read(4096) or b"<eof>\n"
        assert out.decode() == lines(*SIMULATED_LOG)
        assert process.returncode is None, "the follow ended while its pod runs"
        # The pod ends (its fate changed on the worker): so does the follow.
        await relay.clients[worker].patch(
            PODS, pod["metadata"]["name"], {"metadata": {"annotations": {
                "fleet.jobrelay.dev/outcome": "succeed", "fleet.jobrelay.dev/duration": "100ms",
            }}}, namespace=relay.namespace,
        )  # fmt: skip
        async with asyncio.timeout(30):
            rest = await process.stdout.read()
            err = await process.stderr.read()
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    ANSWERS.append((name, out.decode() + rest.decode() + err.decode()))
    assert code == 0, err
    assert rest == b""


async def test_follow_runs_until_the_pod_ends(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    await relay.submit(
        job_manifest("follow", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    worker = await relay.wait_placed("follow")
    (pod,) = await running_pods(relay, worker, "follow", 1)
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    argv = (sys.executable, "-m", "jobrelay", "logs", "--kubeconfig", str(user),
            "-n", relay.namespace, "follow", "-f")  # fmt: skip
    await follow_to_the_end(relay, worker, pod, argv, "jobrelay logs -f")
    job = await relay.wait_finished("follow")
    assert job["status"].get("succeeded") == 1


async def test_index_picks_the_pod_of_a_completion_index(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    manifest = job_manifest(
        "indexed", completions=3, parallelism=3, completionMode="Indexed",
        annotations={"fleet.jobrelay.dev/outcome": "run-forever"},
    )  # fmt: skip
    await relay.submit(manifest)
    worker = await relay.wait_placed("indexed")
    pods = await running_pods(relay, worker, "indexed", 3)
    by_index = {
        p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p["metadata"]["name"]
        for p in pods
    }
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    path = logs_path(relay.namespace, "indexed")
    for index in ("0", "2"):
        response = await get(admin, path, index=index)
        assert response.status_code == 200, response.text
        assert response.headers[POD_HEADER] == by_index[index]
        assert response.text == lines(*SIMULATED_LOG)
    every = await get(admin, path, allPods="true")
    assert sorted(every.text.splitlines()) == sorted(
        f"[pod/{pod}] {line}" for pod in by_index.values() for line in SIMULATED_LOG
    )
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "indexed", "--index", "1")
    assert (code, out) == (0, lines(*SIMULATED_LOG)), err
    code, _, err = await jobrelay_logs(user, "-n", relay.namespace, "indexed", "--index", "7")
    assert code == 3 and "completion index 7" in err

    mirror = await get(admin, logs_path(relay.namespace, "indexed", "mirror"))
    assert mirror.status_code == 200, mirror.text
    view = mirror.json()
    assert view["cluster"] == worker
    assert view["mirror"]["metadata"]["name"] == "indexed"
    assert sorted(p["name"] for p in view["pods"]) == sorted(by_index.values())
    assert all(p["phase"] == "Running" and p["node"] for p in view["pods"])


async def test_previous_and_tail(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    await relay.submit(
        job_manifest("history", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    worker = await relay.wait_placed("history")
    await running_pods(relay, worker, "history", 1)
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "history", "--previous")
    assert (code, out) == (0, lines(*SIMULATED_PREVIOUS_LOG)), err
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "history", "--tail", "1")
    assert (code, out) == (0, lines(SIMULATED_LOG[-1])), err
    code, out, err = await jobrelay_logs(
        user, "-n", relay.namespace, "history", "--tail", "2", "--timestamps"
    )
    assert code == 0, err
    assert [line.split(" ", 1)[1] for line in out.splitlines()] == list(SIMULATED_LOG[-2:])


async def test_kubectl_manners_logs_by_type_and_selector_queues_watch_and_top_of_a_namespace(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    """`jobrelay logs job/NAME`, `logs job -l` with --prefix and --all-containers,
    `queues -w` (its first frame, then still watching) and `top -n NS` (this namespace's
    workloads only), on the running controller."""
    manifest = job_manifest("labelled", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    manifest["metadata"]["labels"] = {"app": "cli-manners"}
    await relay.submit(manifest)
    worker = await relay.wait_placed("labelled")
    (pod,) = await running_pods(relay, worker, "labelled", 1)
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    ns = ("-n", relay.namespace)
    code, out, err = await jobrelay_logs(user, *ns, "job/labelled")
    assert (code, out) == (0, lines(*SIMULATED_LOG)), err
    prefix = f"[pod/{pod['metadata']['name']}/main] "
    for extra in ((), ("--all-containers",)):
        code, out, err = await jobrelay_logs(
            user, *ns, "job", "-l", "app=cli-manners", "--prefix", *extra
        )
        assert (code, out) == (0, lines(*(prefix + line for line in SIMULATED_LOG))), err
    code, out, err = await jobrelay_logs(user, *ns, "-l", "app=nothing")
    assert (code, out, err) == (0, "", f"No resources found in {relay.namespace} namespace.\n")

    # `queues -w`: the first frame (this fleet has no RelayQueues), then it keeps watching.
    watch = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", "queues", "--kubeconfig", str(user), "-w",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert watch.stdout is not None
    try:
        async with asyncio.timeout(30):
            first = await watch.stdout.readline()
        assert first.startswith(b"no RelayQueues"), first
        with pytest.raises(TimeoutError):  # watching: no exit of its own
            async with asyncio.timeout(1):
                await watch.wait()
    finally:
        if watch.returncode is None:
            watch.terminate()
        await watch.wait()

    async def top_of_the_namespace() -> str | None:
        code, out, err = await jobrelay_cli(user, "top", "--once", *ns)
        assert code == 0, err
        last = out.splitlines()[-1]  # the status written back may lag the pod
        return last if last == "WORKLOADS 1: Running 1" else None

    await eventually(top_of_the_namespace, timeout=30, what="top -n: this namespace's Job")


async def test_not_placed_and_not_found(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, _, err = await jobrelay_logs(user, "-n", relay.namespace, "nothing-here")
    assert code == 3 and "not found" in err


async def test_a_user_without_pods_log_is_refused(
    relay: Relay, stranger: Path, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    await relay.submit(
        job_manifest("private", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    await relay.wait_placed("private")
    # No RoleBinding at all: the manager's apiserver refuses before it forwards.
    code, out, err = await jobrelay_logs(stranger, "-n", relay.namespace, "private")
    assert code == 5 and out == "" and "forbidden" in err, err
    assert 'cannot get resource "jobs/log" in API group "api.jobrelay.dev"' in err
    # Allowed the API's subresources (as the chart's view role does) but not pods/log:
    # the controller's SubjectAccessReview refuses, 403 with a Status.
    async with relay_fleet.client("manager") as manager:
        role = {"metadata": {"name": "api-only"}, "rules": [{
            "apiGroups": ["api.jobrelay.dev"], "resources": ["jobs/log", "jobs/mirror"],
            "verbs": ["get"]}]}  # fmt: skip
        binding = {"metadata": {"name": "api-only"},
                   "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "api-only"},
                   "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "stranger"}]}  # fmt: skip
        await manager.create(ROLES, role, namespace=relay.namespace)
        await manager.create(ROLE_BINDINGS, binding, namespace=relay.namespace)
    code, out, err = await jobrelay_logs(stranger, "-n", relay.namespace, "private")
    assert code == 5 and out == ""
    assert 'user "stranger" cannot get pods/log' in err and "forbidden" in err
    response = await get(stranger, logs_path(relay.namespace, "private"))
    mirror = await get(stranger, logs_path(relay.namespace, "private", "mirror"))
    assert response.status_code == 403 and response.json()["reason"] == "Forbidden"
    assert 'user "stranger" cannot get pods/log' in response.json()["message"]
    assert mirror.status_code == 403
    assert 'user "stranger" cannot get jobs' in mirror.json()["message"]


async def test_forged_and_expired_tokens_are_refused_by_the_manager(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str], tmp_path: Path
) -> None:
    path = logs_path(relay.namespace, "any")
    config = yaml.safe_load(relay_fleet.kubeconfig("manager", Credential.TOKEN).read_text())
    admin_token = config["users"][0]["user"]["token"]
    forged = admin_token[:-4] + ("AAAA" if not admin_token.endswith("AAAA") else "BBBB")
    for token in (forged, expired_service_account_token(relay_fleet)):
        config["users"][0]["user"]["token"] = token
        kubeconfig = tmp_path / "forged.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        response = await get(kubeconfig, path)
        assert response.status_code == 401, response.text
        assert response.json()["kind"] == "Status"
    # The CLI says so, with its exit code.
    config["users"][0]["user"]["token"] = forged
    kubeconfig.write_text(yaml.safe_dump(config))
    code, _, err = await jobrelay_logs(kubeconfig, "-n", relay.namespace, "any")
    assert code == 4 and "credentials were not accepted" in err


async def direct(
    registered: dict[str, str],
    path: str,
    *,
    cert: pki.CertPair | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    """A request straight to the controller's port, around the manager's apiserver."""
    context = ssl.create_default_context(cadata=registered["ca"])
    if cert is not None:
        context.load_cert_chain(cert.cert, cert.key)
    async with httpx2.AsyncClient(base_url=registered["url"], verify=context, timeout=30) as http:
        response = await http.get(path, headers=headers or {})
    ANSWERS.append((f"direct GET {path}", response.text))
    return response


async def test_straight_to_the_controller_only_the_front_proxy_is_trusted(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str], tmp_path: Path
) -> None:
    await relay.submit(
        job_manifest("direct", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    await relay.wait_placed("direct")
    path = logs_path(relay.namespace, "direct")
    admin = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    forged = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
    # No front-proxy certificate: refused, whatever the headers or a manager token say.
    token = yaml.safe_load(admin.read_text())["users"][0]["user"]["token"]
    for headers in ({}, forged, {"Authorization": f"Bearer {token}"}):
        response = await direct(registered, path, headers=headers)
        assert response.status_code == 401, response.text
        assert response.json()["kind"] == "Status" and response.json()["code"] == 401
    # A certificate of the front proxy's CA that is not an allowed name: forged headers
    # are not read.
    front = relay_fleet.state_dir / "manager" / "pki" / "front-proxy"
    front_ca = pki.CertPair(front / "ca.crt", front / "ca.key")
    intruder = pki.issue(front_ca, tmp_path, "intruder", common_name="intruder")
    response = await direct(registered, path, cert=intruder, headers=forged)
    assert response.status_code == 401, response.text
    assert '"intruder" is not an allowed front proxy' in response.json()["message"]
    # A user's certificate of the manager's client CA is no front proxy at all.
    users_ca = pki.CertPair(relay_fleet.state_dir / "pki" / "ca.crt",
                            relay_fleet.state_dir / "pki" / "ca.key")  # fmt: skip
    admin_cert = pki.issue(users_ca, tmp_path, "user", common_name="front-proxy-client",
                           organization="system:masters")  # fmt: skip
    with pytest.raises(httpx2.HTTPError):
        await direct(registered, path, cert=admin_cert, headers=forged)
    # The front proxy's own certificate with the headers is what the manager sends: the
    # same request through the manager is served.
    through = await get(admin, path)
    assert through.status_code == 200, through.text
    assert through.text == lines(*SIMULATED_LOG)


async def test_kubectl_get_raw_follows_a_pod_to_its_end(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    await relay.submit(
        job_manifest("rawfollow", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    worker = await relay.wait_placed("rawfollow")
    (pod,) = await running_pods(relay, worker, "rawfollow", 1)
    kubeconfig = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    argv = (KUBECTL, "--kubeconfig", str(kubeconfig), "get", "--raw",
            f"{logs_path(relay.namespace, 'rawfollow')}?follow=true")  # fmt: skip
    await follow_to_the_end(relay, worker, pod, argv, "kubectl get --raw follow")
    # Discovery as kubectl reads it: the subresources of the group.
    listed = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), "get", "--raw", API_PATH,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    found, _ = await listed.communicate()
    names = {r["name"] for r in json.loads(found)["resources"]}
    assert {"jobs/log", "jobs/mirror"} <= names


async def test_an_unavailable_api_service_is_one_clear_line(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    """The APIService points nowhere for a while: the CLI says what to check."""
    async with relay_fleet.client("manager") as manager:
        original = await manager.get(API_SERVICES, API_SERVICE_NAME)
        broken = {**original["spec"], "service": {**original["spec"]["service"], "name": "gone"}}
        await manager.patch(API_SERVICES, API_SERVICE_NAME, {"spec": broken})
        try:

            async def unavailable() -> bool | None:
                found = await manager.get(API_SERVICES, API_SERVICE_NAME)
                return True if not available(found) else None

            await eventually(unavailable, timeout=30, what="the APIService unavailable")
            user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
            code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "any")
            assert code == 1 and out == ""
            assert len(err.strip().splitlines()) == 1, err
            assert f"kubectl get apiservice {API_SERVICE_NAME}" in err
        finally:
            await manager.patch(API_SERVICES, API_SERVICE_NAME, {"spec": original["spec"]})

            async def back() -> bool | None:
                return (
                    True if available(await manager.get(API_SERVICES, API_SERVICE_NAME)) else None
                )

            await eventually(back, timeout=60, what="the APIService Available again")


async def test_no_worker_credentials_in_any_answer(
    relay: Relay, relay_fleet: FleetHandle, registered: dict[str, str]
) -> None:
    """Runs last: every answer of this module, scanned for the fleet's credentials and
    for any worker's address."""
    assert ANSWERS, "no answers recorded: run the whole module"
    needles = Needles.of(fleet_secrets(relay_fleet.state_dir), public=reference_secrets())
    report = scan(ANSWERS, needles)
    assert not report.leaks, report.leaks[:10]
    for worker in relay_fleet.workers:
        server = yaml.safe_load(relay_fleet.kubeconfig(worker).read_text())["clusters"][0]
        address = server["cluster"]["server"].removeprefix("https://")
        assert not any(address in text for _, text in ANSWERS), address
