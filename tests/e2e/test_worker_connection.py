"""Worker connections on the real fleet: every Connected reason, both credential kinds,
and kubeconfig Secrets rotated under a running controller.

- One test per reason (``Unreachable``, ``Timeout``, ``TLSError``, ``Unauthorized`` by
  token and by client certificate, ``Forbidden``, four kinds of ``InvalidKubeconfig``):
  an extra WorkerCluster is registered with a broken kubeconfig Secret, its status
  must give the reason and a message that says what is wrong (where it applies: the
  server, the missing verb and resource, the Secret and key, the YAML line) and
  never a credential (neither in the status nor in the controller's log); then the
  Secret is fixed and the same worker must turn ``Connected=True`` without a restart.
- Declared, not added: the WorkerCluster and kubeconfig Secret YAML of
  docs/add-a-worker.md ("Or declare it"), filled in and applied with `kubectl apply`,
  gives a worker that turns ``Connected=True``.
- Secret rotation: with Jobs running on the workers, every worker's Secret goes from
  a client certificate to a bearer token (a Job dispatched then completes), one
  worker's to an unusable Secret and to a token without rights, and all back to
  certificates: each worker reconnects without a restart, Connected follows, and
  every Job completes once, with exactly one mirror, its placement never changed;
  ``activeMirrors`` follows the mirrors within a few status intervals.

Provably closed and silent servers come from sockets the test holds: a socket bound
and never listening refuses every connection, and nobody else can bind its port
while it is held; a listener that accepts and never answers never completes a TLS
handshake. Every extra registration is removed, and every fleet worker's Secret is
restored to its certificate kubeconfig, whatever happens.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import secrets
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient, PatchType
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import PODS, SECRETS, WORKER_CLUSTERS
from jobrelay.localfleet import pki
from jobrelay.localfleet.cluster_files import Credential
from jobrelay.vocabulary.names import FIELD_MANAGER
from tests.conftest import FleetHandle
from tests.e2e.support import ControllerProcess, Relay, placement
from tests.kubetools import WatchRecorder, condition, eventually, job_manifest

pytestmark = pytest.mark.e2e

HEALTH_TIMEOUT = 12  # seconds: probes every 2 s, each bounded by 4 s
STATUS_INTERVAL = 2
CONTROLLER_ARGS = (
    "--worker-health-timeout", str(HEALTH_TIMEOUT),
    "--worker-status-interval", str(STATUS_INTERVAL),
)  # fmt: skip
NAMESPACE = workerclusters.DEFAULT_NAMESPACE
# A status must show within this long of its cause (the health timeout, plus slack
# for a loaded machine).
SHOWS_WITHIN = HEALTH_TIMEOUT + 20


# -- Secrets and registrations ------------------------------------------------------


def kubeconfig(fleet: FleetHandle, worker: str, credential: Credential) -> dict[str, Any]:
    """The worker's kubeconfig for ``credential``, every file inlined (as a Secret holds it)."""
    return workerclusters.inline_kubeconfig(fleet.kubeconfig(worker, credential))


def user_secrets(config: Mapping[str, Any]) -> list[str]:
    """The credentials in a kubeconfig: what no status and no log may show."""
    found = []
    for entry in config.get("users") or []:
        user = entry.get("user") or {}
        if user.get("token"):
            found.append(str(user["token"]))
        if user.get("client-key-data"):
            key_data = str(user["client-key-data"])
            found.append(key_data)
            pem = base64.b64decode(key_data).decode()
            found += [line for line in pem.splitlines() if line and not line.startswith("-----")]
    return found


async def put_secret(manager: ApiClient, name: str, data: Mapping[str, str]) -> None:
    """Make the Secret hold exactly ``data`` (text values), creating it if needed."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
    }
    try:
        await manager.create(SECRETS, body, namespace=NAMESPACE)
    except ApiError as error:
        if not error.is_already_exists:
            raise
        current = await manager.get(SECRETS, name, namespace=NAMESPACE)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await manager.replace(SECRETS, body, namespace=NAMESPACE)


async def rotate(manager: ApiClient, worker: str, text: str) -> None:
    """Replace the worker's kubeconfig Secret content (its WorkerCluster is not touched)."""
    await put_secret(manager, workerclusters.secret_name(worker), {workerclusters.SECRET_KEY: text})


