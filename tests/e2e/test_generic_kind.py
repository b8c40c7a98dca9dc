"""Any CRD with ``spec.managedBy`` is relayed by the generic adapter.

The kind is the test's own: ``Sleeper.v1.e2e.jobrelay.dev``, installed on the
manager and on every worker before the controller starts (and removed after the
module). Its "controller" is :class:`SleeperController`, an asyncio task per
cluster that does what a real controller of the kind would: it skips every
Sleeper whose ``spec.managedBy`` is set, and runs the others by writing their
status through the status subresource (``phase: Running`` and a ``Running``
condition, then after ``spec.seconds`` a True ``Succeeded`` or ``Failed``
condition as ``spec.outcome`` says; ``phase: Suspended`` while
``spec.suspend``). It runs on the manager too, where it must leave the managed
Sleepers alone, and runs the unmanaged ones, as the Job controller does.

jobrelay is judged by what the apiservers show: the placement annotation, the
mirror (same spec less managedBy, origin labels), the management status (each
version a copy of a version of the mirror's), Events, and the mirror's deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import CRDS
from jobrelay.vocabulary.names import (
    DEFAULT_CONTROLLER_NAME,
)
from jobrelay.vocabulary.resource import Resource
from tests.e2e.support import (
    ControllerProcess,
    Relay,
    assert_dispatched_once_and_cleaned,
    assert_origin_marks,
    finished_on_its_worker,
    outlast,
    placement,
)
from tests.kubetools import Obj, condition, eventually, is_true

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = pytest.mark.e2e

GROUP = "e2e.jobrelay.dev"
SLEEPERS = Resource(GROUP, "v1", "sleepers", "Sleeper", namespaced=True)
# --completed-events: a success gets its Normal Completed Event here (off by default).
CONTROLLER_ARGS = [
    "--kind", "Job.v1.batch", "--kind", f"Sleeper.v1.{GROUP}", "--completed-events"
]  # fmt: skip
OTHER_CONTROLLER = "example.com/someone-else"
TERMINAL = ("Succeeded", "Failed")

SLEEPER_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"sleepers.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": "sleepers",
            "singular": "sleeper",
            "kind": "Sleeper",
            "listKind": "SleeperList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["seconds"],
                                "properties": {
                                    "managedBy": {
                                        "type": "string",
                                        "maxLength": 63,
                                        "x-kubernetes-validations": [
                                            {
                                                "rule": "self == oldSelf",
                                                "message": "managedBy is immutable",
                                            }
                                        ],
                                    },
                                    "suspend": {"type": "boolean"},
                                    "seconds": {"type": "integer", "minimum": 0},
                                    "outcome": {
                                        "type": "string",
                                        "enum": ["succeed", "fail"],
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


def sleeper_manifest(
    name: str,
    *,
    seconds: int,
    outcome: str = "succeed",
    suspend: bool | None = None,
    managed_by: str | None = DEFAULT_CONTROLLER_NAME,
) -> Obj:
    spec: Obj = {"seconds": seconds, "outcome": outcome}
    if suspend is not None:
        spec["suspend"] = suspend
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Sleeper",
        "metadata": {"name": name, "labels": {"team": "e2e"}, "annotations": {"note": name}},
        "spec": spec,
    }


def sleeper_finished(obj: Mapping[str, Any]) -> bool:
    return any(is_true(obj, kind) for kind in TERMINAL)


def running(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("phase") == "Running" and is_true(obj, "Running")


# -- the Sleepers' own controller (what a worker cluster would run) -------------------


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _condition(kind: str, status: str, reason: str, message: str = "") -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _now(),
    }


class _Run:
    """One Sleeper being run: its latest spec and a wake-up when the spec changes."""

    def __init__(self, obj: Obj) -> None:
        self.obj = obj
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def update(self, obj: Obj) -> None:
        before = self.obj["metadata"].get("generation")
        self.obj = obj
        if obj["metadata"].get("generation") != before:
            self.changed.set()


class SleeperController:
    """Runs the unmanaged Sleepers of one cluster (all namespaces) through their status."""

    def __init__(self, client: ApiClient, cluster: str) -> None:
        self.client = client
        self.cluster = cluster
        self.runs: dict[str, _Run] = {}
        self.skipped: set[str] = set()  # uids of managed Sleepers seen and left alone
        self.ran: set[str] = set()  # uids of Sleepers this controller wrote a status on
        self.errors: list[str] = []  # failed status writes: the tests fail on any
        self.watch_errors: list[str] = []  # retried
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await self.client.list(SLEEPERS)
        for obj in listed.items:
            self._handle("LISTED", obj)
        self._task = asyncio.create_task(
            self._watch(listed.resource_version), name=f"sleepers on {self.cluster}"
        )

    def problems(self) -> list[str]:
        if self._task is not None and self._task.done():
            return [f"{self.cluster}: the watch stopped: {self._task!r}", *self.errors]
        return list(self.errors)

    async def stop(self) -> None:
        tasks = [t for t in [self._task, *(r.task for r in self.runs.values())] if t]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _watch(self, resource_version: str) -> None:
        while True:
            try:
                if not resource_version:  # after a 410 Gone: list again
                    listed = await self.client.list(SLEEPERS)
                    for obj in listed.items:
                        self._handle("LISTED", obj)
                    resource_version = listed.resource_version
                async with self.client.watch(
                    SLEEPERS, resource_version=resource_version, timeout_seconds=60
                ) as stream:
                    async for event in stream:
                        if event.type == "ERROR":
                            raise ApiError.from_status(event.object)
                        version = event.object.get("metadata", {}).get("resourceVersion")
                        if version:
                            resource_version = str(version)
                        if event.type != "BOOKMARK":
                            self._handle(event.type, event.object)
            except ApiError as error:
                # Transient (a dropped connection, a busy apiserver): watch again.
                self.watch_errors.append(str(error))
                if error.is_gone:
                    resource_version = ""
                await asyncio.sleep(0.5)

    def _handle(self, kind: str, obj: Obj) -> None:
        uid = obj["metadata"]["uid"]
        if (obj.get("spec") or {}).get("managedBy"):
            self.skipped.add(uid)  # another controller's (jobrelay's) to run
            return
        run = self.runs.get(uid)
        if kind == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            if run is not None and run.task is not None:
                run.task.cancel()
            return
        if run is not None:
            run.update(obj)
            return
        if sleeper_finished(obj):
            return
        run = _Run(obj)
        self.runs[uid] = run
        run.task = asyncio.create_task(self._run(run), name=f"sleeper {uid}")

    async def _run(self, run: _Run) -> None:
        try:
            await self._drive(run)
        except ApiError as error:
            if not error.is_not_found:  # deleted while running: nothing left to do
                self.errors.append(f"{self.cluster}: {run.obj['metadata']['name']}: {error}")
        except Exception as error:  # reported by the tests, not lost in a task
            self.errors.append(f"{self.cluster}: {run.obj['metadata']['name']}: {error!r}")

    async def _drive(self, run: _Run) -> None:
        started = _now()
        elapsed = 0.0
        while True:
            spec = run.obj.get("spec") or {}
            run.changed.clear()
            if spec.get("suspend"):
                await self._write(
                    run,
                    {
                        "phase": "Suspended",
                        "conditions": [
                            _condition("Running", "False", "Suspended"),
                            _condition("Suspended", "True", "Suspended", "spec.suspend is true"),
                        ],
                    },
                )
                await run.changed.wait()
                continue
            await self._write(
                run,
                {
                    "phase": "Running",
                    "startTime": started,
                    "conditions": [_condition("Running", "True", "Sleeping")],
                },
            )
            began = time.monotonic()
            remaining = max(0.0, float(spec.get("seconds") or 0) - elapsed)
            try:
                await asyncio.wait_for(run.changed.wait(), remaining)
            except TimeoutError:
                break
            elapsed += time.monotonic() - began
        outcome = (run.obj.get("spec") or {}).get("outcome") or "succeed"
        final = (
            _condition("Succeeded", "True", "SleptEnough", "slept as long as asked")
            if outcome == "succeed"
            else _condition("Failed", "True", "Nightmare", "woke up screaming")
        )
        await self._write(
            run,
            {
                "phase": "Succeeded" if outcome == "succeed" else "Failed",
                "startTime": started,
                "completionTime": _now(),
                "conditions": [_condition("Running", "False", "Done"), final],
            },
        )

    async def _write(self, run: _Run, status: Obj) -> None:
        meta = run.obj["metadata"]
        await self.client.patch(
            SLEEPERS,
            meta["name"],
            {"status": status},
            namespace=meta["namespace"],
            subresource="status",
        )
        self.ran.add(meta["uid"])


# -- fixtures ----------------------------------------------------------------------


async def _install_crd(client: ApiClient) -> None:
    try:
        await client.create(CRDS, SLEEPER_CRD)
    except ApiError as error:
        if error.code != 409:
            raise
        existing = await client.get(CRDS, SLEEPER_CRD["metadata"]["name"])  # left by a crash
        body = copy.deepcopy(SLEEPER_CRD)
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        await client.replace(CRDS, body)

    async def served() -> bool:
        crd = await client.get(CRDS, SLEEPER_CRD["metadata"]["name"])
        if not is_true(crd, "Established"):
            return False
        try:
            resources = await client.discover(GROUP, "v1")
        except ApiError as error:
            if error.is_not_found:
                return False
            raise
        return any(r.get("kind") == "Sleeper" for r in resources)

    await eventually(served, timeout=60, what=f"the Sleeper CRD served by {client.cluster}")


async def _remove_crd(client: ApiClient) -> None:
    name = SLEEPER_CRD["metadata"]["name"]
    with contextlib.suppress(ApiError):
        await client.delete(CRDS, name)

    async def gone() -> bool:
        try:
            await client.get(CRDS, name)
        except ApiError as error:
            if error.is_not_found:
                return True
            raise
        return False

    # So that the next run on a reused fleet does not find it terminating.
    await eventually(gone, timeout=60, what=f"the Sleeper CRD removed from {client.cluster}")


@pytest.fixture(scope="module", autouse=True)
async def sleeper_kind(fleet: FleetHandle) -> AsyncIterator[dict[str, SleeperController]]:
    """The Sleeper CRD on every cluster, and its controller on each, before jobrelay starts.

    Autouse module fixtures are set up before the module's other module
    fixtures, so the ``controller`` fixture finds the kind served; it is torn
    down after the controller has stopped.
    """
    clients = {name: fleet.client(name) for name in fleet.clusters}
    controllers: dict[str, SleeperController] = {}
    try:
        await asyncio.gather(*(_install_crd(client) for client in clients.values()))
        for name, client in clients.items():
            controllers[name] = SleeperController(client, name)
            await controllers[name].start()
        yield controllers
    finally:
        for sleeper_controller in controllers.values():
            await sleeper_controller.stop()
        await asyncio.gather(*(_remove_crd(client) for client in clients.values()))
        for client in clients.values():
            await client.aclose()


@pytest.fixture(autouse=True)
def _sleeper_controllers_healthy(
    sleeper_kind: dict[str, SleeperController],
) -> Iterator[None]:
    for sleeper_controller in sleeper_kind.values():
        sleeper_controller.errors.clear()
    yield
    errors = [e for c in sleeper_kind.values() for e in c.problems()]
    assert not errors, f"the test's Sleeper controllers failed: {errors}"


@pytest.fixture
async def sleepers(
    controller: ControllerProcess,
    fleet: FleetHandle,
    clients: dict[str, ApiClient],
    namespace: str,
) -> AsyncIterator[Relay]:
    """Submit and observe Sleepers in the test's namespace (every version, every cluster)."""
    async with Relay(
        clients,
        fleet.workers,
        namespace,
        controller,
        resource=SLEEPERS,
        is_finished=sleeper_finished,
    ) as relay:
        yield relay


