"""What the end-to-end tests share: the controller as a subprocess, and checks of relayed Jobs.

The controller under test is ``python -m jobrelay run`` exactly as a user
starts it. The tests judge it only by what the apiservers show (management
Jobs, mirrors, Events, WorkerCluster status) and by its log: a 422 from an
apiserver or a Python traceback in the log fails the test that was running.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import EVENTS, JOBS, WORKER_CLUSTERS
from jobrelay.localfleet import processes
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.vocabulary.go_durations import parse_go_duration
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    DEFAULT_CONTROLLER_NAME,
    MIRROR_LABEL,
    ORIGIN_UID_LABEL,
    controller_label_value,
)
from jobrelay.vocabulary.resource import Resource
from tests.e2e.leakwatch import CONTROLLER_LOGS
from tests.kubetools import Obj, T, WatchRecorder, condition, eventually, finished, is_true

MIRROR_SELECTOR = f"{MIRROR_LABEL}={controller_label_value(DEFAULT_CONTROLLER_NAME)}"
# Conditions whose type, status and reason the management Job must show exactly as
# the mirror does. Suspended is left out: while the management Job is suspended
# there may be no mirror at all, so the suspend tests check it on their own.
COPIED_CONDITIONS = ("FailureTarget", "Failed", "SuccessCriteriaMet", "Complete")
COUNTERS = ("active", "succeeded", "failed", "ready", "terminating")
# Generated on the worker by its own apiserver for the mirror; must never come from the manager.
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"

# An annotation of the tests' own: outside jobrelay.dev/, so jobrelay neither reads it nor
# takes it for one of its marks; a change of it is a watch event and nothing more.
NUDGE_ANNOTATION = "test.jobrelay.dev/nudge"

LOG_MARK = "# jobrelay-e2e:"  # lines the tests write into the controller's log
_READY_MESSAGE = re.compile(r"^\s*(?:jobrelay\s+|controller\s+)*(?:is\s+)?ready\b", re.IGNORECASE)
# An apiserver's 422: anywhere in the log, in the forms ApiError and the apiserver use.
_INVALID_ANYWHERE = re.compile(
    r"\b422 Invalid\b|\bis invalid: |\"code\":\s*422\b|\bHTTP 422\b|Unprocessable Entity"
    r"|\"reason\":\s*\"Invalid\""
)
# In error and warning lines, any 422 or Invalid at all.
_INVALID_IN_ERROR = re.compile(r"\b422\b|\bInvalid\b")
_ERROR_LEVELS = frozenset({"warning", "warn", "error", "critical", "fatal", "exception"})


# -- the controller process ---------------------------------------------------


def handles_signal(pid: int, signum: int) -> bool:
    """Whether process ``pid`` catches ``signum`` now (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(
        (line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0"
    )
    return bool(int(caught, 16) >> (signum - 1) & 1)


class ControllerProcess:
    """``python -m jobrelay run`` against the management cluster, as a child process.

    stdout and stderr go, appended, to ``log_path`` (one file across restarts,
    with a marker line before each start). Stopping and killing go by PID only.
    """

    def __init__(
        self,
        manager_kubeconfig: Path,
        log_path: Path,
        *,
        workers: Sequence[str],
        extra_args: Sequence[str] = (),
        install_crds: bool = True,
        api_register: str | None = "never",
    ) -> None:
        self.argv = [
            sys.executable, "-m", "jobrelay", "run",
            "--kubeconfig", str(manager_kubeconfig),
            "--log-format", "json",
            # A free port on loopback: never :8080, never two replicas on one port.
            "--metrics-address", "127.0.0.1:0",
            # The fleet's admin keeps the CRD current with the code under test.
            *(["--install-crds"] if install_crds else []),
            # The API only where a module asks for it (aggregated.API_ARGS): on the
            # loopback fleet `--api-register auto` (the default) would serve and register
            # it in every test. None: the default, as a user's plain `jobrelay run`.
            *(["--api-register", api_register] if api_register else []),
            # Finished mirrors go at once, as the relay fixture checks (wait_mirror_gone),
            # unless the module keeps them its own way.
            *([] if _keeps_finished(extra_args) else ["--finished-mirror-ttl", "0"]),
            *extra_args,
        ]  # fmt: skip
        self.manager_kubeconfig = manager_kubeconfig
        self.log_path = log_path
        CONTROLLER_LOGS.append(log_path)  # the session's secret scan reads every log
        self.workers = list(workers)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._run_offset = 0  # where the current run's output begins in the log
        self._metrics_at: tuple[int, str] | None = None  # (start number, its /metrics URL)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_text(self, since: int = 0) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(since)
                return log.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def run_records(self) -> list[dict[str, Any]]:
        """The JSON log records of the current run (since the last start)."""
        records = (_json_record(line) for line in self.log_text(self._run_offset).splitlines())
        return [record for record in records if record is not None]

    def metrics_url(self) -> str | None:
        """Where the current run serves /metrics (from its log), None before it listens."""
        for record in self.run_records():
            if record.get("event") == "metrics-listening":
                return f"http://{record['addresses'][0]}/metrics"
        return None

    async def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Every sample of the current run's /metrics, by name and labels."""

        async def listening() -> str | None:
            if self._metrics_at is None or self._metrics_at[0] != self.starts:
                url = self.metrics_url()  # reads the run's log: once per run
                self._metrics_at = None if url is None else (self.starts, url)
            return None if self._metrics_at is None else self._metrics_at[1]

        url = await eventually(listening, timeout=30, what="the metrics address")
        async with httpx2.AsyncClient(timeout=10, trust_env=False) as http:
            answer = await http.get(url)
        assert answer.status_code == 200, answer.text
        return {
            (sample.name, frozenset(sample.labels.items())): float(sample.value)
            for family in text_string_to_metric_families(answer.text)
            for sample in family.samples
        }

    async def wait_settled(self, kind: str, version: int, *, timeout: float = 30.0) -> None:
        """Until one scrape shows the management cache of ``kind`` (``Kind.version.group``)
        at resourceVersion ``version`` or later and the work queue idle: nothing ready to
        be reconciled, nothing being reconciled (see :meth:`Relay.settled`)."""
        cache_version = ("jobrelay_cache_resource_version", frozenset({("kind", kind)}))
        seen: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

        async def settled() -> bool:
            nonlocal seen
            self.assert_alive()
            seen = await self.scrape()
            depth = seen.get(("jobrelay_workqueue_depth", frozenset()))
            in_progress = seen.get(("jobrelay_workqueue_in_progress", frozenset()))
            return seen.get(cache_version, -1) >= version and depth == 0 and in_progress == 0

        try:
            await eventually(settled, timeout=timeout, interval=0.1, what="jobrelay settled")
        except AssertionError as error:
            shown = {
                f"{name}{dict(labels)}": value
                for (name, labels), value in seen.items()
                if name == cache_version[0] or name.startswith("jobrelay_workqueue_")
            }
            raise AssertionError(
                f"{error}: waited for the {kind} cache at resourceVersion {version} and an idle "
                f"queue; the last scrape showed {shown}"
            ) from None

    def mark(self, text: str) -> None:
        """Write a marker line into the log (to find where a test or a restart began)."""
        with self.log_path.open("a") as log:
            log.write(f"{LOG_MARK} {time.strftime('%H:%M:%S')} {text}\n")

    @contextlib.asynccontextmanager
    async def _manager(self, manager: ApiClient | None) -> AsyncIterator[ApiClient]:
        if manager is not None:
            yield manager
            return
        async with ApiClient.from_kubeconfig(self.manager_kubeconfig, cluster="manager") as made:
            yield made

    async def start(
        self, manager: ApiClient | None = None, *, clear_worker_status: bool = True
    ) -> None:
        """Start a new process; WorkerCluster status is cleared first (see wait_ready),
        unless another replica leads and owns it (``clear_worker_status=False``)."""
        if self.running:
            raise RuntimeError(f"controller already running (pid {self.pid})")
        if clear_worker_status:
            async with self._manager(manager) as client:
                await reset_worker_status(client, self.workers)
        self.starts += 1
        self.mark(f"start #{self.starts}: {' '.join(self.argv)}")
        self._run_offset = self.log_size()
        self.process = self._spawn()

    @property
    def keep_finished_mirrors(self) -> bool:
        """Whether its command keeps finished mirrors (for ever, or for a ttl above 0: the
        chart's default is an hour), as the relay fixture checks after a Job ends."""
        args = iter(self.argv)
        for arg in args:
            if arg == "--keep-finished-mirrors":
                return True
            if arg.startswith("--finished-mirror-ttl"):
                value = arg.partition("=")[2] if "=" in arg else next(args, "0")
                if parse_go_duration(value) > 0:
                    return True
        return False

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # Its own session: a Ctrl-C meant for pytest does not reach it; the
                # fixture stops it by PID.
                start_new_session=True,
            )

    async def wait_ready(self, manager: ApiClient | None = None, *, timeout: float = 60.0) -> None:
        """Until this run logs readiness or every worker shows Connected=True.

        ``start()`` removed the WorkerClusters' status, so Connected=True can only
        have been written by this run.
        """
        async with self._manager(manager) as client:
            await self._wait_ready(client, timeout)

    async def _wait_ready(self, manager: ApiClient, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise AssertionError(
                    f"jobrelay exited with code {self.returncode()} while starting; "
                    f"{self.log_path} ends:\n{self.log_tail()}"
                )
            if self._logged_ready() or await workers_connected(manager, self.workers):
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"jobrelay not ready within {timeout:.0f}s (no readiness log line, and not "
                    f"every WorkerCluster Connected=True); {self.log_path} ends:\n{self.log_tail()}"
                )
            await asyncio.sleep(0.2)

    def _logged_ready(self) -> bool:
        for line in self.log_text(self._run_offset).splitlines():
            record = _json_record(line)
            if record is None:
                continue
            message = str(record.get("msg") or record.get("message") or "")
            if record.get("event") == "ready" or _READY_MESSAGE.match(message):
                return True
        return False

    def returncode(self) -> int | None:
        return self.process.poll() if self.process else None

    async def kill(self, sig: int = signal.SIGKILL, *, timeout: float = 30.0) -> int:
        """Send ``sig`` to the process (by PID) and wait for it to exit; its exit code."""
        process = self.process
        if process is None:
            raise RuntimeError("controller was never started")
        if process.poll() is None:
            self.mark(f"sending {signal.Signals(sig).name} to pid {process.pid}")
            self._signal(sig)
        try:
            code = await asyncio.to_thread(process.wait, timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait, 10)
            raise AssertionError(
                f"jobrelay (pid {process.pid}) did not exit within {timeout:.0f}s of "
                f"{signal.Signals(sig).name}; killed it. {self.log_path} ends:\n{self.log_tail()}"
            ) from None
        self.mark(f"pid {process.pid} exited with code {code}")
        return code

    def _signal(self, sig: int) -> None:
        """Deliver ``sig`` to the controller (a wrapper, e.g. a sandbox, sends it further)."""
        assert self.process is not None
        self.process.send_signal(sig)

    async def restart(self, manager: ApiClient | None = None, sig: int = signal.SIGKILL) -> None:
        await self.kill(sig)
        await self.start(manager)
        await self.wait_ready(manager)

    async def stop(self, *, timeout: float = 30.0) -> None:
        """SIGTERM, and require a clean exit (code 0) within ``timeout``."""
        if self.process is None:
            return
        if self.process.poll() is not None:
            code = self.process.returncode
            raise AssertionError(
                f"jobrelay had already exited (code {code}) before it was stopped; "
                f"{self.log_path} ends:\n{self.log_tail()}"
            )
        await self._until_sigterm_handled(timeout=10.0)
        code = await self.kill(signal.SIGTERM, timeout=timeout)
        assert code == 0, (
            f"jobrelay exited with code {code} on SIGTERM; {self.log_path} ends:\n{self.log_tail()}"
        )

    def _sigterm_target(self) -> int | None:
        """The process a SIGTERM is sent to (a wrapper's overrides say which), if any yet."""
        return self.process.pid if self.process is not None else None

    async def _until_sigterm_handled(self, *, timeout: float) -> None:
        """Until the process handles SIGTERM (SigCgt in /proc): before the interpreter has run
        jobrelay's first lines, the kernel's default ends it, which says nothing of jobrelay.
        A test that stops a replica just restarted would otherwise depend on how fast it
        started. Past ``timeout`` (or once it exits) the stop goes ahead as it is."""
        deadline = time.monotonic() + timeout
        while self.running and time.monotonic() < deadline:
            pid = self._sigterm_target()
            if pid is not None and handles_signal(pid, signal.SIGTERM):
                return
            await asyncio.sleep(0.05)

    def log_problems(self, since: int = 0) -> list[str]:
        """Lines showing an apiserver 422 or a Python traceback."""
        problems = []
        for line in self.log_text(since).splitlines():
            if line.startswith(LOG_MARK):
                continue
            record = _json_record(line)
            level = str(record.get("level") or record.get("levelname") or "") if record else ""
            if "Traceback" in line:
                problems.append(f"traceback: {line}")
            elif _INVALID_ANYWHERE.search(line) or (
                (record is None or level.lower() in _ERROR_LEVELS)
                and _INVALID_IN_ERROR.search(line)
            ):
                problems.append(f"422/Invalid: {line}")
        return problems

    def assert_clean_log(self, since: int = 0) -> None:
        problems = self.log_problems(since)
        listing = "\n".join(problems[:20])
        assert not problems, f"{len(problems)} problem line(s) in {self.log_path}:\n{listing}"

    def assert_alive(self) -> None:
        assert self.running, (
            f"jobrelay died (exit code {self.returncode()}); {self.log_path} ends:\n"
            + self.log_tail()
        )


def _json_record(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


async def reset_worker_status(manager: ApiClient, workers: Sequence[str]) -> None:
    for worker in workers:
        with contextlib.suppress(ApiError):  # no CRD or no such worker yet: nothing to clear
            await manager.patch(WORKER_CLUSTERS, worker, {"status": None}, subresource="status")


async def workers_connected(manager: ApiClient, workers: Sequence[str]) -> bool:
    try:
        listed = await manager.list(WORKER_CLUSTERS)
    except ApiError:
        return False
    connected = {item["metadata"]["name"] for item in listed.items if is_true(item, "Connected")}
    return set(workers) <= connected


# -- checks of relayed Jobs ---------------------------------------------------


def status_digest(job: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Job's status that the management Job must share with its mirror."""
    status = job.get("status") or {}
    return {
        **{counter: status.get(counter) or 0 for counter in COUNTERS},
        "conditions": sorted(
            (entry["type"], entry["status"], entry.get("reason") or "")
            for entry in status.get("conditions") or []
            if entry.get("type") in COPIED_CONDITIONS
        ),
        "completedIndexes": status.get("completedIndexes") or "",
        "failedIndexes": status.get("failedIndexes") or "",
        "startTime": status.get("startTime"),
        "completionTime": status.get("completionTime"),
    }


def assert_status_matches(job: Mapping[str, Any], mirror: Mapping[str, Any]) -> None:
    ours, theirs = status_digest(job), status_digest(mirror)
    differences = {key: (ours[key], theirs[key]) for key in ours if ours[key] != theirs[key]}
    assert not differences, (
        f"management Job {job['metadata']['name']} differs from its mirror "
        f"(field: (management, mirror)): {differences}"
    )


def assert_finished_status_is_sound(job: Mapping[str, Any]) -> None:
    status = job.get("status") or {}
    name = job["metadata"]["name"]
    assert status.get("startTime"), f"{name}: finished without startTime: {status}"
    if is_true(job, "Complete"):
        assert status.get("completionTime"), f"{name}: Complete without completionTime: {status}"
        assert status["startTime"] <= status["completionTime"], status
    assert not (status.get("active") or 0), f"{name}: finished with active pods: {status}"
    uncounted = status.get("uncountedTerminatedPods") or {}
    assert not any(uncounted.values()), f"{name}: finished with uncounted pods: {status}"


def assert_clean_mirror(mirror: Mapping[str, Any], job: Mapping[str, Any]) -> None:
    """A mirror is a plain Job of the worker, labelled with its origin."""
    meta, spec = mirror["metadata"], mirror.get("spec") or {}
    job_meta = job["metadata"]
    assert (meta["namespace"], meta["name"]) == (job_meta["namespace"], job_meta["name"])
    labels = meta.get("labels") or {}
    assert labels.get(ORIGIN_UID_LABEL) == job_meta["uid"], labels
    assert f"{MIRROR_LABEL}={labels.get(MIRROR_LABEL)}" == MIRROR_SELECTOR, labels
    assert spec.get("managedBy") in (None, "kubernetes.io/job-controller"), spec.get("managedBy")
    assert "ttlSecondsAfterFinished" not in spec, "a mirror must not be deleted by the worker's TTL"
    template_labels = (spec.get("template") or {}).get("metadata", {}).get("labels") or {}
    # The selector and pod labels were generated by the worker for this mirror.
    assert template_labels.get(CONTROLLER_UID_LABEL) == meta["uid"], template_labels


def versions_problems(versions: Sequence[Obj], settled: str | None = None) -> list[str]:
    """What went backwards over the recorded versions of one management Job.

    Counters never decrease, terminal conditions never go away once True, and
    the placement annotation never changes once it names ``settled`` (the
    worker that holds the Job's only mirror; no re-dispatch happens in these
    tests). A placement may change before that, e.g. when the chosen worker
    turned out to hold a foreign Job of the same name, so no mirror was made
    there. Without ``settled``, the first placement must be the last.
    """
    problems: list[str] = []
    best = {"succeeded": 0, "failed": 0}
    terminal_seen: set[str] = set()
    placed: str | None = None
    for version in versions:
        status = version.get("status") or {}
        rv = version.get("metadata", {}).get("resourceVersion")
        for counter in best:
            value = status.get(counter) or 0
            if value < best[counter]:
                problems.append(f"rv {rv}: {counter} went from {best[counter]} to {value}")
            best[counter] = max(best[counter], value)
        for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"):
            if is_true(version, kind):
                terminal_seen.add(kind)
            elif kind in terminal_seen:
                problems.append(f"rv {rv}: {kind}=True disappeared")
        cluster = (version.get("metadata", {}).get("annotations") or {}).get(CLUSTER_ANNOTATION)
        if placed and cluster != placed:
            problems.append(f"rv {rv}: placement changed from {placed} to {cluster}")
        if cluster and (settled is None or cluster == settled):
            placed = cluster
    return problems


@dataclass
class Relayed:
    """A finished management Job, the worker it ran on, and its mirror's final version."""

    job: Obj
    cluster: str
    mirror: Obj

    @property
    def uid(self) -> str:
        return str(self.job["metadata"]["uid"])


class Relay:
    """Drives and observes relayed Jobs (or objects of another kind) in one namespace.

    It watches the management objects of the namespace and every object of the
    namespace on each worker from before the test creates anything, so the
    final state of a mirror is known even after jobrelay has deleted it, and
    every version of a management object can be checked for regressions.

    ``resource`` is the kind relayed (Jobs by default; ``jobs`` and
    ``worker_jobs`` then record objects of that kind) and ``is_finished`` says
    when one of them has ended. ``verify`` checks Jobs only.
    """

    def __init__(
        self,
        clients: Mapping[str, ApiClient],
        workers: Sequence[str],
        namespace: str,
        controller: ControllerProcess,
        *,
        resource: Resource = JOBS,
        is_finished: Callable[[Mapping[str, Any]], bool] = finished,
    ) -> None:
        self.clients = clients
        self.manager = clients["manager"]
        self.workers = list(workers)
        self.namespace = namespace
        self.controller = controller
        self.resource = resource
        self.is_finished = is_finished
        self.jobs = WatchRecorder(self.manager, resource, namespace=namespace)
        self._nudges = 0  # NUDGE_ANNOTATION's last value
        # All objects, not only labelled ones: an unlabelled copy would be a bug too.
        self.worker_jobs = {
            worker: WatchRecorder(clients[worker], resource, namespace=namespace)
            for worker in workers
        }

    async def __aenter__(self) -> Relay:
        await self.jobs.start()
        for recorder in self.worker_jobs.values():
            await recorder.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.jobs.stop()
        for recorder in self.worker_jobs.values():
            await recorder.stop()

    # -- acting --

    async def submit(self, manifest: Mapping[str, Any], *, managed: bool = True) -> Obj:
        body = json.loads(json.dumps(manifest))
        if managed:
            body["spec"].setdefault("managedBy", DEFAULT_CONTROLLER_NAME)
        return await self.manager.create(self.resource, body, namespace=self.namespace)

    async def get(self, name: str) -> Obj:
        return await self.manager.get(self.resource, name, namespace=self.namespace)

    async def set_suspend(self, name: str, suspend: bool) -> Obj:
        return await self.manager.patch(
            self.resource, name, {"spec": {"suspend": suspend}}, namespace=self.namespace
        )

    # -- barriers: "nothing happened" is judged after one, never after a sleep --

    async def settled(
        self, *names: str, resource: Resource | None = None, timeout: float = 30.0
    ) -> None:
        """Return once jobrelay has reconciled each of ``names`` (objects of ``resource``,
        by default the Relay's) since this call, so that what it did not do can be checked.

        Each object is nudged (:data:`NUDGE_ANNOTATION` set to a new value); one that is
        gone counts at the resourceVersion of its deletion, as the Relay's recorder saw
        it. Then one scrape of /metrics (rendered in the controller's event loop: one
        instant of it) must show the kind's management cache at those versions or later
        and the work queue idle. Sound because the cache hands every
        event's key to the queue before its resourceVersion moves past it
        (kube/watching.py), and a queue seen afterwards with nothing ready and nothing
        in progress has finished every reconcile asked for until then: the nudges', at
        the latest state, included. A retry or a held pass would reconcile the same
        state again; the nudge is that retry, now.
        """
        resource = resource or self.resource
        versions = [await self._nudge(resource, name, timeout) for name in names]
        await self.controller.wait_settled(resource.name, max(versions), timeout=timeout)

    async def _nudge(self, resource: Resource, name: str, timeout: float) -> int:
        """The resourceVersion of ``name`` after a new nudge (of its deletion if gone)."""
        self._nudges += 1
        nudge = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(self._nudges)}}}
        try:
            touched = await self.manager.patch(resource, name, nudge, namespace=self.namespace)
        except ApiError as error:
            if not error.is_not_found or resource != self.resource:
                raise
        else:
            return int(touched["metadata"]["resourceVersion"])

        def deleted_at() -> int | None:
            return next(
                (
                    int(obj["metadata"]["resourceVersion"])
                    for change, obj in reversed(self.jobs.events)
                    if change == "DELETED" and obj["metadata"]["name"] == name
                ),
                None,
            )

        return await self._recorded(deleted_at, timeout, f"the deletion of {name} recorded")

    # -- waiting --

    async def wait(
        self, name: str, predicate: Callable[[Obj], bool], *, timeout: float = 60.0, what: str
    ) -> Obj:
        async def check() -> Obj | None:
            try:
                job = await self.get(name)
            except ApiError as error:
                if error.is_not_found:
                    return None
                raise
            return job if predicate(job) else None

        job = await eventually(check, timeout=timeout, what=f"{self.resource.kind} {name}: {what}")
        await self.recorded_through(job, timeout=timeout)
        return job

    async def recorded_through(self, obj: Obj, *, timeout: float = 30.0) -> None:
        """Return once the Relay's recorder holds ``obj``'s version (or a later one), so
        that what a test reads from ``self.jobs`` after a GET includes what the GET saw."""
        uid = obj["metadata"]["uid"]
        version = int(obj["metadata"]["resourceVersion"])

        def caught_up() -> bool:
            return any(
                int(seen["metadata"]["resourceVersion"]) >= version
                for seen in self.jobs.versions(uid)
            )

        await self._recorded(caught_up, timeout, f"{obj['metadata']['name']}@{version} recorded")

    async def wait_finished(self, name: str, *, timeout: float = 90.0) -> Obj:
        return await self.wait(name, self.is_finished, timeout=timeout, what="finished")

    async def wait_gone(self, name: str, *, timeout: float = 30.0) -> None:
        async def gone() -> bool:
            try:
                await self.get(name)
            except ApiError as error:
                if error.is_not_found:
                    return True
                raise
            return False

        await eventually(gone, timeout=timeout, what=f"{self.resource.kind} {name} deleted")

    async def wait_placed(self, name: str, *, timeout: float = 30.0) -> str:
        job = await self.wait(
            name,
            lambda job: bool(placement(job)),
            timeout=timeout,
            what=f"{CLUSTER_ANNOTATION} set",
        )
        cluster = placement(job)
        assert cluster in self.workers, f"{name} placed on unknown cluster {cluster!r}"
        return cluster

    async def wait_active(self, name: str, *, timeout: float = 60.0) -> Obj:
        return await self.wait(
            name, lambda job: (job.get("status") or {}).get("active", 0) > 0,
            timeout=timeout, what="active > 0 (copied from the mirror)",
        )  # fmt: skip

    # -- mirrors as the workers show them --

    def mirror_versions(self, uid: str) -> dict[str, list[Obj]]:
        """Every version of every worker object that claims (by label) to mirror ``uid``."""
        found: dict[str, list[Obj]] = {}
        for worker, recorder in self.worker_jobs.items():
            versions = [
                obj
                for _, obj in recorder.events
                if (obj["metadata"].get("labels") or {}).get(ORIGIN_UID_LABEL) == uid
            ]
            if versions:
                found[worker] = versions
        return found

    def mirror_uids(self, uid: str) -> set[tuple[str, str]]:
        """(worker, mirror uid) of every mirror of ``uid`` ever seen."""
        return {
            (worker, obj["metadata"]["uid"])
            for worker, versions in self.mirror_versions(uid).items()
            for obj in versions
        }

    def jobs_named(self, name: str, worker: str) -> list[Obj]:
        """The last version of every object called ``name`` ever seen on ``worker``."""
        return [
            obj
            for obj in self.worker_jobs[worker].objects().values()
            if obj["metadata"]["name"] == name
        ]

    async def final_mirror(self, uid: str, *, timeout: float = 15.0) -> tuple[str, Obj]:
        """The only mirror of ``uid``, in its last version once finished."""

        def found() -> tuple[str, Obj] | None:
            versions = self.mirror_versions(uid)
            for worker, objs in versions.items():
                if self.is_finished(objs[-1]):
                    return worker, objs[-1]
            return None

        worker, mirror = await self._recorded(found, timeout, f"a finished mirror of {uid}")
        mirrors = self.mirror_uids(uid)
        assert len(mirrors) == 1, f"more than one mirror was created for {uid}: {mirrors}"
        return worker, mirror

    async def wait_mirror(self, uid: str, *, timeout: float = 30.0) -> tuple[str, Obj]:
        def found() -> tuple[str, Obj] | None:
            for worker, objs in self.mirror_versions(uid).items():
                return worker, objs[-1]
            return None

        return await self._recorded(found, timeout, f"a mirror of {uid}")

    async def wait_mirror_gone(self, uid: str, *, timeout: float = 30.0) -> None:
        def gone() -> bool:
            return all(
                self.worker_jobs[worker].deleted(mirror_uid)
                for worker, mirror_uid in self.mirror_uids(uid)
            )

        await self._recorded(gone, timeout, f"every mirror of {uid} deleted")

    async def _recorded(self, predicate: Callable[[], T | None], timeout: float, what: str) -> T:
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result is not None and result is not False:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(0.1)

    # -- events --

    async def events(self, uid: str) -> list[Obj]:
        listed = await self.manager.list(
            EVENTS, namespace=self.namespace, field_selector=f"involvedObject.uid={uid}"
        )
        return listed.items

    async def wait_event(
        self, uid: str, predicate: Callable[[Obj], bool], *, timeout: float = 30.0, what: str
    ) -> Obj:
        async def check() -> Obj | None:
            return next((event for event in await self.events(uid) if predicate(event)), None)

        try:
            return await eventually(check, timeout=timeout, what=what)
        except AssertionError as error:
            seen = [
                (e.get("type"), e.get("reason"), e.get("message")) for e in await self.events(uid)
            ]
            raise AssertionError(f"{error}; Events on the {self.resource.kind}: {seen}") from None

    async def assert_dispatched_event(self, job: Mapping[str, Any], cluster: str) -> None:
        await self.wait_event(
            job["metadata"]["uid"],
            lambda e: (
                e.get("type") == "Normal"
                and e.get("reason") == "Dispatched"
                and cluster in (e.get("message") or "")
            ),
            what=f"a Normal Dispatched Event naming {cluster}",
        )

    # -- the whole check --

    async def verify(
        self,
        name: str,
        *,
        outcome: str = "Complete",
        reason: str | None = None,
        timeout: float = 90.0,
        events: bool = True,
    ) -> Relayed:
        """Wait for ``name`` to finish, then check it against its mirror and its history.

        - the expected terminal condition (and reason), a sound finished status;
        - placed on a worker, where exactly one mirror was ever created, a clean
          Job whose final status the management Job shows (counters, conditions
          and reasons, indexes, start and completion time);
        - no version of the management Job went backwards;
        - a Normal ``Dispatched`` Event naming the worker (when ``events``);
        - the mirror is deleted within 30 s, or kept with ``--keep-finished-mirrors``.
        """
        job = await self.wait_finished(name, timeout=timeout)
        status = job.get("status") or {}
        assert is_true(job, outcome), f"{name}: expected {outcome}=True, got {status}"
        if reason is not None:
            found = condition(job, outcome) or {}
            assert found.get("reason") == reason, f"{name}: {outcome} reason: {found}"
        assert_finished_status_is_sound(job)
        cluster = placement(job)
        assert cluster in self.workers, f"{name}: {CLUSTER_ANNOTATION} = {cluster!r}"
        uid = job["metadata"]["uid"]
        mirror_cluster, mirror = await self.final_mirror(uid)
        assert mirror_cluster == cluster, f"{name}: annotated {cluster}, mirror on {mirror_cluster}"
        assert_clean_mirror(mirror, job)
        assert_status_matches(job, mirror)
        history = self.jobs.versions(uid)
        problems = versions_problems(history, settled=cluster)
        assert not problems, f"{name}: management Job went backwards: {problems}"
        if events:
            await self.assert_dispatched_event(job, cluster)
        if self.controller.keep_finished_mirrors:
            kept = await self.clients[cluster].get(JOBS, name, namespace=self.namespace)
            assert kept["metadata"]["uid"] == mirror["metadata"]["uid"]
        else:
            await self.wait_mirror_gone(uid)
        return Relayed(job, cluster, mirror)


