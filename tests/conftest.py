"""Shared fixtures: a real local fleet (manager + 2 workers) for integration and e2e tests.

The fleet comes up once per test run in a temporary directory and goes down at
the end. For fast local iteration, point ``JOBRELAY_TEST_FLEET_DIR`` at a
fleet you keep running (``jobrelay fleet up --state-dir DIR``): it is reused
and left running.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jobrelay.kube.api import NAMESPACES, ApiClient, ApiError
from jobrelay.localfleet.cluster import Credential
from jobrelay.localfleet.fleet import LocalFleet, NodeShape

TEST_WORKERS = 2


class FleetHandle:
    """What tests need of the fleet: kubeconfigs and cluster names."""

    def __init__(self, local: LocalFleet) -> None:
        self.local = local

    @property
    def state_dir(self) -> Path:
        return self.local.state_dir

    @property
    def workers(self) -> list[str]:
        return self.local.workers

    @property
    def clusters(self) -> list[str]:
        return list(self.local.clusters)

    def kubeconfig(self, cluster: str, credential: Credential = Credential.CERT) -> Path:
        """The cluster's kubeconfig: admin client certificate, or a bearer token."""
        return self.local.kubeconfig(cluster, credential)

    def client(self, cluster: str) -> ApiClient:
        return ApiClient.from_kubeconfig(self.kubeconfig(cluster), cluster=cluster)


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetHandle]:
    import asyncio

    reuse = os.environ.get("JOBRELAY_TEST_FLEET_DIR")
    state_dir = Path(reuse) if reuse else tmp_path_factory.mktemp("fleet")
    local = LocalFleet(state_dir)
    # A fresh event loop: the session's asyncio loop may not be running yet here.
    asyncio.run(
        local.up(workers=TEST_WORKERS, node_shape=NodeShape(count=2, cpu="16", memory="64Gi"))
    )
    try:
        yield FleetHandle(local)
    finally:
        if not reuse:
            local.down(purge=True)


@pytest.fixture
async def clients(fleet: FleetHandle) -> AsyncIterator[dict[str, ApiClient]]:
    """An ApiClient per cluster (admin), closed after the test."""
    made = {name: fleet.client(name) for name in fleet.clusters}
    try:
        yield made
    finally:
        for client in made.values():
            await client.aclose()


@pytest.fixture
async def namespace(
    request: pytest.FixtureRequest, clients: dict[str, ApiClient]
) -> AsyncIterator[str]:
    """A fresh namespace, created on every cluster and deleted after the test."""
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    for client in clients.values():
        await client.create(NAMESPACES, body)
    try:
        yield name
    finally:
        for client in clients.values():
            with contextlib.suppress(ApiError):
                await client.delete(NAMESPACES, name)


# Shared, noisy 2-core machines: judge properties by their examples, not by timing.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("jobrelay", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("jobrelay")