# -- checks ------------------------------------------------------------------------


def assert_clean_mirror(mirror: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    """The origin marks, the user's annotations, and the same spec less managedBy."""
    assert_origin_marks(mirror, obj)
    meta = mirror["metadata"]
    assert (meta.get("annotations") or {}).get("note") == obj["metadata"]["name"], meta
    assert "managedBy" not in mirror["spec"], mirror["spec"]
    expected = {k: v for k, v in obj["spec"].items() if k != "managedBy"}
    assert mirror["spec"] == expected, f"mirror spec {mirror['spec']} != {expected}"


def status_problems(relay: Relay, uid: str, cluster: str) -> list[str]:
    """Every status the management Sleeper showed must be one its mirror had, as it stood."""
    mirror_statuses = [
        obj.get("status") or {} for obj in relay.mirror_versions(uid).get(cluster, [])
    ]
    problems = []
    for version in relay.jobs.versions(uid):
        status = version.get("status") or {}
        if status and status not in mirror_statuses:
            rv = version["metadata"].get("resourceVersion")
            problems.append(f"rv {rv}: status {status} is no status the mirror ever had")
    return problems


def history_problems(versions: list[Obj]) -> list[str]:
    """A terminal condition once True stays; the placement never changes once set."""
    problems: list[str] = []
    terminal: set[str] = set()
    placed: str | None = None
    for version in versions:
        rv = version["metadata"].get("resourceVersion")
        for kind in TERMINAL:
            if is_true(version, kind):
                terminal.add(kind)
            elif kind in terminal:
                problems.append(f"rv {rv}: {kind}=True disappeared")
        cluster = placement(version)
        if placed and cluster != placed:
            problems.append(f"rv {rv}: placement changed from {placed} to {cluster}")
        placed = cluster or placed
    return problems


async def finished_and_cleaned(
    relay: Relay, name: str, *, outcome: str, timeout: float = 60.0
) -> tuple[Obj, str, Obj]:
    """Wait until ``name`` ended with ``outcome``; check the copy, the history and the cleanup.

    Returns the management Sleeper, the worker its mirror ran on and the
    mirror's last version (recorded by the watch, as jobrelay deletes it).
    """
    obj, cluster, mirror = await finished_on_its_worker(
        relay, name, outcome=outcome, timeout=timeout
    )
    uid = obj["metadata"]["uid"]
    assert_clean_mirror(mirror, obj)
    assert obj["status"] == mirror["status"], (
        f"{name}: the final status is not the mirror's: {obj['status']} != {mirror['status']}"
    )
    assert not (problems := status_problems(relay, uid, cluster)), problems
    assert not (problems := history_problems(relay.jobs.versions(uid))), problems
    await assert_dispatched_once_and_cleaned(relay, obj, cluster)
    return obj, cluster, mirror


# -- tests -------------------------------------------------------------------------


async def test_sleeper_is_dispatched_shows_live_status_and_succeeds(
    sleepers: Relay, sleeper_kind: dict[str, SleeperController]
) -> None:
    created = await sleepers.submit(sleeper_manifest("nap", seconds=4))
    uid = created["metadata"]["uid"]
    cluster = await sleepers.wait_placed("nap")
    mirror_cluster, mirror = await sleepers.wait_mirror(uid)
    assert mirror_cluster == cluster
    assert_clean_mirror(mirror, created)
    # Live: the worker's Running state reaches the manager while it runs.
    live = await sleepers.wait("nap", running, timeout=30, what="phase Running copied")
    assert not sleeper_finished(live), live["status"]

    obj, _, final = await finished_and_cleaned(sleepers, "nap", outcome="Succeeded")
    assert obj["status"]["phase"] == "Succeeded"
    assert (condition(obj, "Succeeded") or {}).get("reason") == "SleptEnough"
    ran = [v for v in sleepers.jobs.versions(uid) if running(v) and not sleeper_finished(v)]
    assert ran, "the management Sleeper never showed it running before it ended"
    await sleepers.wait_event(
        uid,
        lambda e: (
            e.get("type") == "Normal"
            and e.get("reason") == "Completed"
            and cluster in (e.get("message") or "")
        ),
        what="a Normal Completed Event naming the worker",
    )
    # The Sleepers' controllers: the worker's ran the mirror, none ran the management object.
    assert final["metadata"]["uid"] in sleeper_kind[cluster].ran
    assert uid in sleeper_kind["manager"].skipped
    assert not any(uid in c.ran for c in sleeper_kind.values()), "the managed Sleeper was run"


async def test_failed_sleeper_ends_failed_with_a_warning_event(sleepers: Relay) -> None:
    created = await sleepers.submit(sleeper_manifest("bad-dream", seconds=2, outcome="fail"))
    uid = created["metadata"]["uid"]
    obj, cluster, _ = await finished_and_cleaned(sleepers, "bad-dream", outcome="Failed")
    assert not is_true(obj, "Succeeded")
    assert obj["status"]["phase"] == "Failed"
    event = await sleepers.wait_event(
        uid,
        lambda e: e.get("type") == "Warning" and e.get("reason") == "Failed",
        what="a Warning Failed Event",
    )
    message = event.get("message") or ""
    assert cluster in message and "Nightmare" in message, message


async def test_created_suspended_is_not_dispatched_until_resumed(sleepers: Relay) -> None:
    created = await sleepers.submit(sleeper_manifest("later", seconds=1, suspend=True))
    uid = created["metadata"]["uid"]
    await sleepers.settled("later")  # reconciled since it was created: held, not dispatched
    obj = await sleepers.get("later")
    assert not placement(obj), f"a suspended Sleeper was placed: {placement(obj)}"
    assert not obj.get("status"), f"a Sleeper that never ran has a status: {obj.get('status')}"
    assert sleepers.mirror_uids(uid) == set(), "a mirror was created while it was suspended"

    await sleepers.set_suspend("later", False)
    _, _, mirror = await finished_and_cleaned(sleepers, "later", outcome="Succeeded")
    assert mirror["spec"].get("suspend") is False, mirror["spec"]


async def test_suspend_and_resume_follow_to_the_same_mirror(
    sleepers: Relay, clients: dict[str, ApiClient]
) -> None:
    created = await sleepers.submit(sleeper_manifest("siesta", seconds=5, suspend=False))
    uid = created["metadata"]["uid"]
    await sleepers.wait("siesta", running, timeout=30, what="phase Running copied")
    running_since = time.monotonic()  # or earlier: its 5 s run ends by running_since + 5
    cluster, mirror = await sleepers.wait_mirror(uid)
    mirror_uid = mirror["metadata"]["uid"]

    await sleepers.set_suspend("siesta", True)
    await sleepers.wait(
        "siesta",
        lambda o: (o.get("status") or {}).get("phase") == "Suspended" and is_true(o, "Suspended"),
        timeout=30,
        what="the mirror's Suspended status copied",
    )
    suspended = await clients[cluster].get(SLEEPERS, "siesta", namespace=sleepers.namespace)
    assert suspended["metadata"]["uid"] == mirror_uid, "the mirror was replaced"
    assert suspended["spec"]["suspend"] is True
    await sleepers.wait_event(
        uid, lambda e: e.get("reason") == "Suspended", what="a Suspended Event"
    )
    await outlast(running_since, 5)  # its run's end, had it not been suspended
    await sleepers.settled("siesta")
    held = await sleepers.get("siesta")
    assert not sleeper_finished(held), f"finished while suspended: {held['status']}"
    assert placement(held) == cluster

    await sleepers.set_suspend("siesta", False)
    _, done_on, final = await finished_and_cleaned(sleepers, "siesta", outcome="Succeeded")
    assert done_on == cluster, "resumed on another worker"
    assert final["metadata"]["uid"] == mirror_uid, "the mirror was replaced, not resumed"
    assert final["spec"]["suspend"] is False
    await sleepers.wait_event(uid, lambda e: e.get("reason") == "Resumed", what="a Resumed Event")
    phases = [(v.get("status") or {}).get("phase") for v in sleepers.jobs.versions(uid)]
    assert "Suspended" in phases and phases[-1] == "Succeeded", phases


async def test_deleting_a_running_sleeper_deletes_its_mirror(sleepers: Relay) -> None:
    created = await sleepers.submit(sleeper_manifest("coma", seconds=3600))
    uid = created["metadata"]["uid"]
    await sleepers.wait("coma", running, timeout=30, what="phase Running copied")
    await sleepers.wait_mirror(uid)

    await sleepers.manager.delete(SLEEPERS, "coma", namespace=sleepers.namespace)
    await sleepers.wait_mirror_gone(uid, timeout=30)
    await sleepers.wait_gone("coma")
    assert len(sleepers.mirror_uids(uid)) == 1, sleepers.mirror_uids(uid)


async def test_unmanaged_sleepers_are_left_alone(
    sleepers: Relay, sleeper_kind: dict[str, SleeperController]
) -> None:
    local = await sleepers.submit(
        sleeper_manifest("local", seconds=1, managed_by=None), managed=False
    )
    other = await sleepers.submit(
        sleeper_manifest("not-ours", seconds=1, managed_by=OTHER_CONTROLLER), managed=False
    )

    # The manager's own Sleeper controller runs the unmanaged one, as it would anywhere.
    done = await sleepers.wait_finished("local", timeout=30)
    assert is_true(done, "Succeeded"), done.get("status")
    assert local["metadata"]["uid"] in sleeper_kind["manager"].ran
    await sleepers.settled("local", "not-ours")  # seen by jobrelay since "local" finished
    for created in (local, other):
        name, uid = created["metadata"]["name"], created["metadata"]["uid"]
        now = await sleepers.get(name)
        assert now["metadata"]["uid"] == uid
        for version in sleepers.jobs.versions(uid):
            keys = [
                key
                for key in [
                    *(version["metadata"].get("labels") or {}),
                    *(version["metadata"].get("annotations") or {}),
                ]
                if key.startswith("jobrelay.dev/")
            ]
            assert not keys, f"jobrelay marked {name}: {keys}"
        for worker in sleepers.workers:
            assert sleepers.jobs_named(name, worker) == [], f"{name} appeared on {worker}"
        reasons = [event.get("reason") for event in await sleepers.events(uid)]
        assert not reasons, f"Events on {name}: {reasons}"
    untouched = await sleepers.get("not-ours")
    assert not untouched.get("status"), f"someone ran {OTHER_CONTROLLER}'s Sleeper"
