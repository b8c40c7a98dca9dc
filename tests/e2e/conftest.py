"""Fixtures of the end-to-end tests: the real controller against the real local fleet.

Design
------
* ``controller`` is **module-scoped**: each test module gets its own
  ``python -m jobrelay run --kubeconfig <manager> --log-format json`` process,
  with the extra arguments the module lists in ``CONTROLLER_ARGS`` (default:
  none, and ``--finished-mirror-ttl 0`` unless the module says how finished
  mirrors are kept: finished mirrors are deleted at once), and
  ``--api-register never`` unless the module sets ``CONTROLLER_API_REGISTER``
  (None: the default, auto, as a user's plain `jobrelay run`). Only one
  controller runs at a time: pytest finishes a module's fixtures before the
  next module starts, and two controllers of the same name on one manager
  would fight over the same Jobs.
* ``WORKERS_ADDED = "service-account"`` in a module registers the fleet's workers with
  `jobrelay clusters add --create-service-account` before its controller starts (and
  with their admin kubeconfigs again after): every logs module does, so logs are read
  with the least-privilege identity docs/add-a-worker.md recommends.
* Before each start the WorkerClusters' status is cleared, so readiness is
  either this process's own readiness log line (``"msg": "jobrelay ready..."``
  or ``"event": "ready"``) or every worker showing ``Connected=True`` again.
* Comparing a management Job with its mirror does not need
  ``--keep-finished-mirrors``: the ``relay`` fixture watches every Job of the
  test's namespace on each worker from before the test creates anything, so the
  mirror's final version is known even after jobrelay deleted it, and the
  default mode's deletion is checked at the same time. The chaos module runs
  with ``--keep-finished-mirrors`` so that it can also count the mirrors left
  on the workers at the end.
* After every test that used the controller, the part of its log written
  during that test must hold no apiserver 422 / ``Invalid`` and no
  ``Traceback``, and the process must still be alive (if it died, it is
  restarted for the next test and this test fails). At module teardown it gets
  SIGTERM (by PID) and must exit with code 0 within 30 s; the whole log is
  checked once more.
* ``secret_leak_watch`` (session, autouse) watches the manager's Events, Jobs,
  WorkerClusters and kubeconfig Secrets from the first e2e test on; at the end
  of the session every controller log and all it recorded are scanned for the
  fleet's credential material (tests/e2e/leakwatch.py): one hit fails the run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.fleet.workerclusters import default_origin
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import MUTATING_WEBHOOK_CONFIGURATIONS, NAMESPACES
from jobrelay.localfleet.cluster_files import Credential
from jobrelay.relayapi.managedby_webhook_rules import WEBHOOK_CONFIGURATION
from jobrelay.vocabulary.names import ORIGIN_LABEL
from tests.e2e.leakwatch import LeakWatch
from tests.e2e.support import ControllerProcess, Relay, Replica
from tests.e2e.worker_identity import SERVICE_ACCOUNT, added_with_service_accounts

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

NamespaceFactory = Callable[[Iterable[str]], Awaitable[str]]
_LEAK_WATCH = pytest.StashKey[LeakWatch]()
_WORKER_LEAK_SUMMARIES = pytest.StashKey[list[str]]()
_LEAK_SUMMARY = "secret_leak_summary"  # in a test process's xdist workeroutput


@pytest.fixture(scope="session", autouse=True)
async def secret_leak_watch(
    request: pytest.FixtureRequest, fleet: FleetHandle
) -> AsyncIterator[LeakWatch]:
    """No credential of the fleet in any controller log, Event or status of the session."""
    async with LeakWatch(fleet) as watch:
        request.config.stash[_LEAK_WATCH] = watch
        yield watch
    report = watch.scan()
    assert not report.leaks, watch.describe_leaks()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A parallel run's test process hands its scan's summary to the one that reports."""
    watch = session.config.stash.get(_LEAK_WATCH, None)
    output = getattr(session.config, "workeroutput", None)
    if watch is not None and output is not None:
        output[_LEAK_SUMMARY] = watch.summary()


def pytest_testnodedown(node: Any, error: object) -> None:
    """(pytest-xdist) Each test process's scan summary, kept for the report."""
    summary = getattr(node, "workeroutput", {}).get(_LEAK_SUMMARY)
    if summary:
        node.config.stash.setdefault(_WORKER_LEAK_SUMMARIES, []).append(summary)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    watch = config.stash.get(_LEAK_WATCH, None)
    for summary in config.stash.get(_WORKER_LEAK_SUMMARIES, []):
        terminalreporter.write_line(summary)
    if watch is not None:
        terminalreporter.write_line(watch.summary())


@pytest.fixture(scope="module")
def relay_fleet(request: pytest.FixtureRequest, fleet: FleetHandle) -> Iterator[FleetHandle]:
    """The standard ``fleet``; with ``WORKERS_ADDED = "service-account"`` in the module,
    its workers registered with `clusters add --create-service-account` for the module
    (tests/e2e/worker_identity.py), as docs/add-a-worker.md tells operators to."""
    if getattr(request.module, "WORKERS_ADDED", "admin") != SERVICE_ACCOUNT:
        yield fleet
        return
    with added_with_service_accounts(fleet, getattr(request.module, "WORKER_KINDS", ())):
        yield fleet


