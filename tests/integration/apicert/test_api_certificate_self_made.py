"""The chart's selfSigned API certificate is the controller's: made once, kept across
upgrades, renewed with its CA kept, and its CA written into the chart's caBundles.

The chart renders no Secret and no caBundle (two renders are the same: a GitOps tool
settles). Two replicas starting at once (``SelfCertificate.load``, as ``jobrelay run
--api-cert-secret`` does) make one Secret; the leader's check writes the CA into the
caBundle of the chart's APIService and of every webhook of its managedBy configuration,
that field alone, and ``helm upgrade`` with Helm 3 and Helm 4 leaves it (and the Secret)
be. A renewal is followed by every replica (an informer of the Secret) and leaves the
caBundle unchanged. With ``source: secret``, the rendered caBundle is the Secret's CA.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import (
    API_SERVICES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NAMESPACES,
    SECRETS,
)
from jobrelay.localfleet.binaries import BinaryError, resolver
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from jobrelay.relayapi.self_certificate import SelfCertificate
from jobrelay.relayapi.self_certificate_rules import ServingMaterial, serving_hosts
from tests.conftest import FleetHandle
from tests.kubetools import eventually

pytestmark = pytest.mark.integration

CHART = Path(__file__).parents[3] / "charts" / "jobrelay"
# Nothing cluster-wide that another test could meet: no admission policies, no pods.
# The fleet's CRDs are left to the fleet (the chart would adopt them otherwise).
QUIET = ["--set", "admissionPolicies.enabled=false", "--set", "replicaCount=0",
         "--set", "crds.install=false"]  # fmt: skip
RELEASE = "cert"
SECRET = f"{RELEASE}-jobrelay-api-tls"
WEBHOOKS = f"{RELEASE}-jobrelay-managedby"


def _helm(binary: Path, *args: str) -> None:
    answer = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=180, check=False
    )
    assert answer.returncode == 0, answer.stderr


@pytest.fixture
async def release(fleet: FleetHandle) -> AsyncIterator[tuple[str, list[str], ApiClient]]:
    """A namespace, the flags naming the manager and an admin client; uninstalled after."""
    namespace = f"apicert-{uuid.uuid4().hex[:6]}"
    flags = ["--kubeconfig", str(fleet.kubeconfig("manager")), "--namespace", namespace]
    try:
        helm = resolver.resolve_tools(build=False).helm
    except BinaryError as error:  # CI builds it first: missing fails, never skips
        pytest.fail(str(error))
    async with fleet.client("manager") as manager:
        try:
            yield namespace, flags, manager
        finally:
            await asyncio.to_thread(
                subprocess.run, [str(helm), "uninstall", RELEASE, *flags], capture_output=True,
                check=False,
            )  # fmt: skip
            with contextlib.suppress(ApiError):
                await manager.delete(NAMESPACES, namespace)


async def _bundles(manager: ApiClient) -> set[str | None]:
    """The caBundle of the chart's APIService and of each of its webhooks."""
    api_service = await manager.get(API_SERVICES, API_SERVICE_NAME)
    webhooks = await manager.get(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOKS)
    return {api_service["spec"].get("caBundle"),
            *(w["clientConfig"].get("caBundle") for w in webhooks["webhooks"])}  # fmt: skip


async def _stored(manager: ApiClient, namespace: str) -> ServingMaterial | None:
    with contextlib.suppress(ApiError):
        return ServingMaterial.from_secret(await manager.get(SECRETS, SECRET, namespace=namespace))
    return None


async def test_the_controller_makes_keeps_renews_and_publishes_its_certificate(
    release: tuple[str, list[str], ApiClient],
) -> None:
    namespace, flags, manager = release
    tools = resolver.resolve_tools(build=False)
    await asyncio.to_thread(_helm, tools.helm, "install", RELEASE, str(CHART),
                            "--create-namespace", *flags, *QUIET)  # fmt: skip
    assert await _stored(manager, namespace) is None  # the chart renders none
    assert await _bundles(manager) == {None}

    # Two replicas start at once: one creates the Secret, the other reads it (409).
    url = f"https://{RELEASE}-jobrelay-api.{namespace}.svc:443"
    replicas = [
        SelfCertificate(manager, namespace, SECRET, serving_hosts(url, namespace),
                        webhook_configuration=WEBHOOKS)
        for _ in range(2)
    ]  # fmt: skip
    first, second = await asyncio.gather(*(replica.load() for replica in replicas))
    assert first == second == await _stored(manager, namespace)
    cert = x509.load_pem_x509_certificate(first.cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(first.ca_pem))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{RELEASE}-jobrelay-api.{namespace}.svc" in names.get_values_for_type(x509.DNSName)

    # The leader's check writes the CA into every caBundle, as a field manager of its own.
    leader = replicas[0]
    assert await leader.check(datetime.datetime.now(datetime.UTC)) == first
    assert await _bundles(manager) == {first.ca_bundle}
    api_service = await manager.get(API_SERVICES, API_SERVICE_NAME)
    managers = {entry["manager"] for entry in api_service["metadata"]["managedFields"]}
    assert "jobrelay-ca-injector" in managers

    # Upgrades (Helm 3's three-way merge, Helm 4's server-side apply) leave both be.
    for binary in (tools.helm, tools.helm4):
        await asyncio.to_thread(_helm, binary, "upgrade", RELEASE, str(CHART), *flags, *QUIET)
        assert await _stored(manager, namespace) == first
        assert await _bundles(manager) == {first.ca_bundle}

    # Renewed at two thirds of its life: a new serving certificate, the CA kept; the
    # other replica follows the Secret.
    followed: list[ServingMaterial] = []
    replicas[1].follow(followed.append)
    try:
        due = cert.not_valid_before_utc + datetime.timedelta(days=300)
        renewed = await leader.check(due)
        assert renewed is not None and renewed.cert_pem != first.cert_pem
        assert renewed.ca_pem == first.ca_pem
        assert await _stored(manager, namespace) == renewed
        await eventually(lambda: _true(renewed in followed), timeout=30,
                         what="the other replica given the renewed certificate")  # fmt: skip
        assert await _bundles(manager) == {first.ca_bundle}
    finally:
        await replicas[1].stop()

    # source: secret with its CA as the caBundle value: rendered into both.
    stored = await manager.get(SECRETS, SECRET, namespace=namespace)
    values = {"api": {"certificate": {"source": "secret", "secretName": SECRET,
                                      "caBundle": stored["data"]["ca.crt"]}}}  # fmt: skip
    await asyncio.to_thread(_helm, tools.helm, "upgrade", RELEASE, str(CHART), *flags, *QUIET,
                            "--set-json", f"api={json.dumps(values['api'])}")  # fmt: skip
    assert await _bundles(manager) == {stored["data"]["ca.crt"]}
    assert base64.b64decode(stored["data"]["ca.crt"]) == first.ca_pem


async def _true(value: bool) -> bool:
    return value
