"""Shared fixtures: a real local fleet (manager + 2 workers) for integration and e2e tests.

The fleet comes up once per test run in a temporary directory and goes down at
the end. For fast local iteration, point ``JOBRELAY_TEST_FLEET_DIR`` at a
fleet you keep running (``jobrelay fleet up --state-dir DIR``): it is reused
and left running.

Tests that need differently shaped workers ask ``shaped_fleet`` for a fleet of a
configuration file (``jobrelay fleet up --config``; e.g. ``PLACEMENT_SHAPE``): it is
a separate fleet with a state directory of its own, started on first use, shared by
every test asking for the same file, and stopped when another file is asked for (at
most one shaped fleet runs at a time) or at the end of the session.
``JOBRELAY_TEST_SHAPED_FLEET_DIR`` names a shaped fleet you keep running instead
(``jobrelay fleet up --config FILE --state-dir DIR``).

Run in parallel (pytest-xdist: ``make test`` where the kernel allows, see the Makefile), each
test process has fleets of its own, on ports of its own: ``JOBRELAY_FLEET_PORTS`` gives
each process a disjoint slice of the ports below the kernel's ephemeral range, so that no
fleet ever picks a port another process's fleet holds, or keeps for a cluster it
restarts.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from jobrelay.fleet.workerclusters import default_origin
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import NAMESPACES
from jobrelay.localfleet import ports, shape
from jobrelay.localfleet.cluster_files import Credential
from jobrelay.localfleet.fleet_state import NodeShape
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.vocabulary.names import ORIGIN_LABEL

TEST_WORKERS = 2
SHAPES = Path(__file__).parent / "e2e" / "shapes"
# worker-small (onprem), worker-big (cloud, west) and worker-gpu (tainted, 4 GPUs).
PLACEMENT_SHAPE = SHAPES / "placement.yaml"


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and ports.PORT_RANGE_VARIABLE not in os.environ:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        os.environ[ports.PORT_RANGE_VARIABLE] = port_slice(int(worker[2:]), count)


def port_slice(index: int, count: int) -> str:
    """The ``index``-th of ``count`` equal slices of the picked ports below the ephemeral
    range, as ``JOBRELAY_FLEET_PORTS`` takes it."""
    first, end = ports.LOWEST_PICKED_PORT, ports.ephemeral_range()[0]
    width = (end - first) // count
    return f"{first + index * width}-{first + (index + 1) * width - 1}"


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


@contextlib.contextmanager
def started_fleet(config: Path, state_dir: Path) -> Iterator[FleetHandle]:
    """A fleet of the shape in ``config`` (as `jobrelay fleet up --config`), up while in use,
    then stopped and its ``state_dir`` deleted."""
    import asyncio

    local = LocalFleet(state_dir, progress=lambda _message: None)
    try:
        asyncio.run(local.up(shape=shape.load(config)))
        yield FleetHandle(local)
    finally:
        local.down(purge=True)


ShapedFleet = Callable[[Path], FleetHandle]


@pytest.fixture(scope="session")
def shaped_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShapedFleet]:
    """``shaped_fleet(config)``: the running fleet of that shape (see the module's docstring).

    Call it from a (sync) fixture, as ``placement_fleet`` does, not from an async test:
    it runs its own event loop.
    """
    import asyncio

    reuse = os.environ.get("JOBRELAY_TEST_SHAPED_FLEET_DIR")
    running: dict[Path, FleetHandle] = {}
    with contextlib.ExitStack() as stack:

        def start(config: Path) -> FleetHandle:
            config = config.resolve()
            if config in running:
                return running[config]
            if reuse:
                local = LocalFleet(Path(reuse), progress=lambda _message: None)
                # Brings it up if stopped; refuses a fleet of another shape.
                asyncio.run(local.up(shape=shape.load(config)))
                running[config] = FleetHandle(local)
                return running[config]
            stack.close()  # one shaped fleet at a time: the machine is small
            running.clear()
            state_dir = tmp_path_factory.mktemp(f"fleet-{config.stem}")
            running[config] = stack.enter_context(started_fleet(config, state_dir))
            return running[config]

        yield start


@pytest.fixture(scope="module")
def placement_fleet(shaped_fleet: ShapedFleet) -> FleetHandle:
    """The fleet of ``PLACEMENT_SHAPE``: worker-small, worker-big and worker-gpu.

    Asked again for each module: a module of another shape in between stops this one
    (one shaped fleet at a time), and with two test processes the files come in any order.
    """
    return shaped_fleet(PLACEMENT_SHAPE)


@pytest.fixture(scope="module")
def relay_fleet(fleet: FleetHandle) -> FleetHandle:
    """The fleet a module's tests and controller run on: the standard ``fleet`` unless
    the module overrides this fixture (with ``placement_fleet``, say)."""
    return fleet


@pytest.fixture
async def clients(relay_fleet: FleetHandle) -> AsyncIterator[dict[str, ApiClient]]:
    """An ApiClient per cluster (admin), closed after the test."""
    made = {name: relay_fleet.client(name) for name in relay_fleet.clusters}
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
    # Open to the fleet's manager on every worker (a worker namespace without the label
    # is never used: placement/namespaces.py).
    origin = await default_origin(clients["manager"])
    labels = {ORIGIN_LABEL: origin}
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
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
