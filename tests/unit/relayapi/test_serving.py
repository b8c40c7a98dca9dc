"""One certificate for every replica: --api-ca-file is the APIService's caBundle."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.unit.controller.fakes import FakeCluster

from jobrelay.localfleet import pki
from jobrelay.relayapi.managedby_webhook_rules import ManagedByDefault
from jobrelay.relayapi.serving import RunningApi, register, start_api
from jobrelay.relayapi.settings import ApiSettings


async def _handle(*_args: Any) -> None:
    return None


def HANDLER(_trust: Any) -> Any:
    return SimpleNamespace(handle=_handle)


async def _start(manager: Any, settings: ApiSettings) -> RunningApi:
    return await start_api(manager, settings, HANDLER, namespace="team")


def _issued(tmp_path: Path, name: str) -> tuple[pki.CertPair, pki.CertPair]:
    ca = pki.ensure_ca(tmp_path / name)
    serving = pki.issue(
        ca, tmp_path / name, "api", common_name="jobrelay-api",
        server_hosts=("jobrelay-api.team.svc", "127.0.0.1"),
    )  # fmt: skip
    return ca, serving


async def test_the_ca_file_is_published_and_clients_verify_against_it(tmp_path: Path) -> None:
    ca, serving = _issued(tmp_path, "chart")
    settings = ApiSettings(
        address="127.0.0.1:0",
        cert_file=str(serving.cert),
        key_file=str(serving.key),
        ca_file=str(ca.cert),
    )
    async with FakeCluster("manager").client() as manager:
        api = await _start(manager, settings)
        try:
            assert api.ca_pem == ca.cert.read_text()
            # The aggregator trusts the caBundle and checks the Service's name.
            client = ssl.create_default_context(cadata=api.ca_pem)
            _reader, writer = await asyncio.open_connection(
                "127.0.0.1", api.bound[1], ssl=client, server_hostname="jobrelay-api.team.svc"
            )
            writer.close()
        finally:
            await api.close()


async def test_without_a_ca_file_the_certificate_is_its_own_ca_and_names_the_service(
    tmp_path: Path,
) -> None:
    settings = ApiSettings(address="127.0.0.1:0")
    async with FakeCluster("manager").client() as manager:
        api = await _start(manager, settings)
        try:
            assert api.ca_pem.startswith("-----BEGIN CERTIFICATE-----")
            # The name the aggregator verifies (the Service --api-register makes).
            client = ssl.create_default_context(cadata=api.ca_pem)
            _reader, writer = await asyncio.open_connection(
                "127.0.0.1", api.bound[1], ssl=client, server_hostname="jobrelay-api.team.svc"
            )
            writer.close()
        finally:
            await api.close()


@pytest.mark.parametrize("problem", ["other CA", "no certificate"])
async def test_a_ca_that_does_not_fit_is_refused_at_start(tmp_path: Path, problem: str) -> None:
    _ca, serving = _issued(tmp_path, "chart")
    other, _ = _issued(tmp_path, "other")
    settings = (
        ApiSettings(address="127.0.0.1:0", cert_file=str(serving.cert),
                    key_file=str(serving.key), ca_file=str(other.cert))
        if problem == "other CA"
        else ApiSettings(address="127.0.0.1:0", ca_file=str(other.cert))
    )  # fmt: skip
    async with FakeCluster("manager").client() as manager:
        with pytest.raises(ValueError, match="--api-ca-file"):
            await _start(manager, settings)


class _RecordingManager:
    """Records the server-side applies register makes."""

    def __init__(self) -> None:
        self.applied: dict[str, dict[str, Any]] = {}

    async def patch(self, resource: Any, name: str, body: dict[str, Any], **_: Any) -> None:
        self.applied[f"{resource.plural}/{name}"] = body


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_the_webhook_is_registered_with_the_apiservice_at_this_replicas_address(
    policy: str,
) -> None:
    manager = _RecordingManager()
    api = RunningApi(None, None, ("127.0.0.1", 40123), "PEM")  # type: ignore[arg-type]
    job = ManagedByDefault("batch", "v1", "jobs", ("spec", "managedBy"), "jobrelay.dev/relay")
    await register(manager, "jobrelay-system", api, [job], policy)  # type: ignore[arg-type]
    assert "apiservices/v1alpha1.api.jobrelay.dev" in manager.applied
    config = manager.applied["mutatingwebhookconfigurations/jobrelay-managedby"]
    for webhook in config["webhooks"]:
        assert webhook["clientConfig"]["url"] == "https://127.0.0.1:40123/mutate/managedby"
        assert webhook["clientConfig"]["caBundle"] == base64.b64encode(b"PEM").decode()
        assert webhook["failurePolicy"] == policy
