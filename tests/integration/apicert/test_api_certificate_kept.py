"""The chart's self-signed API certificate is made once and kept across upgrades.

Every replica serves the Secret the chart makes, and the manager's aggregator
trusts its ca.crt (the APIService's caBundle, rendered with it): a new CA at each
``helm upgrade`` would make the API unavailable until every replica restarted. ``lookup`` finds the Secret of the
release and the chart renders it unchanged, with Helm 3 and Helm 4 alike.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import API_SERVICES, NAMESPACES, SECRETS
from jobrelay.localfleet.binaries import BinaryError, resolver
from jobrelay.relayapi.registration_rules import API_SERVICE_NAME
from tests.conftest import FleetHandle

pytestmark = pytest.mark.integration

CHART = Path(__file__).parents[3] / "charts" / "jobrelay"
# Nothing cluster-wide that another test could meet: no admission policies, no pods, and
# the fleet's CRDs left to the fleet.
QUIET = ["--set", "admissionPolicies.enabled=false", "--set", "replicaCount=0",
         "--set", "crds.install=false"]  # fmt: skip


@pytest.fixture
def helm_binaries() -> tuple[Path, Path]:
    try:
        tools = resolver.resolve_tools(build=False)
    except BinaryError as error:  # CI builds them first: missing fails, never skips
        pytest.fail(str(error))
    return tools.helm, tools.helm4


@pytest.fixture
def release(fleet: FleetHandle) -> Iterator[tuple[str, str, list[str]]]:
    """A release name, its namespace and the flags naming the manager; uninstalled after."""
    name, namespace = "cert", f"apicert-{uuid.uuid4().hex[:6]}"
    flags = ["--kubeconfig", str(fleet.kubeconfig("manager")), "--namespace", namespace]
    try:
        yield name, namespace, flags
    finally:
        helm = resolver.resolve_tools(build=False).helm
        subprocess.run([str(helm), "uninstall", name, *flags], capture_output=True, check=False)
        client = fleet.client("manager")

        async def remove() -> None:
            async with client:
                with contextlib.suppress(ApiError):
                    await client.delete(NAMESPACES, namespace)

        asyncio.run(remove())


def _helm(binary: Path, *args: str) -> None:
    answer = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=180, check=False
    )
    assert answer.returncode == 0, answer.stderr


def test_the_self_signed_certificate_survives_upgrades(
    helm_binaries: tuple[Path, Path],
    release: tuple[str, str, list[str]],
    fleet: FleetHandle,
) -> None:
    helm3, helm4 = helm_binaries
    name, namespace, flags = release
    _helm(helm3, "install", name, str(CHART), "--create-namespace", *flags, *QUIET)
    first = _secret_data(fleet, namespace, f"{name}-jobrelay-api-tls")
    # The serving certificate is signed by the CA, for the Service's names.
    cert = x509.load_pem_x509_certificate(first["tls.crt"])
    ca = x509.load_pem_x509_certificate(first["ca.crt"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{name}-jobrelay-api.{namespace}.svc" in names.get_values_for_type(x509.DNSName)
    assert _ca_bundle(fleet) == first["ca.crt"]
    for binary in (helm3, helm4):
        _helm(binary, "upgrade", name, str(CHART), *flags, *QUIET)
        assert _secret_data(fleet, namespace, f"{name}-jobrelay-api-tls") == first
        assert _ca_bundle(fleet) == first["ca.crt"]


def _ca_bundle(fleet: FleetHandle) -> bytes:
    """The caBundle of the chart's APIService v1alpha1.api.jobrelay.dev."""

    async def read() -> bytes:
        async with fleet.client("manager") as client:
            stored = await client.get(API_SERVICES, API_SERVICE_NAME)
        return base64.b64decode(stored["spec"]["caBundle"])

    return asyncio.run(read())


def _secret_data(fleet: FleetHandle, namespace: str, secret: str) -> dict[str, bytes]:
    async def read() -> dict[str, bytes]:
        async with fleet.client("manager") as client:
            stored = await client.get(SECRETS, secret, namespace=namespace)
        return {key: base64.b64decode(value) for key, value in stored["data"].items()}

    return asyncio.run(read())
