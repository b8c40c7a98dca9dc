"""The chart with ``api.certificate.source: secret``: the operator's Secret, its CA given
as ``api.certificate.caBundle``, and a renewal served without a restart.

The chart is rendered and applied, and its Deployment's container run under bubblewrap,
as ``test_deploy_as_shipped.py`` does (its fixtures), with ``source: secret`` and a
reload interval of one second. The rendered APIService's caBundle is the operator's CA,
and it becomes Available through it (a request of the dashboard's fleet view through the
manager's apiserver is served). Then the mounted Secret's files are replaced the way a
kubelet does (a new directory behind the ``..data`` symlink, the same CA): the new
certificate is served to new connections within two minutes (here: seconds), by the
same process (no restart), and requests through the manager still work.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import SECRETS
from jobrelay.relayapi.route_rules import API_PATH
from jobrelay.relayapi.self_certificate_rules import serving_hosts
from jobrelay.web.tls import certificate_authority, signed_serving_certificate
from tests.conftest import FleetHandle
from tests.e2e import test_deploy_as_shipped as shipped
from tests.e2e.aggregated import manager_get
from tests.e2e.test_deploy_as_shipped import (
    CHART_NAMESPACE,
    RELEASE,
    Installed,
    Rendered,
    leading,
    reach_the_sandbox,
    render_chart,
    running_pod,
)
from tests.kubetools import eventually

pytestmark = pytest.mark.e2e

SECRET = "operators-api-tls"
SERVICE = f"{RELEASE}-jobrelay-api.{CHART_NAMESPACE}.svc"
LIFE = datetime.timedelta(days=30)
# The shipped chart's fixtures, by name: the objects applied, the ServiceAccount's token.
installed = shipped.installed
service_account_token = shipped.service_account_token


@pytest.fixture(scope="module")
def authority() -> tuple[bytes, bytes]:
    """The operator's CA (certificate, key)."""
    return certificate_authority("operators-ca", LIFE)


def issued(authority: tuple[bytes, bytes]) -> dict[str, bytes]:
    """A serving certificate of the chart's Service names, as the operator's Secret holds it."""
    hosts = serving_hosts(f"https://{SERVICE}:443", CHART_NAMESPACE)
    cert, key = signed_serving_certificate(*authority, hosts, LIFE)
    return {"tls.crt": cert, "tls.key": key, "ca.crt": authority[0]}


@pytest.fixture
def rendered(tmp_path: Path, authority: tuple[bytes, bytes]) -> Rendered:
    """The chart with source secret (overrides test_deploy_as_shipped's ``rendered``)."""
    certificate = {"source": "secret", "secretName": SECRET, "caBundle": authority[0].decode(),
                   "reloadIntervalSeconds": 1}  # fmt: skip
    return render_chart(tmp_path, api={"certificate": certificate})


def replace_like_a_kubelet(volume: Path, data: dict[str, bytes]) -> None:
    """The volume's files replaced by ``data`` as a kubelet updates a Secret volume: a new
    timestamped directory, the ``..data`` link swapped to it, each key a link through it."""
    stamp = volume / "..2026_11_29_renewed"
    stamp.mkdir(mode=0o755)
    for key, value in data.items():
        (stamp / key).write_bytes(value)
        (stamp / key).chmod(0o440)
    (volume / "..data_tmp").symlink_to(stamp.name)
    os.replace(volume / "..data_tmp", volume / "..data")
    for key in data:
        (volume / f"{key}_tmp").symlink_to(Path("..data") / key)
        os.replace(volume / f"{key}_tmp", volume / key)


async def served_certificate(port: int, ca: bytes) -> x509.Certificate:
    """The certificate a new TLS connection to the API port gets (verified as the Service)."""
    context = ssl.create_default_context(cadata=ca.decode())
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                    server_hostname=SERVICE)  # fmt: skip
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der)


async def fleet_view_served(kubeconfig: Path) -> bool:
    """The dashboard's fleet view through the manager's apiserver (the APIService)."""
    return (await manager_get(kubeconfig, f"{API_PATH}/fleet")).status_code == 200


async def test_source_secret_is_available_and_a_renewed_certificate_is_served_without_a_restart(
    installed: Installed,
    rendered: Rendered,
    service_account_token: str,
    authority: tuple[bytes, bytes],
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    tmp_path: Path,
) -> None:
    manager, admin = clients["manager"], fleet.kubeconfig("manager")
    first, second = issued(authority), issued(authority)
    secret = {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": SECRET, "namespace": CHART_NAMESPACE},
        "data": {key: base64.b64encode(value).decode() for key, value in first.items()},
    }  # fmt: skip
    await manager.create(SECRETS, secret, namespace=CHART_NAMESPACE)
    # The rendered caBundle is the operator's CA, in the APIService and every webhook.
    assert rendered.one("APIService")["spec"]["caBundle"] == base64.b64encode(authority[0]).decode()
    webhooks = rendered.one("MutatingWebhookConfiguration")["webhooks"]
    assert {w["clientConfig"]["caBundle"] for w in webhooks} == {
        base64.b64encode(authority[0]).decode()
    }
    async with running_pod(
        rendered.deployment, rendered, service_account_token, fleet, manager, tmp_path
    ) as process:
        await eventually(lambda: leading(rendered), timeout=60, what="/readyz 200 as the leader")
        await reach_the_sandbox(manager, rendered)
        await eventually(lambda: fleet_view_served(admin), timeout=60,
                         what="the APIService Available with the given caBundle")  # fmt: skip
        port = rendered.api_port
        assert await served_certificate(port, authority[0]) == _cert(first)
        pid = process.pid

        replace_like_a_kubelet(tmp_path / "pod" / "api-tls", second)

        async def renewed_served() -> bool:
            return await served_certificate(port, authority[0]) == _cert(second)

        await eventually(renewed_served, timeout=120, interval=0.5,
                         what="the renewed certificate served")  # fmt: skip
        assert process.pid == pid
        process.assert_alive()
        assert await fleet_view_served(admin), "the API through the manager after the renewal"
        process.assert_clean_log()


def _cert(data: dict[str, Any]) -> x509.Certificate:
    return x509.load_pem_x509_certificate(data["tls.crt"])