def _keeps_finished(args: Sequence[str]) -> bool:
    """Whether ``args`` say how finished mirrors are kept (else the e2e default: not)."""
    return any(a.startswith(("--finished-mirror-ttl", "--keep-finished-mirrors")) for a in args)


async def outlast(since: float, seconds: float, *, margin: float = 1.0) -> None:
    """Sleep until ``seconds`` (and ``margin``) have passed since ``since`` (a
    ``time.monotonic()``): before checking that something did not happen which would
    have within that time, e.g. a run of ``seconds`` that began before ``since``
    finishing while suspended. Such a check is about time itself, so no barrier can
    replace the wait; the margin is for the status that would show it to be copied."""
    await asyncio.sleep(max(0.0, since + seconds + margin - time.monotonic()))


async def wall_clock_past(timestamp: str) -> None:
    """Sleep until the wall clock is in a later second than ``timestamp`` (RFC 3339, whole
    seconds, as Kubernetes writes startTime): so that a time written next differs from
    it. The local fleet's clusters share this machine's clock."""
    then = datetime.datetime.fromisoformat(timestamp).timestamp()
    await asyncio.sleep(max(0.0, then + 1 - time.time()))


def placement(job: Mapping[str, Any]) -> str | None:
    return (job.get("metadata", {}).get("annotations") or {}).get(CLUSTER_ANNOTATION)


