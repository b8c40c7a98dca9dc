"""The aiohttp transport and direct path of ApiClient against a real kube-apiserver.

Plain reads and writes go straight over aiohttp; streams go through httpx2 on
the same pool; credentials, refusals and a dead or silent server read as before.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.kube.connecting import ApiOptions
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES
from jobrelay.localfleet.cluster_files import Credential
from jobrelay.vocabulary.resource import Resource

pytestmark = pytest.mark.integration

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


def _kubeconfig_at(fleet: Any, server: str) -> dict[str, Any]:
    """The manager's admin kubeconfig, pointed at ``server``."""
    config: dict[str, Any] = yaml.safe_load(fleet.kubeconfig("manager").read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    return config


async def test_the_direct_path_reads_and_writes_and_watches_share_the_pool(
    fleet: Any, namespace: str
) -> None:
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("manager")) as client:
        assert client._direct is not None  # a client certificate: the direct path
        created = await client.create(
            CONFIGMAPS,
            {"metadata": {"name": "direct"}, "data": {"a": "1"}},
            namespace=namespace,
        )
        async with client.watch(
            CONFIGMAPS,
            namespace=namespace,
            # Not the namespace's kube-root-ca.crt, which its controller may publish after
            # this create (a new namespace's ADDED then comes first).
            field_selector="metadata.name=direct",
            resource_version=created["metadata"]["resourceVersion"],
            timeout_seconds=30,
        ) as events:
            patched = await client.patch(
                CONFIGMAPS, "direct", {"data": {"a": "2"}}, namespace=namespace
            )
            event = await anext(events)
        assert event.type == "MODIFIED"
        assert event.object["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        with pytest.raises(ApiError) as caught:
            await client.create(CONFIGMAPS, {"metadata": {"name": "direct"}}, namespace=namespace)
        assert caught.value.is_already_exists


@pytest.mark.parametrize(
    ("credential", "allowed"), [(Credential.TOKEN, True), (Credential.NO_RIGHTS_TOKEN, False)]
)
async def test_a_bearer_token_rides_the_direct_path(
    fleet: Any, namespace: str, credential: Credential, allowed: bool
) -> None:
    async with ApiClient.from_kubeconfig(fleet.kubeconfig("manager", credential)) as client:
        assert client._direct is not None
        assert client._direct.headers["Authorization"].startswith("Bearer ")
        if allowed:
            assert (await client.get(NAMESPACES, namespace))["metadata"]["name"] == namespace
        else:
            with pytest.raises(ApiError) as caught:
                await client.get(NAMESPACES, namespace)
            assert caught.value.code == 403


async def test_a_refused_token_is_tried_through_the_credentials_flow_and_refused(
    fleet: Any,
) -> None:
    config = yaml.safe_load(fleet.kubeconfig("manager", Credential.TOKEN).read_text())
    for user in config["users"]:
        user["user"]["token"] = "forged-" + "x" * 40
    async with ApiClient.from_kubeconfig_dict(config) as client:
        with pytest.raises(ApiError) as caught:
            await client.get(NAMESPACES, "default")
        assert caught.value.code == 401
        assert client.request_counts["get"] == 1  # one request as the caller sees it


async def test_a_refused_connection_names_the_errno() -> None:
    # A bound socket that does not listen refuses connections, and holding it keeps
    # the port ours for the whole test.
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        fleetless = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        async with ApiClient.from_kubeconfig_dict(fleetless) as client:
            with pytest.raises(ApiError) as caught:
                await client.get(NAMESPACES, "default")
    assert caught.value.is_unreachable
    assert caught.value.reason == "Unreachable"
    assert "Errno 111" in caught.value.message


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A TCP server that accepts and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_silent_server_times_out(fleet: Any, silent_server: str) -> None:
    options = ApiOptions(connect_timeout=0.5, request_timeout=0.5)
    async with ApiClient.from_kubeconfig_dict(
        _kubeconfig_at(fleet, silent_server), options=options
    ) as client:
        with pytest.raises(ApiError) as caught:
            await client.get(NAMESPACES, "default")
    assert caught.value.is_unreachable
    assert caught.value.reason == "Timeout"