@pytest.fixture(scope="module")
async def controller(
    request: pytest.FixtureRequest,
    relay_fleet: FleetHandle,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ControllerProcess]:
    """The jobrelay controller for this module (``CONTROLLER_ARGS`` in the module adds flags),
    on the module's ``relay_fleet``."""
    fleet = relay_fleet
    extra_args = list(getattr(request.module, "CONTROLLER_ARGS", ()))
    module = request.module.__name__.rsplit(".", 1)[-1]
    log_path = tmp_path_factory.mktemp(f"jobrelay-{module}") / "controller.log"
    process = ControllerProcess(
        fleet.kubeconfig("manager"),
        log_path,
        workers=fleet.workers,
        extra_args=extra_args,
        # "never" unless the module says otherwise (None: `jobrelay run`'s own default).
        api_register=getattr(request.module, "CONTROLLER_API_REGISTER", "never"),
    )
    manager = fleet.client("manager")
    try:
        await process.start(manager)
        try:
            await process.wait_ready(manager)
            yield process
        finally:
            if process.running:
                await process.stop()
            else:
                process.assert_alive()  # fails with the log's tail
        process.assert_clean_log()
    finally:
        if process.running:  # stop() failed half way: never leave it behind
            await process.kill()
        # A registered managedBy webhook outlives its controller (failurePolicy Fail: what
        # it would default is refused meanwhile): gone before the next module's.
        with contextlib.suppress(ApiError):
            await manager.delete(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION)
        await manager.aclose()


@pytest.fixture(autouse=True)
async def _controller_log_per_test(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Blame a 422, a traceback or a crash on the test during which it happened."""
    if "controller" not in request.fixturenames:
        yield
        return
    process: ControllerProcess = request.getfixturevalue("controller")
    process.mark(f"test {request.node.nodeid} begins")
    since = process.log_size()
    yield
    process.mark(f"test {request.node.nodeid} ends")
    if not process.running:
        code = process.returncode()
        tail = process.log_tail()
        await process.start()  # for the module's next tests
        await process.wait_ready()
        pytest.fail(f"jobrelay died during this test (exit code {code}); its log ends:\n{tail}")
    process.assert_clean_log(since)


@pytest.fixture
async def user(fleet: FleetHandle) -> AsyncIterator[ApiClient]:
    """The manager as a user other than the controller: the fleet's bearer-token admin
    (system:masters), so whatever refuses it is a policy, not RBAC."""
    async with ApiClient.from_kubeconfig(
        fleet.kubeconfig("manager", Credential.TOKEN), cluster="manager-user"
    ) as client:
        yield client


@pytest.fixture
async def make_namespace(
    request: pytest.FixtureRequest, clients: dict[str, ApiClient]
) -> AsyncIterator[NamespaceFactory]:
    """Create a fresh namespace on the given clusters only; deleted from every cluster after."""
    made: list[str] = []
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower())[:36]

    async def make(clusters: Iterable[str]) -> str:
        name = f"{base.strip('-')}-{uuid.uuid4().hex[:6]}"
        made.append(name)
        labels = {ORIGIN_LABEL: await default_origin(clients["manager"])}  # open to it
        for cluster in clusters:
            await clients[cluster].create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": name, "labels": labels}},
            )  # fmt: skip
        return name

    yield make
    for name in made:
        for client in clients.values():  # jobrelay may have created it on a worker
            with contextlib.suppress(ApiError):
                await client.delete(NAMESPACES, name)


@pytest.fixture
async def relay(
    controller: ControllerProcess,
    relay_fleet: FleetHandle,
    clients: dict[str, ApiClient],
    namespace: str,
) -> AsyncIterator[Relay]:
    """Submit and check relayed Jobs in the test's namespace (on every cluster)."""
    async with Relay(clients, relay_fleet.workers, namespace, controller) as watched:
        yield watched


@pytest.fixture
async def make_relay(
    controller: ControllerProcess, fleet: FleetHandle, clients: dict[str, ApiClient]
) -> AsyncIterator[Callable[[str], Awaitable[Relay]]]:
    """A Relay for a namespace of the test's own making."""
    opened: list[Relay] = []

    async def make(namespace: str) -> Relay:
        relay = Relay(clients, fleet.workers, namespace, controller)
        await relay.__aenter__()
        opened.append(relay)
        return relay

    yield make
    for relay in opened:
        await relay.__aexit__(None, None, None)


@pytest.fixture
async def replicas(fleet: FleetHandle, tmp_path: Path) -> AsyncIterator[dict[str, Replica]]:
    """Two controller replicas (not started) with leader election; stopped, their logs
    checked clean, after."""
    made = {
        name: Replica(fleet.kubeconfig("manager"), tmp_path / f"{name}.log", workers=fleet.workers)
        for name in ("a", "b")
    }
    try:
        yield made
    finally:
        for replica in made.values():
            if replica.running:
                await replica.stop()
        for replica in made.values():
            replica.assert_clean_log()
