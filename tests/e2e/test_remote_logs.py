"""Remote logs: `jobrelay logs` reads a mirror's pod logs through the controller's API.

The whole path is real: the controller serves its API (``--api-address``) and
publishes it in ConfigMap ``jobrelay-system/jobrelay-api``; the CLI runs as a
user of the manager (the fleet's bearer-token admin, or a client certificate of
a user no RoleBinding names); the controller checks them with a TokenReview /
the manager's client CA and a SubjectAccessReview, then streams ``pods/log``
from the worker, whose apiserver proxies it to KWOK's kubelet server (every
simulated pod prints ``cluster.SIMULATED_LOG``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kube.client import PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CONFIGMAPS, PODS
from jobrelay.localfleet import pki
from jobrelay.localfleet.cluster import (
    SIMULATED_LOG,
    SIMULATED_PREVIOUS_LOG,
    Credential,
    write_kubeconfig,
)
from jobrelay.relayapi.rules import API_CONFIGMAP, POD_HEADER
from jobrelay.vocabulary.names import FIELD_MANAGER
from jobrelay.vocabulary.resource import Resource
from tests.chart_render import chart_tools, render
from tests.conftest import FleetHandle
from tests.e2e.leakwatch import fleet_secrets, reference_secrets
from tests.e2e.support import ControllerProcess, Relay
from tests.kubetools import eventually, job_manifest
from tests.leakscan import Needles, scan

pytestmark = pytest.mark.e2e

CONTROLLER_ARGS = ["--api-address", "127.0.0.1:0"]
RBAC = "rbac.authorization.k8s.io"
ROLES = Resource(RBAC, "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding", namespaced=True)
# What every answer of this module is kept for: scanned for credentials at the end.
ANSWERS: list[tuple[str, str]] = []


@pytest.fixture(scope="module")
async def published(
    controller: ControllerProcess, relay_fleet: FleetHandle
) -> AsyncIterator[dict[str, str]]:
    """The API's address and CA as the leader published them; every authenticated user may
    read them (the chart's jobrelay-api-reader Role and RoleBinding, as it renders them for
    release ``jobrelay`` in jobrelay-system)."""
    async with relay_fleet.client("manager") as manager:
        readers = [
            doc for doc in render(chart_tools().helm, {}, namespace=DEFAULT_NAMESPACE)
            if doc["metadata"]["name"] == "jobrelay-api-reader"
        ]  # fmt: skip
        assert [doc["kind"] for doc in readers] == ["Role", "RoleBinding"]
        for doc in readers:
            resource = ROLES if doc["kind"] == "Role" else ROLE_BINDINGS
            await manager.patch(
                resource, doc["metadata"]["name"], doc, namespace=DEFAULT_NAMESPACE,
                patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
            )  # fmt: skip

        listening = [r for r in controller.run_records() if r.get("event") == "api-listening"]
        assert listening, "the controller logged no API address"
        url = listening[-1]["url"]

        async def configmap() -> dict[str, str] | None:
            try:
                found = await manager.get(CONFIGMAPS, API_CONFIGMAP, namespace=DEFAULT_NAMESPACE)
            except ApiError as error:
                if error.is_not_found:
                    return None
                raise
            data = dict(found.get("data") or {})
            return data if data.get("address") == url else None  # not a stale one

        data = await eventually(configmap, timeout=30, what="the published API")
        try:
            yield data
        finally:
            for doc in readers:
                resource = ROLES if doc["kind"] == "Role" else ROLE_BINDINGS
                try:
                    await manager.delete(resource, doc["metadata"]["name"],
                                         namespace=DEFAULT_NAMESPACE)  # fmt: skip
                except ApiError as error:
                    if not error.is_not_found:
                        raise


@pytest.fixture(scope="module")
def stranger(relay_fleet: FleetHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig of a user the manager knows by a client certificate of its CA, whom no
    RoleBinding names (beyond what every authenticated user may do)."""
    ca = pki.CertPair(relay_fleet.state_dir / "pki" / "ca.crt",
                      relay_fleet.state_dir / "pki" / "ca.key")  # fmt: skip
    directory = tmp_path_factory.mktemp("stranger")
    identity = pki.issue(ca, directory, "stranger", common_name="stranger", organization="nobody")
    admin = yaml.safe_load(relay_fleet.kubeconfig("manager").read_text())
    path = directory / "stranger.kubeconfig"
    write_kubeconfig(path, cluster="manager", server=admin["clusters"][0]["cluster"]["server"],
                     ca=ca.cert, client=identity)  # fmt: skip
    return path