def assert_origin_marks(mirror: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    """A mirror of ``obj`` (any kind): same namespace and name, the origin labels, the
    user's ``team`` label copied, and an identity of its own."""
    meta, origin = mirror["metadata"], obj["metadata"]
    assert (meta["namespace"], meta["name"]) == (origin["namespace"], origin["name"])
    labels = meta.get("labels") or {}
    assert labels.get(ORIGIN_UID_LABEL) == origin["uid"], labels
    assert labels.get(MIRROR_LABEL) == controller_label_value(DEFAULT_CONTROLLER_NAME), labels
    assert labels.get("team") == "e2e", f"the user's labels were not copied: {labels}"
    assert meta["uid"] != origin["uid"]


async def finished_on_its_worker(
    relay: Relay, name: str, *, outcome: str, timeout: float
) -> tuple[Obj, str, Obj]:
    """Wait until ``name`` ended with the ``outcome`` condition True; returns it, the
    worker it is placed on, and the last version of its mirror there (recorded by the
    watch, as jobrelay deletes finished mirrors)."""
    obj = await relay.wait_finished(name, timeout=timeout)
    assert is_true(obj, outcome), f"{name}: expected {outcome}=True, got {obj.get('status')}"
    cluster = placement(obj)
    assert cluster in relay.workers, f"{name}: {CLUSTER_ANNOTATION} = {cluster!r}"
    mirror_cluster, mirror = await relay.final_mirror(obj["metadata"]["uid"])
    assert mirror_cluster == cluster, f"{name}: placed on {cluster}, mirror on {mirror_cluster}"
    return obj, cluster, mirror


async def assert_dispatched_once_and_cleaned(relay: Relay, obj: Obj, cluster: str) -> None:
    """Dispatched to ``cluster`` (Event), its mirror gone after the end, and never a
    namesake on any other worker."""
    name = obj["metadata"]["name"]
    await relay.assert_dispatched_event(obj, cluster)
    await relay.wait_mirror_gone(obj["metadata"]["uid"], timeout=30)
    for worker in relay.workers:
        named = relay.jobs_named(name, worker)
        expected = 1 if worker == cluster else 0
        assert len(named) == expected, f"{len(named)} objects {name} ever seen on {worker}"


# -- replicas with leader election --------------------------------------------

# Log lines of the controller's writes (executor) and of refused or failed status writes.
_WRITE_LINE = re.compile(
    r"^(placed |created mirror |deleted mirror |created namespace |worker \S+: cannot write)"
)


class Replica(ControllerProcess):
    """A controller replica serving /healthz and /readyz on a port the kernel picks.

    ``--health-address 127.0.0.1:0`` binds a free port and logs it, so replicas
    side by side never depend on a port being free.
    """

    def __init__(
        self,
        manager_kubeconfig: Path,
        log_path: Path,
        *,
        workers: Sequence[str],
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(
            manager_kubeconfig,
            log_path,
            workers=workers,
            extra_args=["--health-address", "127.0.0.1:0", *extra_args],
        )

    def health_url(self) -> str | None:
        for record in self.run_records():
            if record.get("event") == "health-listening":
                return f"http://{record['addresses'][0]}"
        return None

    async def readyz(self) -> tuple[int, dict[str, Any]] | None:
        """/readyz's status code and body, or None while it does not answer."""
        url = self.health_url()
        if url is None or not self.running:
            return None
        try:
            async with httpx2.AsyncClient(timeout=5, trust_env=False) as http:
                answer = await http.get(f"{url}/readyz")
        except httpx2.HTTPError:
            return None
        return answer.status_code, json.loads(answer.content)

    async def wait_role(
        self, role: str, *, leader: str | None = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Until /readyz answers 200 with ``role`` (and ``leader``, if given); its body.

        A standby is ready once its caches synced, which may be before its first
        read of the Lease: its ``leader`` is "" until then.
        """

        async def check() -> dict[str, Any] | None:
            if not self.running:
                raise AssertionError(
                    f"replica exited with code {self.returncode()}; "
                    f"{self.log_path} ends:\n{self.log_tail()}"
                )
            answer = await self.readyz()
            if answer is None or answer[0] != 200 or answer[1]["role"] != role:
                return None
            return answer[1] if leader in (None, answer[1]["leader"]) else None

        return await eventually(
            check, timeout=timeout, interval=0.1, what=f"{self.log_path.stem} ready as {role}"
        )

    def writes_logged(self, *, before_event: str | None = None) -> list[str]:
        """Messages of the current run that report a write, up to the first record of
        ``before_event`` (e.g. "leading": what it wrote while standing by)."""
        found = []
        for record in self.run_records():
            if before_event is not None and record.get("event") == before_event:
                break
            message = str(record.get("msg") or "")
            if _WRITE_LINE.match(message):
                found.append(message)
        return found

    def logged(self, event: str) -> bool:
        return any(record.get("event") == event for record in self.run_records())


def apiserver_record(state_dir: Path, cluster: str) -> processes.ProcessRecord:
    """The recorded kube-apiserver process of a fleet cluster (checked to be running)."""
    local = LocalFleet(state_dir, progress=lambda _message: None)
    record = local.clusters[cluster].processes["kube-apiserver"]
    assert processes.is_running(record), f"{cluster}'s kube-apiserver is not running: {record}"
    return record


@contextlib.contextmanager
def frozen(record: processes.ProcessRecord) -> Iterator[None]:
    """SIGSTOP the process (by its recorded PID) for the block; SIGCONT it whatever happens."""
    os.kill(record.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if processes.is_running(record):
            os.kill(record.pid, signal.SIGCONT)
