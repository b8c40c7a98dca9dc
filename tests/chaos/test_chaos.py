"""Chaos: 300 Jobs through a failing fleet, and not one of them lost, miscounted or run twice.

The fleet is its own (manager + 3 workers). The controller runs as two replicas
with leader election (``Replica``: ``--health-address 127.0.0.1:0``). Over
about two minutes, while 300 Jobs are submitted (the first ~30 s) and run:

* Jobs of mixed shape and fate (``plan_jobs``): one pod; NonIndexed with
  ``completions`` 2-4 and ``parallelism`` 2; Indexed with ``completions`` 2-4;
  one in ten fails every pod (KWOK's ``fleet.jobrelay.dev/outcome: fail``,
  ``backoffLimit`` 2), one pod or two at a time; pods run 1-20 s
  (``fleet.jobrelay.dev/duration``; at most ~20 s per Job's wave of pods).
* The leader (the replica whose /readyz says so) is SIGKILLed every 12-18 s
  and started again at once, at least ``KILLS`` times; a replica that exits by
  itself (it could not renew the Lease, e.g. while the manager's apiserver is
  down) is started again too, as its Deployment would.
* One worker's kube-apiserver is frozen (SIGSTOP by the PID state.json records)
  until that worker is declared lost (``--worker-lost-timeout``) and no
  unfinished Job is placed on it any more, then thawed (SIGCONT, always, in a
  finally); the leader is SIGKILLed once more right after the loss shows,
  while Jobs move. Each process times a silent worker from when it saw it
  fail or, if later, from its own start (a restarted controller never trusts an
  older condition), so the loss comes once one replica has lived a whole lost
  timeout (30 s) plus the few seconds it takes to see the worker fail: with a
  kill every 12-18 s each replica lives 24-36 s, so sometimes during the
  kills, at the latest after them.
* A second worker's kube-apiserver is frozen for 20 s, well under the lost
  timeout (30 s): nothing may move off it.
* The manager's kube-apiserver is SIGKILLed once and started again alone
  (``LocalFleet.restart``; ``up`` would restart the whole fleet).
* Five running mirrors are deleted by hand (background propagation, as kubectl
  does) on workers that answer.

Watches started before anything is submitted record every version of every
management Job, of every mirror and every Pod on each worker, of the Lease and
of the WorkerClusters, with when each arrived. Once every Job has finished
(bounded), and one GC interval later, the test prints its figures (a section
of pytest's terminal summary, with or without ``-s``) and asserts:

* Jobs lost: 0 -- all 300 exist (same uid) and finished.
* Jobs not ending as their pods' fate makes certain: 0 -- Complete
  (``CompletionsReached``, ``succeeded == completions``, every index for an
  Indexed Job, no failure) or Failed (``BackoffLimitExceeded``, ``failed >
  backoffLimit``, exactly ``backoffLimit + 1`` with one pod at a time);
  ``startTime`` set, nothing active or uncounted.
* Jobs whose final status disagrees with what their runs did: 0. A run is one
  mirror, ordered by its ``jobrelay.dev/run`` and then by when it was first
  seen (a mirror made again after one vanished has the same run, on the same
  worker). Exact: the ``jobrelay.dev/placements`` history names each run's
  worker at its number; ``succeeded`` and ``failed`` (and the completed
  indexes of an Indexed Job) equal what the last run carried over
  (``jobrelay.dev/carried-over``) plus what its last recorded version counts
  (uncounted terminated pods included: the DELETED event's object is a deleted
  mirror's last state); a last mirror that finished ended the same way. Only a
  last run on the lost worker that never finished is judged within bounds
  (the watch saw its versions after the thaw, which jobrelay rightly never
  copies). Between runs, what is carried over never shrinks and never exceeds
  what the earlier run carried plus counted.
* Status versions that went backwards: 0, over every version the manager's
  watch saw: ``succeeded``, ``failed`` never decrease, ``completedIndexes`` never
  loses an index, ``Complete``/``Failed``/``FailureTarget``/``SuccessCriteriaMet``
  stay True, ``startTime`` never changes once set, placements only grow.
* Pods that ran for work already done: 0 for NonIndexed Jobs -- Succeeded pods
  over all runs <= ``completions``, leaving out runs on the lost worker the Job
  moved away from, and successes of a hand-deleted mirror that its own Job
  controller had not counted when it was deleted (no status ever shows them,
  so nothing can carry them over; printed apart). A deletion is judged by who
  watched it: the replicas whose /readyz answered just before it. When a replica
  that had not (started, or not yet synced, when it happened) led before one acted
  on it (the Job shown with nothing running, or its next run), what the management
  Job showed at the deletion is what could carry over (docs/failure-modes.md), and
  the successes beyond it are printed apart too, with the deletion and its watchers.
* Orphaned mirrors one GC interval after the end: 0 on every worker (finished
  mirrors are deleted, so any mirror left is one).
* Jobs whose pods ran on two workers at once (pod lifetimes by the watches'
  clock): 0 but those involving the lost worker, which are counted and printed.
* Only the frozen-and-lost worker was ever declared lost.
* 422 responses and tracebacks in both replicas' logs: 0
  (``ControllerProcess.log_problems``), and both stop cleanly on SIGTERM.

Leader handovers (changes of the Lease's holder) and their durations are
printed. ``JOBRELAY_CHAOS_SEED`` replays a run's plan and timings (the seed is
printed); the machine's load still varies what happens when.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from jobrelay.fleet.workerclusters import DEFAULT_NAMESPACE
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError
from jobrelay.kube.resources import JOBS, LEASES, NAMESPACES, PODS, WORKER_CLUSTERS
from jobrelay.localfleet import processes
from jobrelay.localfleet.orchestration import LocalFleet
from jobrelay.localfleet.shape import MANAGER
from jobrelay.vocabulary.leases import lease_name_for
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME, MIRROR_LABEL, ORIGIN_UID_LABEL
from tests.chaos.verdicts import (
    Counts,
    Deletion,
    Expected,
    Handover,
    Run,
    Seen,
    counted,
    disagreements,
    final_condition,
    handovers,
    is_finished,
    micro_time,
    outcome_problems,
    placements,
    ran_at_once,
    regressions,
    rework,
    runs_of,
    shown_when_unwatched,
    status,
)
from tests.e2e.support import Replica, apiserver_record, frozen
from tests.kubetools import Obj, WatchRecorder, job_manifest

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]

NAMESPACE = "chaos"
JOB_COUNT = 300
SUBMIT_BATCHES, SUBMIT_SECONDS = 15, 30.0
KILLS = 6  # periodic SIGKILLs of the leader, at least
KILL_EVERY = (12.0, 18.0)
LOST_FREEZE_AT = (15.0, 25.0)
SHORT_FREEZE_AT, SHORT_FREEZE = (30.0, 50.0), 20.0
MANAGER_RESTART_AT = (45.0, 75.0)
HAND_DELETIONS, HAND_DELETIONS_WITHIN = 5, (8.0, 60.0)
LOST_WAIT = 300.0  # longest freeze of the lost worker
FINISH_TIMEOUT = 360.0  # after the chaos, for every Job to finish
HEALTH_TIMEOUT, LOST_TIMEOUT, GC_INTERVAL = 6, 30, 10
CONTROLLER_ARGS = [
    "--worker-health-timeout", str(HEALTH_TIMEOUT),
    "--worker-lost-timeout", str(LOST_TIMEOUT),
    "--gc-interval", str(GC_INTERVAL),
    # The loss is declared, and lostTime shown, within 2 s of its time.
    "--worker-status-interval", "2",
    "--unplaceable-retry", "5",
    "--leader-election-lease-duration", "6",
    "--leader-election-renew-deadline", "4",
    "--leader-election-retry-period", "1",
]  # fmt: skip
LEASE_NAME = lease_name_for(DEFAULT_CONTROLLER_NAME)
DURATION = "fleet.jobrelay.dev/duration"
OUTCOME = "fleet.jobrelay.dev/outcome"


# -- the plan ------------------------------------------------------------------------


def plan_jobs(rng: random.Random) -> list[Expected]:
    """300 Jobs; every tenth fails all its pods. A Job's pods take at most ~20 s a wave."""
    planned = []
    for index in range(JOB_COUNT):
        fails = index % 10 == 9
        if fails:
            shape = rng.choice(["single", "parallel"])
            completions = parallelism = 1 if shape == "single" else 2
            duration, backoff = rng.randint(1, 4), 2
        else:
            shape = rng.choices(["single", "parallel", "indexed"], weights=[4, 3, 3])[0]
            completions = 1 if shape == "single" else rng.randint(2, 4)
            parallelism = {"single": 1, "parallel": 2}.get(shape) or rng.choice([2, completions])
            waves = -(-completions // parallelism)
            duration, backoff = rng.randint(1, 20 // waves), 4
        planned.append(
            Expected(
                f"c{index:03d}-{shape}{'-fails' if fails else ''}",
                shape,
                completions,
                parallelism,
                backoff,
                duration,
                fails,
            )
        )
    return planned


def manifest(job: Expected) -> Obj:
    fate = {DURATION: f"{job.duration_s}s", **({OUTCOME: "fail"} if job.fails else {})}
    extra = {"completionMode": "Indexed"} if job.indexed else {}
    return job_manifest(
        job.name, completions=job.completions, parallelism=job.parallelism,
        backoff_limit=job.backoff_limit, annotations=fate,
        managed_by=DEFAULT_CONTROLLER_NAME, cpu="50m", **extra,
    )  # fmt: skip


# -- what happened, as it happened ---------------------------------------------------------


@dataclass
class Journal:
    """The chaos as it was done: a timeline (seconds since the start) and its facts."""

    t0: float = field(default_factory=time.monotonic)
    lines: list[tuple[float, str]] = field(default_factory=list)
    kills: list[tuple[float, str]] = field(default_factory=list)  # (wall time, identity)
    exits: list[str] = field(default_factory=list)
    deletions: dict[str, Deletion] = field(default_factory=dict)  # mirror uid -> when, seen by
    identities: dict[str, str] = field(default_factory=dict)  # identity -> "a#2"
    lost_declared_at: float | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # printed after the figures

    def now(self) -> float:
        return time.monotonic() - self.t0

    def note(self, text: str) -> None:
        self.lines.append((self.now(), text))
        print(f"[chaos {self.now():6.1f}s] {text}", flush=True)

    async def until(self, moment: float) -> None:
        """Wait for a moment of the plan (seconds since the start): the chaos's own pacing."""
        await asyncio.sleep(max(0.0, moment - self.now()))


def seen(recorder: WatchRecorder) -> list[Seen]:
    return [
        Seen(kind, obj, at)
        for (kind, obj), at in zip(recorder.events, recorder.received, strict=True)
    ]


def latest(recorder: WatchRecorder) -> dict[str, tuple[str, Obj]]:
    """The last event of every object the watch saw, by uid (type, object)."""
    found: dict[str, tuple[str, Obj]] = {}
    for kind, obj in recorder.events:
        found[str(obj["metadata"].get("uid"))] = (kind, obj)
    return found


async def poll(check: Callable[[], Awaitable[Any]], *, timeout: float, every: float = 1.0) -> Any:
    """``check()`` until it returns something true; None once ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(every)


@pytest.fixture
def replicas(chaos_fleet: LocalFleet, tmp_path: Path) -> Iterator[dict[str, Replica]]:
    """The two controller replicas (not started); SIGKILLed by PID at teardown if still
    running, even when the test was stopped where its own clean-up could not run."""
    made = {
        name: Replica(
            chaos_fleet.kubeconfig(MANAGER),
            tmp_path / f"replica-{name}.log",
            workers=chaos_fleet.workers,
            extra_args=CONTROLLER_ARGS,
        )
        for name in ("a", "b")
    }
    try:
        yield made
    finally:
        for replica in made.values():
            if replica.process is not None and replica.running:
                replica.process.kill()
                replica.process.wait(30)


# -- the test --------------------------------------------------------------------------


async def test_300_jobs_survive_leader_kills_frozen_workers_and_a_manager_restart(
    chaos_fleet: LocalFleet, replicas: dict[str, Replica], report: list[str]
) -> None:
    started = time.monotonic()
    seed = int(os.environ.get("JOBRELAY_CHAOS_SEED") or time.time_ns() % 2**32)
    report.append(f"chaos seed: {seed} (JOBRELAY_CHAOS_SEED={seed} replays the plan and timings)")
    print(report[-1], flush=True)
    rng = random.Random(seed)
    planned = plan_jobs(random.Random(seed + 1))
    workers = chaos_fleet.workers
    lost, briefly = rng.sample(workers, 2)
    clients = {
        name: ApiClient.from_kubeconfig(chaos_fleet.kubeconfig(name), cluster=name)
        for name in chaos_fleet.clusters
    }
    recorders = Recorders(clients, workers)
    journal = Journal()
    chaos = Chaos(chaos_fleet, clients, recorders, replicas, journal, rng, lost, briefly)
    uids: dict[str, str] = {}
    final: dict[str, Obj] = {}
    orphans: dict[str, list[str]] = {}
    try:
        await clients[MANAGER].create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        await recorders.start()
        await chaos.start_replicas()
        journal.t0 = time.monotonic()
        journal.note(f"submitting {JOB_COUNT} Jobs; lost worker {lost}, briefly frozen {briefly}")
        await chaos.run(planned, uids)
        journal.note("chaos over: waiting for every Job to finish")
        final = await chaos.wait_all_finished(len(planned))
        orphans = await chaos.wait_no_mirrors(timeout=GC_INTERVAL + 5.0)
        left = sum(map(len, orphans.values()))
        journal.note(f"mirrors left on the workers {GC_INTERVAL}s after the end: {left}")
        await chaos.stop_replicas()
    except BaseException:
        report.extend(render(journal, [], []))  # what was done before it broke off
        raise
    finally:
        await chaos.cleanup()
        await recorders.stop()
        for client in clients.values():
            await client.aclose()
    figures, details = judge(planned, uids, final, recorders, replicas, journal, orphans, lost)
    figures.append(("seconds from the replicas' start to the verdict",
                    f"{time.monotonic() - started:.0f}", ""))  # fmt: skip
    report.extend(render(journal, figures, details))
    wrong = [f"{what}: {len(problems)}" for what, problems in details if problems]
    assert not wrong, "; ".join(wrong) + " (the chaos section of the summary lists them)"


class Recorders:
    """The watches that judge: started before anything is submitted."""

    def __init__(self, clients: Mapping[str, ApiClient], workers: list[str]) -> None:
        manager = clients[MANAGER]
        self.jobs = WatchRecorder(manager, JOBS, namespace=NAMESPACE)
        self.lease = WatchRecorder(manager, LEASES, namespace=DEFAULT_NAMESPACE)
        self.registrations = WatchRecorder(manager, WORKER_CLUSTERS)
        self.mirrors = {w: WatchRecorder(clients[w], JOBS, namespace=NAMESPACE) for w in workers}
        self.pods = {w: WatchRecorder(clients[w], PODS, namespace=NAMESPACE) for w in workers}

    def named(self) -> dict[str, WatchRecorder]:
        return {
            "manager Jobs": self.jobs, "Lease": self.lease, "WorkerClusters": self.registrations,
            **{f"{w} Jobs": r for w, r in self.mirrors.items()},
            **{f"{w} Pods": r for w, r in self.pods.items()},
        }  # fmt: skip

    async def start(self) -> None:
        for recorder in self.named().values():
            await recorder.start()

    async def stop(self) -> None:
        for recorder in self.named().values():
            await recorder.stop()


class Chaos:
    """Does the chaos, keeps two replicas running, and notes everything in the journal."""

    def __init__(
        self,
        local: LocalFleet,
        clients: Mapping[str, ApiClient],
        recorders: Recorders,
        replicas: Mapping[str, Replica],
        journal: Journal,
        rng: random.Random,
        lost: str,
        briefly: str,
    ) -> None:
        self.local, self.clients, self.recorders = local, clients, recorders
        self.manager = clients[MANAGER]
        self.replicas, self.journal, self.rng = replicas, journal, rng
        self.lost, self.briefly = lost, briefly
        self.frozen: set[str] = set()
        # Held while a worker is frozen or a test request goes to one: never freeze mid-request.
        self.worker_lock = asyncio.Lock()
        self.main_done, self.lost_done = asyncio.Event(), asyncio.Event()
        self.kill_now, self.kills_done, self.stopping = (
            asyncio.Event(),
            asyncio.Event(),
            asyncio.Event(),
        )
        self.periodic_kills = 0
        self._keeper: asyncio.Task[None] | None = None
        self._urls: dict[tuple[str, int], str] = {}
        self._known: set[tuple[str, int]] = set()
        self._thaw: list[processes.ProcessRecord] = []
        self._http = httpx2.AsyncClient(timeout=2, trust_env=False)

    # -- the replicas ------------------------------------------------------------------

    async def start_replicas(self) -> None:
        a, b = self.replicas["a"], self.replicas["b"]
        await a.start(self.manager)  # clears the WorkerClusters' status: nothing else runs yet
        await a.wait_role("leader", timeout=120)
        await b.start(self.manager, clear_worker_status=False)
        await b.wait_role("standby", timeout=120)
        await self.learn_identities()

    async def readyz(self, name: str) -> dict[str, Any] | None:
        """The replica's /readyz body when it answers 200, else None."""
        replica = self.replicas[name]
        key = (name, replica.starts)
        if key not in self._urls and (url := replica.health_url()):
            self._urls[key] = url
        if key not in self._urls or not replica.running:
            return None
        try:
            answer = await self._http.get(f"{self._urls[key]}/readyz")
        except httpx2.HTTPError:
            return None
        if answer.status_code != 200:
            return None
        body: dict[str, Any] = answer.json()
        return body

    async def learn_identities(self) -> None:
        for name, replica in self.replicas.items():
            key = (name, replica.starts)
            if key not in self._known and (body := await self.readyz(name)):
                self.journal.identities[body["identity"]] = f"{name}#{replica.starts}"
                self._known.add(key)

    async def keep_replicas(self) -> None:
        """SIGKILL the leader every ~15 s (and when asked), and start again any replica
        that exited by itself, until told to stop."""
        next_kill = self.journal.now() + self.rng.uniform(*KILL_EVERY)
        while not self.stopping.is_set():
            for name, replica in self.replicas.items():
                if not replica.running:
                    self.journal.exits.append(f"{name}#{replica.starts}: {replica.returncode()}")
                    self.journal.note(
                        f"replica {name}#{replica.starts} exited by itself (code "
                        f"{replica.returncode()}): started again"
                    )
                    await replica.start(clear_worker_status=False)
            await self.learn_identities()
            periodic = self.periodic_kills < KILLS or not self.main_done.is_set()
            asked = self.kill_now.is_set()
            if ((periodic and self.journal.now() >= next_kill) or asked) and await self.kill_leader(
                "while Jobs move off the lost worker" if asked else "periodic"
            ):
                if asked:
                    self.kill_now.clear()
                else:
                    self.periodic_kills += 1
                next_kill = self.journal.now() + self.rng.uniform(*KILL_EVERY)
            if not periodic and not self.kill_now.is_set() and self.lost_done.is_set():
                self.kills_done.set()
            await asyncio.sleep(0.5)

    async def kill_leader(self, why: str) -> bool:
        for name, replica in self.replicas.items():
            body = await self.readyz(name)
            if body is None or body.get("role") != "leader":
                continue
            self.journal.kills.append((time.time(), str(body["identity"])))
            await replica.kill(signal.SIGKILL)
            self.journal.note(
                f"SIGKILLed the leader {name}#{replica.starts} ({why}); started again"
            )
            await replica.start(clear_worker_status=False)
            return True
        return False

    async def stop_replicas(self) -> None:
        """SIGTERM both, the standby first; each must exit with code 0."""
        self.stopping.set()
        if self._keeper is not None:
            await self._keeper
        roles = {name: await self.readyz(name) for name in self.replicas}
        order = sorted(self.replicas, key=lambda n: (roles[n] or {}).get("role") == "leader")
        for name in order:
            try:
                await self.replicas[name].stop()
            except AssertionError as error:
                self.journal.failures.append(f"replica {name} did not stop cleanly: {error}")

    async def cleanup(self) -> None:
        for record in self._thaw:
            if processes.is_running(record):
                os.kill(record.pid, signal.SIGCONT)
        if self._keeper is not None and not self._keeper.done():
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._keeper
        for replica in self.replicas.values():
            if replica.running:
                await replica.kill(signal.SIGKILL)
        await self._http.aclose()

    # -- the chaos ---------------------------------------------------------------------

    async def run(self, planned: list[Expected], uids: dict[str, str]) -> None:
        self._keeper = asyncio.create_task(self.keep_replicas(), name="keep replicas")
        async with asyncio.TaskGroup() as group:
            group.create_task(self.freeze_until_lost())
            group.create_task(self.main_phase(planned, uids))
        kills_done = asyncio.create_task(self.kills_done.wait())
        await asyncio.wait({self._keeper, kills_done}, return_when=asyncio.FIRST_COMPLETED)
        kills_done.cancel()
        if self._keeper.done():
            self._keeper.result()  # raises what stopped it
            raise AssertionError("the replica keeper stopped before its kills were done")

    async def main_phase(self, planned: list[Expected], uids: dict[str, str]) -> None:
        await asyncio.gather(
            self.submit(planned, uids),
            self.delete_by_hand(),
            self.freeze_briefly(),
            self.restart_manager(),
        )
        self.main_done.set()

    async def submit(self, planned: list[Expected], uids: dict[str, str]) -> None:
        size = -(-len(planned) // SUBMIT_BATCHES)
        for number in range(SUBMIT_BATCHES):
            await self.journal.until(number * SUBMIT_SECONDS / SUBMIT_BATCHES)
            batch = planned[number * size : (number + 1) * size]
            for job in await asyncio.gather(*(self.create(job) for job in batch)):
                uids[job["metadata"]["name"]] = job["metadata"]["uid"]
        self.journal.note(f"all {len(uids)} Jobs submitted")

    async def create(self, job: Expected) -> Obj:
        deadline = time.monotonic() + 120
        while True:
            try:
                return await self.manager.create(JOBS, manifest(job), namespace=NAMESPACE)
            except ApiError as error:
                if error.is_already_exists:  # an earlier try that got no answer
                    return await self.manager.get(JOBS, job.name, namespace=NAMESPACE)
                if not (error.is_unreachable or error.code >= 500) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.5)

    async def freeze_until_lost(self) -> None:
        await self.journal.until(self.rng.uniform(*LOST_FREEZE_AT))
        async with self.worker_lock:
            record = apiserver_record(self.local.state_dir, self.lost)
            self._thaw.append(record)
            thaw = contextlib.ExitStack()
            thaw.enter_context(frozen(record))
            self.frozen.add(self.lost)
        try:
            self.journal.note(f"froze {self.lost}'s kube-apiserver until {self.lost} is lost")
            if await poll(self.declared_lost, timeout=LOST_WAIT):
                self.journal.lost_declared_at = self.journal.now()
                self.journal.note(f"{self.lost} declared lost (its WorkerCluster's lostTime)")
                # Its Jobs move as soon as it is declared: kill the leader amid the moves.
                await asyncio.sleep(self.rng.uniform(0.0, 1.0))
                self.kill_now.set()
                if await poll(self.nothing_left_on_lost, timeout=LOST_WAIT):
                    self.journal.note(f"no unfinished Job is placed on {self.lost} any more")
                else:
                    self.journal.failures.append(f"Jobs still placed on the lost {self.lost}")
            else:
                self.journal.failures.append(f"{self.lost} not declared lost in {LOST_WAIT:.0f}s")
        finally:
            thaw.close()
            self.frozen.discard(self.lost)
            self.journal.note(f"thawed {self.lost}'s kube-apiserver")
            self.lost_done.set()

    async def declared_lost(self) -> bool:
        return any(
            obj["metadata"]["name"] == self.lost and status(obj).get("lostTime")
            for _, obj in latest(self.recorders.registrations).values()
        )

    async def nothing_left_on_lost(self) -> bool:
        return not any(
            kind != "DELETED" and not is_finished(obj) and placements(obj)[-1:] == [self.lost]
            for kind, obj in latest(self.recorders.jobs).values()
        )

    async def freeze_briefly(self) -> None:
        await self.journal.until(self.rng.uniform(*SHORT_FREEZE_AT))
        async with self.worker_lock:
            record = apiserver_record(self.local.state_dir, self.briefly)
            self._thaw.append(record)
            thaw = contextlib.ExitStack()
            thaw.enter_context(frozen(record))
            self.frozen.add(self.briefly)
        try:
            self.journal.note(f"froze {self.briefly}'s kube-apiserver for {SHORT_FREEZE:.0f}s")
            await asyncio.sleep(SHORT_FREEZE)
        finally:
            thaw.close()
            self.frozen.discard(self.briefly)
            self.journal.note(f"thawed {self.briefly}'s kube-apiserver")

    async def restart_manager(self) -> None:
        await self.journal.until(self.rng.uniform(*MANAGER_RESTART_AT))
        record = apiserver_record(self.local.state_dir, MANAGER)
        down = time.monotonic()
        os.kill(record.pid, signal.SIGKILL)
        self.journal.note(f"SIGKILLed the manager's kube-apiserver (pid {record.pid})")

        async def gone() -> bool:
            return not processes.is_running(record)

        assert await poll(gone, timeout=15, every=0.05), "the manager's apiserver survived SIGKILL"
        fleet = LocalFleet(self.local.state_dir, progress=lambda _message: None)
        fresh = await fleet.restart(MANAGER, "kube-apiserver")
        self.journal.note(
            f"the manager's kube-apiserver answers again (pid {fresh.pid}), "
            f"{time.monotonic() - down:.1f}s after the kill"
        )

    async def delete_by_hand(self) -> None:
        moments = sorted(self.rng.uniform(*HAND_DELETIONS_WITHIN) for _ in range(HAND_DELETIONS))
        for moment in moments:
            await self.journal.until(moment)
            if not await poll(self.delete_one, timeout=30, every=0.5):
                self.journal.failures.append("found no running mirror to delete within 30s")

    async def delete_one(self) -> bool:
        async with self.worker_lock:
            candidates = sorted(
                (worker, obj["metadata"]["name"], str(obj["metadata"]["uid"]))
                for worker, recorder in self.recorders.mirrors.items()
                if worker not in self.frozen
                for kind, obj in latest(recorder).values()
                if kind != "DELETED"
                and not obj["metadata"].get("deletionTimestamp")
                and (obj["metadata"].get("labels") or {}).get(ORIGIN_UID_LABEL)
                and status(obj).get("active")
                and not is_finished(obj)
            )
            if not candidates:
                return False
            worker, name, uid = self.rng.choice(candidates)
            # Who watches it go: the replicas ready (caches synced) before the delete.
            ready = [await self.readyz(replica) for replica in self.replicas]
            watchers = frozenset(str(body["identity"]) for body in ready if body is not None)
            at = time.monotonic()
            killed = frozenset(identity for _, identity in self.journal.kills)
            try:
                async with asyncio.timeout(10):
                    await self.clients[worker].delete(JOBS, name, namespace=NAMESPACE, uid=uid)
            except (ApiError, TimeoutError) as error:
                self.journal.note(f"could not delete the mirror {worker}/{name}: {error!r}")
                return False
        self.journal.deletions[uid] = Deletion(at, watchers, killed)
        self.journal.note(f"deleted the running mirror {worker}/{name} by hand")
        return True

    # -- the end -----------------------------------------------------------------------

    async def wait_all_finished(self, count: int) -> dict[str, Obj]:
        """The Jobs as listed once all have finished, or at the deadline."""
        deadline = time.monotonic() + FINISH_TIMEOUT
        jobs: dict[str, Obj] = {}
        while True:
            with contextlib.suppress(ApiError):
                listed = await self.manager.list(JOBS, namespace=NAMESPACE)
                jobs = {job["metadata"]["name"]: job for job in listed.items}
            pending = [name for name, job in jobs.items() if not is_finished(job)]
            if len(jobs) >= count and not pending:
                self.journal.note("every Job has finished")
                return jobs
            if time.monotonic() > deadline:
                self.journal.note(f"{len(pending)} Jobs unfinished {FINISH_TIMEOUT:.0f}s after")
                return jobs
            await asyncio.sleep(2.0)

    async def wait_no_mirrors(self, *, timeout: float) -> dict[str, list[str]]:
        """Mirrors left on each worker once none is, or at the deadline."""
        left: dict[str, list[str]] = {}

        async def none_left() -> bool:
            for worker in self.recorders.mirrors:
                with contextlib.suppress(ApiError):
                    listed = await self.clients[worker].list(
                        JOBS, namespace=NAMESPACE, label_selector=MIRROR_LABEL
                    )
                    left[worker] = sorted(job["metadata"]["name"] for job in listed.items)
            return len(left) == len(self.recorders.mirrors) and not any(left.values())

        await poll(none_left, timeout=timeout, every=1.0)
        return left


# -- the verdict -------------------------------------------------------------------------

Figure = tuple[str, str, str]


def judge(
    planned: list[Expected],
    uids: Mapping[str, str],
    final: Mapping[str, Obj],
    recorders: Recorders,
    replicas: Mapping[str, Replica],
    journal: Journal,
    orphans: Mapping[str, list[str]],
    lost: str,
) -> tuple[list[Figure], list[tuple[str, list[str]]]]:
    """The figures to print, and the problems behind each figure that must be 0."""
    mirrors = {w: seen(r) for w, r in recorders.mirrors.items()}
    pods = {w: seen(r) for w, r in recorders.pods.items()}
    runs = _runs_by_origin(mirrors, pods)
    lease = [
        event for event in seen(recorders.lease) if event.obj["metadata"]["name"] == LEASE_NAME
    ]
    job_versions: dict[str, list[Seen]] = {}
    for event in seen(recorders.jobs):
        job_versions.setdefault(str(event.obj["metadata"].get("uid")), []).append(event)
    lost_jobs: list[str] = []
    outcomes: list[str] = []
    disagree: list[str] = []
    backwards: list[str] = []
    extra: list[str] = []
    at_once: list[str] = []
    allowed: list[str] = []
    uncountable = extra_pods = versions = redispatched = recreated = carrying = bounded = 0
    unwatched: list[str] = []
    deleted_jobs: list[str] = []
    for job in planned:
        uid, obj = uids.get(job.name), final.get(job.name)
        if uid is None or obj is None or obj["metadata"]["uid"] != uid or not is_finished(obj):
            lost_jobs.append(f"{job.name}: {status(obj) if obj else 'not found'}")
            continue
        ran = runs.get(uid, [])
        history = recorders.jobs.versions(uid)
        versions += len(history)
        for label, problems in (
            (outcomes, outcome_problems(obj, job)),
            (disagree, disagreements(obj, job, ran, lost=lost)),
            (backwards, regressions(history)),
        ):
            if problems:
                label.append(f"{job.name}: {'; '.join(problems)}")
        deleted: dict[str, int | None] = {}
        for number, run in enumerate(ran):
            if (deletion := journal.deletions.get(run.uid)) is not None:
                later = ran[number + 1] if number + 1 < len(ran) else None
                deleted[run.uid] = shown_when_unwatched(
                    run, later, deletion, lease, job_versions.get(uid, [])
                )
                if deleted[run.uid] is not None:
                    unwatched.append(f"{job.name}: {_deletion_text(deletion, journal)}")
        again = rework(job, ran, lost=lost, deleted=deleted)
        uncountable, extra_pods = uncountable + again.uncountable, extra_pods + again.extra
        if again.extra:
            extra.append(f"{job.name}: {again.extra} pod(s) beyond {job.completions} completions")
        for pair in ran_at_once(ran):
            (allowed if lost in pair else at_once).append(f"{job.name}: {pair}")
        redispatched += len(placements(obj)) > 1
        recreated += len(ran) > len({run.number for run in ran})
        carrying += sum(run.carry != Counts() for run in ran)
        bounded += bool(ran) and ran[-1].worker == lost and not is_finished(ran[-1].last)
        if any(run.uid in journal.deletions for run in ran):
            deleted_jobs.append(f"{job.name}: {_runs_text(ran, job)} => {_counts_text(obj, job)}")
    declared = sorted(
        {
            obj["metadata"]["name"]
            for _, obj in seen_objects(recorders.registrations)
            if status(obj).get("lostTime")
        }
    )
    wrongly_lost = [f"{name} was declared lost" for name in declared if name != lost]
    if lost not in declared:
        wrongly_lost.append(f"{lost} was never declared lost")
    logs = [f"{name}: {line}" for name, r in replicas.items() for line in r.log_problems()]
    orphaned = [f"{worker}/{name}" for worker, names in orphans.items() for name in names]
    changes = handovers(lease)
    relists = {what: r.relists for what, r in recorders.named().items() if r.relists}
    figures: list[Figure] = [
        ("Jobs submitted / finished", f"{len(uids)}/{len(planned) - len(lost_jobs)}", f"{JOB_COUNT}/{JOB_COUNT}"),
        ("Jobs lost", str(len(lost_jobs)), "0"),
        ("Jobs not ending as their pods' fate makes certain", str(len(outcomes)), "0"),
        ("Jobs whose final status disagrees with their runs", str(len(disagree)), "0"),
        (f"Jobs with a status version that went backwards ({versions} versions)", str(len(backwards)), "0"),
        ("pods that ran for work already done (NonIndexed)", str(extra_pods), "0"),
        ("  successes jobrelay could not count, lost with hand-deleted mirrors", str(uncountable), "-"),
        ("  hand deletions a later leader had not watched", str(len(unwatched)), "-"),
        (f"orphaned mirrors {GC_INTERVAL}s (one GC interval) after the end", str(len(orphaned)), "0"),
        ("Jobs whose pods ran on two workers at once", str(len(at_once)), "0"),
        (f"  of which with the frozen-and-lost {lost} (allowed)", str(len(allowed)), "-"),
        ("workers declared lost", ",".join(declared) or "none", lost),
        ("422s and tracebacks in the replicas' logs", str(len(logs)), "0"),
        ("Jobs re-dispatched (more than one placement)", str(redispatched), "-"),
        ("mirrors created with earlier runs' counts carried over", str(carrying), "-"),
        ("  Jobs judged within bounds (last run on the lost worker)", str(bounded), "-"),
        ("Jobs whose mirror was made again after a hand deletion", str(recreated), "-"),
        ("mirrors deleted by hand", str(len(journal.deletions)), str(HAND_DELETIONS)),
        ("leader SIGKILLs / replica exits by themselves", f"{len(journal.kills)}/{len(journal.exits)}", "-"),
        ("leader handovers (Lease holder changes)", str(len(changes)), "-"),
        ("watch relists (gaps)", ", ".join(f"{k} {v}" for k, v in relists.items()) or "none", "-"),
    ]  # fmt: skip
    details = [
        ("Jobs lost", lost_jobs),
        ("wrong outcomes", outcomes),
        ("disagreements with their runs", disagree),
        ("went backwards", backwards),
        ("work done again", extra),
        ("orphaned mirrors", orphaned),
        ("ran on two workers at once", at_once),
        ("workers declared lost", wrongly_lost),
        ("log problems", logs),
        ("chaos not done as planned", journal.failures),
    ]
    journal.lines.extend(_handover_lines(changes, journal))
    journal.notes.extend(["Jobs whose mirror was deleted by hand (runs in order):", *deleted_jobs])
    if unwatched:
        journal.notes.extend(
            ["Hand deletions a leader acted on without having watched them:", *unwatched]
        )
    return figures, details


def _deletion_text(deletion: Deletion, journal: Journal) -> str:
    watchers = sorted(journal.identities.get(i, i) for i in deletion.watchers)
    return f"deleted at {deletion.at - journal.t0:.1f}s, watched by {', '.join(watchers) or 'no replica'}"


def _runs_text(runs: list[Run], job: Expected) -> str:
    return " | ".join(
        f"{run.worker} run {run.number}: carried {run.carry.show()}, counted "
        f"{run.final_counts(indexed=job.indexed).show()}{' (deleted)' if run.deleted else ''}"
        for run in runs
    )


def _counts_text(obj: Obj, job: Expected) -> str:
    ended = final_condition(obj)
    return counted(status(obj), indexed=job.indexed).show() + (f" {ended[0]}" if ended else "")


def seen_objects(recorder: WatchRecorder) -> list[tuple[str, Obj]]:
    return list(recorder.events)


def _runs_by_origin(
    mirrors: Mapping[str, list[Seen]], pods: Mapping[str, list[Seen]]
) -> dict[str, list[Run]]:
    """Every Job's runs, grouping the recorded events once (not once per Job)."""
    by_origin: dict[str, dict[str, list[Seen]]] = {}
    origin_of: dict[str, str] = {}
    for worker, events in mirrors.items():
        for event in events:
            meta = event.obj.get("metadata") or {}
            origin = (meta.get("labels") or {}).get(ORIGIN_UID_LABEL)
            if origin:
                by_origin.setdefault(origin, {}).setdefault(worker, []).append(event)
                origin_of[str(meta.get("uid"))] = origin
    pods_by_origin: dict[str, dict[str, list[Seen]]] = {}
    for worker, events in pods.items():
        for event in events:
            labels = (event.obj.get("metadata") or {}).get("labels") or {}
            origin = origin_of.get(str(labels.get("batch.kubernetes.io/controller-uid")))
            if origin:
                pods_by_origin.setdefault(origin, {}).setdefault(worker, []).append(event)
    return {
        origin: runs_of(origin, found, pods_by_origin.get(origin, {}))
        for origin, found in by_origin.items()
    }


def _handover_lines(changes: list[Handover], journal: Journal) -> list[tuple[float, str]]:
    """Each handover on the timeline: who to whom, and how long the Lease shows it took."""
    kills = dict((identity, moment) for moment, identity in journal.kills)
    lines = []
    for change in changes:
        old = journal.identities.get(change.old, change.old)
        new = journal.identities.get(change.new, change.new)
        text = (
            f"Lease: {old} -> {new}: {change.gap:.1f}s from {old}'s last renewal to "
            f"{new}'s acquisition"
        )
        if change.old in kills:
            text += f", {micro_time(change.acquired) - kills[change.old]:.1f}s after its SIGKILL"
        lines.append((change.seen_at - journal.t0, text))
    return lines


def render(
    journal: Journal, figures: list[Figure], details: list[tuple[str, list[str]]]
) -> list[str]:
    lines = ["timeline (seconds since the first submission):"]
    lines += [f"  {moment:7.1f}  {text}" for moment, text in sorted(journal.lines)]
    if figures:
        width = max(len(label) for label, _, _ in figures)
        lines += ["", f"  {'figure':<{width}}  {'value':>14}  expected"]
        lines += [f"  {label:<{width}}  {value:>14}  {want}" for label, value, want in figures]
    lines += ["", *journal.notes]
    for what, problems in details:
        if problems:
            lines += ["", f"{what} ({len(problems)}):"] + [f"  {p}" for p in problems[:15]]
    return lines