async def register_raw(
    manager: ApiClient, name: str, secret_data: Mapping[str, str] | None
) -> None:
    """A WorkerCluster whose Secret holds ``secret_data`` (None: no Secret at all)."""
    if secret_data is not None:
        await put_secret(manager, workerclusters.secret_name(name), secret_data)
    spec = {"kubeconfigSecretRef": {"name": workerclusters.secret_name(name), "key": "kubeconfig"}}
    worker = {
        "apiVersion": WORKER_CLUSTERS.api_version,
        "kind": WORKER_CLUSTERS.kind,
        "metadata": {"name": name, "labels": {"jobrelay.dev/e2e": "connection"}},
        "spec": spec,
    }
    await manager.patch(
        WORKER_CLUSTERS, name, worker,
        patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip


async def wait_condition(
    manager: ApiClient, worker: str, status: str, reason: str, *, timeout: float = SHOWS_WITHIN
) -> Mapping[str, Any]:
    """Until the WorkerCluster shows Connected=status with this reason; its whole status."""

    async def check() -> Mapping[str, Any] | None:
        try:
            found = await manager.get(WORKER_CLUSTERS, worker)
        except ApiError:
            return None
        connected = condition(found, "Connected") or {}
        if (connected.get("status"), connected.get("reason")) == (status, reason):
            return dict(found.get("status") or {})
        return None

    try:
        return await eventually(
            check, timeout=timeout, interval=0.2, what=f"{worker}: Connected={status} ({reason})"
        )
    except AssertionError as error:
        with contextlib.suppress(ApiError):
            seen = (await manager.get(WORKER_CLUSTERS, worker)).get("status")
            raise AssertionError(f"{error}; its status: {seen}") from None
        raise


def connected_message(status: Mapping[str, Any]) -> str:
    found = condition({"status": status}, "Connected") or {}
    return str(found.get("message", ""))


def assert_not_echoed(where: str, text: str, credentials: Sequence[str]) -> None:
    leaked = [secret[:6] + "..." for secret in credentials if secret and secret in text]
    assert not leaked, f"{where} shows credentials (starting {leaked})"


# -- servers that refuse or never answer --------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as the test runs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))  # bound, never listening: connections get RST
        yield int(held.getsockname()[1])


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A port on 127.0.0.1 that accepts connections and never says a word."""
    accepted: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        for writer in accepted:
            writer.close()
        await server.wait_closed()


@pytest.fixture
def other_ca(tmp_path: Path) -> pki.CertPair:
    """A CA the fleet does not know, and that does not know the fleet."""
    return pki.ensure_ca(tmp_path / "other-ca")


@pytest.fixture
async def manager(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    async with fleet.client("manager") as client:
        yield client


# -- one test per reason ------------------------------------------------------------


@dataclass(frozen=True)
class Broken:
    """A way to break a worker's kubeconfig, and what its status must then say."""

    reason: str
    # Fragments the message must hold; "{server}" stands for the broken server's URL.
    says: tuple[str, ...]
    # The Secret's data for the worker built from a good token kubeconfig, or None for none.
    breaks: Callable[[dict[str, Any], Env], dict[str, str] | None]


@dataclass(frozen=True)
class Env:
    fleet: FleetHandle
    closed_port: int
    silent_port: int
    other_ca: pki.CertPair
    tmp_path: Path


def dumped(config: Mapping[str, Any]) -> dict[str, str]:
    return {workerclusters.SECRET_KEY: yaml.safe_dump(dict(config))}


def with_server(config: dict[str, Any], server: str) -> dict[str, str]:
    config["clusters"][0]["cluster"]["server"] = server
    return dumped(config)


def with_ca(config: dict[str, Any], env: Env) -> dict[str, str]:
    data = base64.b64encode(env.other_ca.cert.read_bytes()).decode()
    config["clusters"][0]["cluster"]["certificate-authority-data"] = data
    return dumped(config)


def with_user(config: dict[str, Any], user: dict[str, str]) -> dict[str, str]:
    config["users"][0]["user"] = user
    return dumped(config)


def with_unknown_cert(config: dict[str, Any], env: Env) -> dict[str, str]:
    pair = pki.issue(env.other_ca, env.tmp_path / "other-ca", "someone", common_name="someone")
    return with_user(
        config,
        {
            "client-certificate-data": base64.b64encode(pair.cert.read_bytes()).decode(),
            "client-key-data": base64.b64encode(pair.key.read_bytes()).decode(),
        },
    )


def with_no_rights(config: dict[str, Any], env: Env) -> dict[str, str]:
    worker = env.fleet.workers[0]
    return dumped(kubeconfig(env.fleet, worker, Credential.NO_RIGHTS_TOKEN))


def broken_at_the_token(config: Mapping[str, Any]) -> str:
    """The kubeconfig as YAML with a stray colon on the token's line, so that a parser's
    error points right at the credential."""
    lines = yaml.safe_dump(dict(config)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("token:"))
    lines[at] += ": oops"
    text = "\n".join(lines) + "\n"
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)
    return text