def kubeconfig_user(kubeconfig: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"])


def token_of(kubeconfig: Path) -> str:
    return str(kubeconfig_user(kubeconfig)["token"])


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


async def get(
    published: dict[str, str], path: str, token: str | None, **params: str
) -> httpx2.Response:
    """A raw request to the API (its status code, headers and Status body)."""
    context = ssl.create_default_context(cadata=published["ca.crt"])
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(base_url=published["address"], verify=context) as http:
        response = await http.get(path, params=params, headers=headers)
    ANSWERS.append((f"GET {path}", response.text))
    return response


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


async def test_follow_runs_until_the_pod_ends(
    relay: Relay, relay_fleet: FleetHandle, published: dict[str, str]
) -> None:
    await relay.submit(
        job_manifest("follow", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    worker = await relay.wait_placed("follow")
    (pod,) = await running_pods(relay, worker, "follow", 1)
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobrelay", "logs", "--kubeconfig", str(user),
        "-n", relay.namespace, "follow", "-f",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
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
    ANSWERS.append(("jobrelay logs -f", out.decode() + rest.decode() + err.decode()))
    assert code == 0, err
    assert rest == b""
    job = await relay.wait_finished("follow")
    assert job["status"].get("succeeded") == 1


async def test_index_picks_the_pod_of_a_completion_index(
    relay: Relay, relay_fleet: FleetHandle, published: dict[str, str]
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
    token = token_of(relay_fleet.kubeconfig("manager", Credential.TOKEN))
    path = f"/v1/namespaces/{relay.namespace}/jobs/indexed/logs"
    for index in ("0", "2"):
        response = await get(published, path, token, index=index)
        assert response.status_code == 200, response.text
        assert response.headers[POD_HEADER] == by_index[index]
        assert response.text == lines(*SIMULATED_LOG)
    every = await get(published, path, token, allPods="true")
    assert sorted(every.text.splitlines()) == sorted(
        f"[pod/{pod}] {line}" for pod in by_index.values() for line in SIMULATED_LOG
    )
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, out, err = await jobrelay_logs(user, "-n", relay.namespace, "indexed", "--index", "1")
    assert (code, out) == (0, lines(*SIMULATED_LOG)), err
    code, _, err = await jobrelay_logs(user, "-n", relay.namespace, "indexed", "--index", "7")
    assert code == 3 and "completion index 7" in err

    mirror = await get(published, f"/v1/namespaces/{relay.namespace}/jobs/indexed/mirror", token)
    view = mirror.json()
    assert view["cluster"] == worker
    assert view["mirror"]["metadata"]["name"] == "indexed"
    assert sorted(p["name"] for p in view["pods"]) == sorted(by_index.values())
    assert all(p["phase"] == "Running" and p["node"] for p in view["pods"])


async def test_previous_and_tail(
    relay: Relay, relay_fleet: FleetHandle, published: dict[str, str]
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


async def test_not_placed_and_not_found(
    relay: Relay, relay_fleet: FleetHandle, published: dict[str, str]
) -> None:
    user = relay_fleet.kubeconfig("manager", Credential.TOKEN)
    code, _, err = await jobrelay_logs(user, "-n", relay.namespace, "nothing-here")
    assert code == 3 and "not found" in err


async def test_a_user_without_a_role_binding_is_refused(
    relay: Relay, stranger: Path, relay_fleet: FleetHandle, published: dict[str, str]
) -> None:
    await relay.submit(
        job_manifest("private", annotations={"fleet.jobrelay.dev/outcome": "run-forever"})
    )
    await relay.wait_placed("private")
    code, out, err = await jobrelay_logs(stranger, "-n", relay.namespace, "private")
    assert code == 5 and out == ""
    assert 'user "stranger" cannot get pods/log' in err and "forbidden" in err
    # The same refusal as the API gives it: 403 with a Status.
    user = kubeconfig_user(stranger)
    context = ssl.create_default_context(cadata=published["ca.crt"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    async with httpx2.AsyncClient(base_url=published["address"], verify=context) as http:
        response = await http.get(f"/v1/namespaces/{relay.namespace}/jobs/private/logs")
        mirror = await http.get(f"/v1/namespaces/{relay.namespace}/jobs/private/mirror")
    ANSWERS.extend([("stranger logs", response.text), ("stranger mirror", mirror.text)])
    assert response.status_code == 403 and response.json()["reason"] == "Forbidden"
    assert mirror.status_code == 403


async def test_forged_and_expired_tokens_are_refused(
    relay: Relay, relay_fleet: FleetHandle, published: dict[str, str], tmp_path: Path
) -> None:
    path = f"/v1/namespaces/{relay.namespace}/jobs/any/logs"
    admin_token = token_of(relay_fleet.kubeconfig("manager", Credential.TOKEN))
    forged = admin_token[:-4] + ("AAAA" if not admin_token.endswith("AAAA") else "BBBB")
    for token in (forged, expired_service_account_token(relay_fleet), None):
        response = await get(published, path, token)
        assert response.status_code == 401, response.text
        assert response.json()["kind"] == "Status"
    # The CLI says so, with its exit code.
    config = yaml.safe_load(relay_fleet.kubeconfig("manager", Credential.TOKEN).read_text())
    config["users"][0]["user"]["token"] = forged
    kubeconfig = tmp_path / "forged.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    # The manager refuses it (reading the published address), and so does the API.
    code, _, err = await jobrelay_logs(kubeconfig, "-n", relay.namespace, "any")
    assert code == 4 and "credentials were not accepted" in err
    ca = tmp_path / "api-ca.crt"
    ca.write_text(published["ca.crt"])
    code, _, err = await jobrelay_logs(
        kubeconfig, "-n", relay.namespace, "any",
        "--server", published["address"], "--certificate-authority", str(ca),
    )  # fmt: skip
    assert code == 4 and "bearer token is not valid" in err


async def test_no_worker_credentials_in_any_answer(
    relay: Relay, relay_fleet: FleetHandle, published: dict[str, str]
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