def with_broken_yaml(config: dict[str, Any], env: Env) -> dict[str, str]:
    return {workerclusters.SECRET_KEY: broken_at_the_token(config)}


def without_context(config: dict[str, Any], env: Env) -> dict[str, str]:
    config.pop("current-context")
    return dumped(config)


BROKEN = {
    "unreachable": Broken(
        "Unreachable",
        ("{server}: cannot connect", "ConnectionRefusedError"),
        lambda c, env: with_server(c, f"https://127.0.0.1:{env.closed_port}"),
    ),
    "timeout": Broken(
        "Timeout",
        ("{server}: no answer in time",),
        lambda c, env: with_server(c, f"https://127.0.0.1:{env.silent_port}"),
    ),
    "tls-error": Broken("TLSError", ("{server}: TLS handshake failed", "CERTIFICATE_VERIFY_FAILED"),
                        with_ca),
    "unauthorized-token": Broken(
        "Unauthorized",
        ("{server}: the apiserver refuses the credentials (401)",),
        lambda c, env: with_user(c, {"token": f"not-a-token-{secrets.token_hex(8)}"}),
    ),
    "unauthorized-client-certificate": Broken(
        "Unauthorized", ("{server}: the apiserver refuses the credentials (401)",),
        with_unknown_cert,
    ),
    "forbidden": Broken(
        "Forbidden",
        ("cannot list Job.v1.batch: the credentials may not list on jobs.batch (403)",
         'User "jobrelay-no-rights"'),
        with_no_rights,
    ),
    "secret-missing": Broken(
        "InvalidKubeconfig", ("Secret jobrelay-system/{secret} is missing",), lambda c, env: None
    ),
    "key-missing": Broken(
        "InvalidKubeconfig",
        ("Secret jobrelay-system/{secret} has no key 'kubeconfig'",),
        lambda c, env: {"config": yaml.safe_dump(c)},
    ),
    "unparsable-yaml": Broken(
        "InvalidKubeconfig",
        ("key 'kubeconfig' is not a kubeconfig: invalid YAML at line",),
        with_broken_yaml,
    ),
    "no-current-context": Broken(
        "InvalidKubeconfig", ("current-context: is not set",), without_context
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
async def test_each_reason_is_shown_without_credentials_and_clears_once_fixed(
    case: str,
    controller: ControllerProcess,
    fleet: FleetHandle,
    manager: ApiClient,
    closed_port: int,
    silent_port: int,
    other_ca: pki.CertPair,
    tmp_path: Path,
) -> None:
    broken = BROKEN[case]
    name = f"conn-{case}"[:40]
    worker = fleet.workers[0]
    good = kubeconfig(fleet, worker, Credential.TOKEN)
    env = Env(fleet, closed_port, silent_port, other_ca, tmp_path)
    bad_config = json.loads(json.dumps(good))
    secret_data = broken.breaks(bad_config, env)
    credentials = user_secrets(good) + user_secrets(bad_config)
    if secret_data is not None:
        for text in secret_data.values():
            with contextlib.suppress(yaml.YAMLError):
                credentials += user_secrets(yaml.safe_load(text) or {})
    log_from = controller.log_size()
    try:
        await register_raw(manager, name, secret_data)
        status = await wait_condition(manager, name, "False", broken.reason)
        message = connected_message(status)
        server = bad_config["clusters"][0]["cluster"]["server"]
        for fragment in broken.says:
            expected = fragment.format(server=server, secret=workerclusters.secret_name(name))
            assert expected in message, f"{case}: {expected!r} not in {message!r}"
        assert_not_echoed(f"{name}'s status", json.dumps(status), credentials)

        # Fixed in place: the same WorkerCluster reconnects, nothing restarts.
        starts = controller.starts
        await workerclusters.register(
            manager, name, good, labels={"jobrelay.dev/e2e": "connection"}
        )
        fixed = await wait_condition(manager, name, "True", "Connected")
        assert fixed.get("kubernetesVersion", "").startswith("v1.35."), fixed
        assert controller.starts == starts and controller.running
        assert_not_echoed("the controller's log", controller.log_text(log_from), credentials)
    finally:
        await workerclusters.unregister(manager, name)


# -- declared in YAML ----------------------------------------------------------------

ADD_A_WORKER = Path(__file__).parents[2] / "docs" / "add-a-worker.md"


def declared_worker_yaml(name: str, kubeconfig_text: str) -> str:
    """The YAML docs/add-a-worker.md shows for a declared worker, filled in as it says."""
    doc = ADD_A_WORKER.read_text()
    found = re.search(r"<!-- declarative-worker:[^>]*-->\n```yaml\n(.*?)```", doc, re.S)
    assert found, "docs/add-a-worker.md lost its declarative worker YAML"
    indented = "".join(f"    {line}\n" for line in kubeconfig_text.splitlines())
    text = found.group(1).replace("    WORKER-KUBECONFIG\n", indented)
    return text.replace("WORKER-NAME", name)


async def test_a_worker_declared_in_yaml_connects(
    controller: ControllerProcess, fleet: FleetHandle, manager: ApiClient
) -> None:
    name = "declared-in-yaml"
    good = kubeconfig(fleet, fleet.workers[0], Credential.TOKEN)
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "the e2e tests need kubectl on the PATH"
    try:
        applied = await asyncio.to_thread(
            subprocess.run,
            [kubectl, "--kubeconfig", str(fleet.kubeconfig("manager")), "apply", "-f", "-"],
            input=declared_worker_yaml(name, yaml.safe_dump(good)),
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        status = await wait_condition(manager, name, "True", "Connected")
        assert status.get("kubernetesVersion", "").startswith("v1.35."), status
    finally:
        await workerclusters.unregister(manager, name)


# -- rotation with Jobs running -------------------------------------------------------

RUNNING_JOBS = 4


async def worker_pods(client: ApiClient, namespace: str, job: str) -> list[dict[str, Any]]:
    listed = await client.list(
        PODS, namespace=namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
    )
    return listed.items


async def finish_pods(client: ApiClient, namespace: str, job: str) -> None:
    """Let the mirror's running pods succeed now (KWOK reads the pod's annotations)."""
    for pod in await worker_pods(client, namespace, job):
        await client.patch(
            PODS,
            pod["metadata"]["name"],
            {"metadata": {"annotations": {
                "fleet.jobrelay.dev/outcome": "succeed", "fleet.jobrelay.dev/duration": "0s",
            }}},
            namespace=namespace,
        )  # fmt: skip


async def active_mirrors(manager: ApiClient, worker: str) -> int | None:
    status = (await manager.get(WORKER_CLUSTERS, worker)).get("status") or {}
    value = status.get("activeMirrors")
    return int(value) if value is not None else None


async def wait_active_mirrors(
    manager: ApiClient, worker: str, expected: int, *, timeout: float
) -> None:
    async def check() -> bool:
        return await active_mirrors(manager, worker) == expected

    await eventually(check, timeout=timeout, what=f"{worker}: activeMirrors={expected}")


def reconnected(controller: ControllerProcess, since: int, worker: str) -> bool:
    return f"worker {worker} changed: reconnecting" in controller.log_text(since)


async def wait_reconnected(
    controller: ControllerProcess, since: int, workers: Sequence[str]
) -> None:
    async def check() -> bool:
        return all(reconnected(controller, since, worker) for worker in workers)

    await eventually(check, timeout=SHOWS_WITHIN, what=f"{', '.join(workers)} reconnected")


@contextlib.asynccontextmanager
async def certificates_restored(manager: ApiClient, fleet: FleetHandle) -> AsyncIterator[None]:
    """Whatever happens, every fleet worker's Secret holds its certificate kubeconfig after."""
    try:
        yield
    finally:
        for worker in fleet.workers:
            await rotate(
                manager, worker, yaml.safe_dump(kubeconfig(fleet, worker, Credential.CERT))
            )
        for worker in fleet.workers:
            await wait_condition(manager, worker, "True", "Connected")


async def test_rotated_secrets_reconnect_without_restart_and_run_every_job_once(
    controller: ControllerProcess,
    fleet: FleetHandle,
    manager: ApiClient,
    clients: dict[str, ApiClient],
    relay: Relay,
    namespace: str,
) -> None:
    starts = controller.starts
    for worker in fleet.workers:
        await wait_condition(manager, worker, "True", "Connected")
    # Dispatched with client certificates, and running until the test lets them finish.
    names = [f"across-rotation-{index}" for index in range(RUNNING_JOBS)]
    run_forever = {"fleet.jobrelay.dev/outcome": "run-forever"}
    for name in names:
        await relay.submit(job_manifest(name, annotations=run_forever))
    placed = {name: await relay.wait_placed(name) for name in names}
    for name in names:
        await relay.wait_active(name)
    on = {worker: sum(1 for p in placed.values() if p == worker) for worker in fleet.workers}
    busiest = max(on, key=lambda worker: on[worker])
    for worker, count in on.items():
        await wait_active_mirrors(manager, worker, count, timeout=5 * STATUS_INTERVAL)

    async with certificates_restored(manager, fleet):
        # Certificates -> bearer tokens, on every worker at once.
        history = await WatchRecorder(manager, WORKER_CLUSTERS).start()
        try:
            since = controller.log_size()
            for worker in fleet.workers:
                token = yaml.safe_dump(kubeconfig(fleet, worker, Credential.TOKEN))
                await rotate(manager, worker, token)
            await wait_reconnected(controller, since, fleet.workers)
            for worker in fleet.workers:
                await wait_condition(manager, worker, "True", "Connected")
        finally:
            await history.stop()
        # A valid rotation never shows the worker as unlisted or refused, and never
        # leaves its Jobs without their worker.
        for _, version in history.events:
            reason = (condition(version, "Connected") or {}).get("reason")
            if version["metadata"]["name"] in fleet.workers:
                assert reason in (None, "Connected", "Timeout"), version.get("status")
        for name in names:
            job = await relay.get(name)
            warnings = [
                e.get("reason") for e in await relay.events(job["metadata"]["uid"])
                if e.get("type") == "Warning"
            ]  # fmt: skip
            assert not warnings, f"{name}: {warnings} during a valid rotation"
        # A Job dispatched with tokens completes.
        await relay.submit(job_manifest("dispatched-by-token"))
        await relay.verify("dispatched-by-token")

        # An unusable Secret, then a token without rights, on the busiest worker.
        with_token = kubeconfig(fleet, busiest, Credential.TOKEN)
        token = str(with_token["users"][0]["user"]["token"])
        await rotate(manager, busiest, broken_at_the_token(with_token))
        status = await wait_condition(manager, busiest, "False", "InvalidKubeconfig")
        assert "invalid YAML at line" in connected_message(status)
        assert_not_echoed(f"{busiest}'s status", json.dumps(status), [token])
        no_rights = kubeconfig(fleet, busiest, Credential.NO_RIGHTS_TOKEN)
        await rotate(manager, busiest, yaml.safe_dump(no_rights))
        status = await wait_condition(manager, busiest, "False", "Forbidden")
        assert "may not list on jobs.batch" in connected_message(status), status
        assert_not_echoed(f"{busiest}'s status", json.dumps(status), user_secrets(no_rights))
        for name in names:  # nothing was finished, moved or copied meanwhile
            assert placement(await relay.get(name)) == placed[name]
    # certificates_restored: every worker is back on its certificate, Connected=True.

    assert controller.starts == starts and controller.running, "the controller restarted"
    for name in names:
        await finish_pods(clients[placed[name]], namespace, name)
    for name in names:
        relayed = await relay.verify(name)
        assert relayed.cluster == placed[name]
        assert relayed.job["status"]["succeeded"] == 1
    # activeMirrors follows: no figure stays stale longer than a few status intervals.
    for worker in fleet.workers:
        await wait_active_mirrors(manager, worker, 0, timeout=5 * STATUS_INTERVAL)
