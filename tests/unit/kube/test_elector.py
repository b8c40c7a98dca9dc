"""The Elector against an in-memory Lease apiserver, on fake event-loop time (looptime).

Times are exact: requests take no loop time, so "the standby took over 15 s
after it first saw the lease" is asserted to the millisecond, in milliseconds
of real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.unit.kube.leases import FakeLeases

from jobrelay.kube.client import ApiClient
from jobrelay.kube.election.election_rules import ElectionTiming, LeaseRecord, lease_body
from jobrelay.kube.election.elector import Elector, LeadershipLost, new_identity
from jobrelay.kube.errors import ApiError, WriteFenced
from jobrelay.kube.resources import LEASES

# A loop of its own per test: fake time from 0, whatever earlier tests left on the
# session loop (under a shared loop, looptime fell back to real time after some).
pytestmark = [pytest.mark.looptime, pytest.mark.asyncio(loop_scope="function")]

TIMING = ElectionTiming(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
NAMESPACE, NAME = "jobrelay-system", "jobrelay-relay"
JITTERED_RETRY = TIMING.retry_period * 1.2


def now() -> float:
    return asyncio.get_running_loop().time()


@dataclass
class Candidate:
    """One replica: its elector, its run() task, and what its leading part did."""

    elector: Elector
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    started_at: float | None = None
    cancelled_at: float | None = None
    stopped_leading: list[float] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        self.started_at = now()
        self.started.set()
        try:
            await self.stop.wait()
        except asyncio.CancelledError:
            self.cancelled_at = now()
            raise

    async def wait_started(self, within: float = 120.0) -> None:
        """Until it leads (fake time: a bug fails the test instead of hanging it)."""
        async with asyncio.timeout(within):
            await self.started.wait()

    def start(self, lead: Callable[[], Coroutine[Any, Any, None]] | None = None) -> None:
        self.task = asyncio.get_running_loop().create_task(
            self.elector.run(
                self.stop, lead or self.lead, lambda: self.stopped_leading.append(now())
            )
        )

    async def finish(self) -> None:
        """Stop it and wait for run() to return."""
        self.stop.set()
        assert self.task is not None
        async with asyncio.timeout(60):
            await self.task


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
async def make(leases: FakeLeases) -> AsyncIterator[Callable[[str], Candidate]]:
    clients: list[ApiClient] = []
    candidates: list[Candidate] = []

    def make(name: str) -> Candidate:
        client = leases.client(name)
        clients.append(client)
        elector = Elector(
            client,
            namespace=NAMESPACE,
            name=NAME,
            identity=name,
            timing=TIMING,
            rng=random.Random(name),
        )
        candidate = Candidate(elector)
        candidates.append(candidate)
        return candidate

    yield make
    for candidate in candidates:
        if candidate.task is not None and not candidate.task.done():
            candidate.task.cancel()
            with contextlib.suppress(BaseException):
                await candidate.task
    for client in clients:
        await client.aclose()


def record(holder: str) -> LeaseRecord:
    """``holder``'s, renewed last in 2001 (4 transitions so far)."""
    stamp = "2001-01-01T00:00:00.000000Z"
    return LeaseRecord(holder, 15, stamp, stamp, 4)


def held_by(holder: str) -> dict[str, Any]:
    return record(holder).spec()


async def wait_for(predicate: Callable[[], bool], within: float = 120.0) -> None:
    """Poll a condition of the elector's state (fake time: polling costs nothing)."""
    async with asyncio.timeout(within):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)


# -- one candidate ----------------------------------------------------------------------


async def test_a_lone_candidate_creates_the_lease_leads_renews_and_releases(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    alone = make("alone")
    begun = now()
    alone.start()
    await alone.wait_started()
    # No lease yet: created at the first try. (Fake loop time still lets the
    # milliseconds a loaded machine spends in each request through, and they add up
    # over renewals: times are compared within 100 ms, a twentieth of a retry period.)
    assert alone.started_at == pytest.approx(begun, abs=0.1)
    spec = leases.spec(NAME)
    assert spec["holderIdentity"] == "alone"
    assert (spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (15, 0)
    assert spec["acquireTime"] == spec["renewTime"]
    assert alone.elector.is_leader and alone.elector.holds_lease()
    assert alone.elector.leader == "alone"

    await asyncio.sleep(7)
    renewals = leases.writes("alone")[1:]
    # Every retry period, from its own last write (no read before a renewal).
    assert [r.at - begun for r in renewals] == pytest.approx([2.0, 4.0, 6.0], abs=0.1)
    assert [r.method for r in leases.requests] == ["GET", "POST", "PUT", "PUT", "PUT"]
    renewed = leases.spec(NAME)
    assert renewed["acquireTime"] == spec["acquireTime"]
    assert renewed["renewTime"] > spec["renewTime"]
    assert renewed["leaseTransitions"] == 0

    await alone.finish()
    released = leases.spec(NAME)
    # Handed back at once: no holder, one second, the transitions kept.
    assert (released["holderIdentity"], released["leaseDurationSeconds"]) == ("", 1)
    assert released["leaseTransitions"] == 0
    assert alone.stopped_leading == pytest.approx([now()], abs=0.1)
    assert not alone.elector.is_leader and not alone.elector.holds_lease()


async def test_a_standby_waits_a_full_lease_from_when_it_first_saw_it(
    leases: FakeLeases, make: Callable[[str], Candidate], caplog: pytest.LogCaptureFixture
) -> None:
    # renewTime is decades old, but wall clocks are not compared: a holder whose
    # clock is behind ours would otherwise lose a lease it still renews.
    leases.put(NAME, held_by("gone"))
    standby = make("standby")
    begun = now()
    with caplog.at_level(logging.INFO, logger="jobrelay.kube.election.elector"):
        standby.start()
        await wait_for(lambda: standby.elector.leader == "gone")
        assert not standby.elector.is_leader
        await standby.wait_started()
    waited = (standby.started_at or 0) - begun
    assert TIMING.lease_duration <= waited <= TIMING.lease_duration + JITTERED_RETRY
    spec = leases.spec(NAME)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("standby", 5)
    assert spec["acquireTime"] == spec["renewTime"] > "2001"
    standing_by = [r for r in caplog.records if "standing by" in r.getMessage()]
    assert len(standing_by) == 1, "one line per holder, not one per try"
    assert "held by gone" in standing_by[0].getMessage()
    await standby.finish()


async def test_a_holder_that_keeps_renewing_keeps_the_standby_waiting(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leases.put(NAME, held_by("busy"))
    standby = make("standby")
    standby.start()
    last_renewal = now()
    for second in range(2, 61, 2):  # "busy" renews every 2 s for a minute
        await asyncio.sleep(2)
        spec = leases.spec(NAME)
        assert spec["holderIdentity"] == "busy", f"taken over after {second} s of renewals"
        leases.put(NAME, {**spec, "renewTime": f"2001-01-01T00:01:{second:02d}.000000Z"})
        last_renewal = now()
    assert standby.started_at is None
    await standby.wait_started()
    # It saw the last renewal at its next try (within a jittered retry period) and
    # waited a lease duration from there.
    waited = (standby.started_at or 0) - last_renewal
    assert TIMING.lease_duration <= waited <= TIMING.lease_duration + 2 * JITTERED_RETRY
    await standby.finish()


async def test_a_released_lease_is_taken_at_the_next_try(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leases.put(NAME, held_by("leaving"))
    standby = make("standby")
    standby.start()
    await wait_for(lambda: standby.elector.leader == "leaving")
    await asyncio.sleep(5)
    released_at = now()
    leases.put(NAME, {**held_by(""), "leaseDurationSeconds": 1})
    await standby.wait_started()
    assert (standby.started_at or 0) - released_at <= JITTERED_RETRY
    assert leases.spec(NAME)["leaseTransitions"] == 5
    await standby.finish()


# -- losing the lease -------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["refused", "frozen", "cut off"])
async def test_a_leader_that_cannot_renew_stops_acting_at_its_renew_deadline(
    leases: FakeLeases, make: Callable[[str], Candidate], failure: str
) -> None:
    leader = make("leader")
    fenced = leases.client("writer")
    fenced.write_fence = leader.elector.holds_lease
    sent: list[float] = []

    async def lead_and_write() -> None:
        # The leader's work: a write every half second, through a fenced client.
        leader.started_at = now()
        leader.started.set()
        try:
            for index in itertools.count():
                with contextlib.suppress(ApiError):
                    body = lease_body(f"work-{index}", NAMESPACE, record("work"))
                    request = fenced.create(LEASES, body, namespace=NAMESPACE)
                    sent.append(now())
                    await request
                await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            leader.cancelled_at = now()
            raise

    leader.start(lead_and_write)
    await leader.wait_started()
    await asyncio.sleep(5.3)
    if failure == "refused":
        leases.down = True
    elif failure == "frozen":
        leases.frozen = True
    else:
        leases.cut_off.add("leader")
    with pytest.raises(LeadershipLost, match="not renewed within 10s"):
        async with asyncio.timeout(60):
            await leader.task  # type: ignore[misc]
    last_renewal = max(r.at for r in leases.writes("leader"))
    deadline = last_renewal + TIMING.renew_deadline
    # Cancelled exactly at the deadline, before anything else ran: no write after it.
    assert leader.cancelled_at == pytest.approx(deadline)
    assert leader.stopped_leading == [pytest.approx(deadline)]
    assert sent and max(sent) < deadline
    assert not leader.elector.is_leader and not leader.elector.holds_lease()
    # The fence refuses writes now, without sending them.
    with pytest.raises(WriteFenced):
        await fenced.create(LEASES, lease_body("late", NAMESPACE, record("work")))
    leases.thaw()
    await fenced.aclose()


async def test_a_lease_taken_behind_the_leaders_back_ends_its_leadership(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leader = make("leader")
    leader.start()
    await leader.wait_started()
    await asyncio.sleep(3)
    taken_at = now()
    leases.put(NAME, held_by("intruder"))  # say, a person's kubectl edit
    with pytest.raises(LeadershipLost, match="now held by intruder"):
        async with asyncio.timeout(60):
            await leader.task  # type: ignore[misc]
    # Its last renewal was at 2 s; it stopped at 2 + 10 s, not renewing again.
    assert leader.cancelled_at == pytest.approx(taken_at - 1 + TIMING.renew_deadline)
    assert leases.holder(NAME) == "intruder"


async def test_a_deleted_lease_is_created_again_by_its_leader(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leader = make("leader")
    leader.start()
    await leader.wait_started()
    await asyncio.sleep(3)
    del leases.objects[(NAMESPACE, NAME)]  # say, kubectl delete lease
    await asyncio.sleep(4)
    assert leases.holder(NAME) == "leader" and leader.elector.holds_lease()
    assert leases.spec(NAME)["leaseTransitions"] == 0
    assert leader.cancelled_at is None
    await leader.finish()


async def test_an_apiserver_that_answers_after_the_deadline_makes_no_leader(
    leases: FakeLeases, make: Callable[[str], Candidate], caplog: pytest.LogCaptureFixture
) -> None:
    leases.frozen = True
    late = make("late")
    with caplog.at_level(logging.INFO, logger="jobrelay.kube.election.elector"):
        late.start()
        await asyncio.sleep(30)
        assert late.started_at is None
        problems = [r for r in caplog.records if "cannot read or take it" in r.getMessage()]
        assert len(problems) == 1, "one line per problem, not one per try"
        assert "no answer within 10s" in problems[0].getMessage()
        leases.thaw()
        await late.wait_started()
    assert "reachable again" in caplog.text
    await late.finish()


# -- two candidates ---------------------------------------------------------------------


async def test_two_candidates_one_leader_and_both_kinds_of_handover(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    first, second = make("first"), make("second")
    first.start()
    await first.wait_started()
    second.start()
    await wait_for(lambda: second.elector.leader == "first")
    await asyncio.sleep(30)
    assert second.started_at is None and not second.elector.is_leader

    # The leader dies (SIGKILL): its requests stop; it would lose at its deadline,
    # and the standby must not lead before then.
    died_at = now()
    leases.cut_off.add("first")
    await second.wait_started()
    with pytest.raises(LeadershipLost):
        async with asyncio.timeout(60):
            await first.task  # type: ignore[misc]
    assert first.cancelled_at is not None and second.started_at is not None
    handover = second.started_at - died_at
    assert handover <= TIMING.lease_duration + 2 * JITTERED_RETRY
    margin = second.started_at - first.cancelled_at
    assert margin >= TIMING.lease_duration - TIMING.renew_deadline - 1e-6
    assert leases.spec(NAME)["leaseTransitions"] == 1

    # A new replica stands by; the leader stops cleanly (SIGTERM): released at once.
    third = make("third")
    third.start()
    await wait_for(lambda: third.elector.leader == "second")
    await asyncio.sleep(3)
    stopped_at = now()
    await second.finish()
    await third.wait_started()
    assert (third.started_at or 0) - stopped_at <= JITTERED_RETRY
    assert leases.spec(NAME)["leaseTransitions"] == 2
    await third.finish()


async def test_a_failing_leading_task_releases_the_lease_and_raises(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    broken = make("broken")

    async def fail() -> None:
        await asyncio.sleep(1)
        raise RuntimeError("bug")

    broken.start(fail)
    with pytest.raises(RuntimeError, match="bug"):
        async with asyncio.timeout(60):
            await broken.task  # type: ignore[misc]
    assert leases.holder(NAME) == ""


async def test_stopped_while_standing_by_returns_without_writing(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leases.put(NAME, held_by("other"))
    standby = make("standby")
    standby.start()
    await wait_for(lambda: standby.elector.leader == "other")
    await standby.finish()
    assert leases.writes("standby") == [] and standby.stopped_leading == []


async def test_candidates_starting_together_elect_one(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leases.latency = 0.1  # both read "no Lease" before either creates it
    both = [make("left"), make("right")]
    for candidate in both:
        candidate.start()
    await asyncio.sleep(20)
    leaders = [c.elector.identity for c in both if c.elector.is_leader]
    assert len(leaders) == 1 and leases.holder(NAME) == leaders[0]
    # The loser's create met AlreadyExists: one POST each, one succeeded.
    assert [r.ok for r in leases.requests if r.method == "POST"] == [True, False]
    for candidate in both:
        await candidate.finish()


async def test_stopped_while_a_try_wins_it_hands_the_lease_back(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leases.frozen = True
    late = make("late")
    late.start()
    await asyncio.sleep(1)  # its first try hangs on the frozen apiserver
    late.stop.set()
    leases.thaw()
    await late.finish()
    assert late.started_at is None
    assert [r.method for r in leases.requests] == ["GET", "POST", "PUT"]
    assert leases.holder(NAME) == ""


async def test_a_leader_that_cannot_release_says_so_and_stops(
    leases: FakeLeases, make: Callable[[str], Candidate], caplog: pytest.LogCaptureFixture
) -> None:
    leader = make("leader")
    leader.start()
    await leader.wait_started()
    await asyncio.sleep(1)
    leases.down = True
    with caplog.at_level(logging.WARNING, logger="jobrelay.kube.election.elector"):
        await leader.finish()
    assert "could not release lease" in caplog.text
    assert leases.holder(NAME) == "leader"  # it runs out by itself


async def test_cancelling_run_stops_the_leading_task_and_releases(
    leases: FakeLeases, make: Callable[[str], Candidate]
) -> None:
    leader = make("leader")
    leader.start()
    await leader.wait_started()
    assert leader.task is not None
    leader.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(60):
            await leader.task
    assert leader.cancelled_at is not None
    assert leases.holder(NAME) == ""


async def test_unsafe_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="shorter than the lease duration"):
        Elector(
            FakeLeases().client(),
            namespace=NAMESPACE,
            name=NAME,
            identity="x",
            timing=ElectionTiming(10, 10, 2),
        )


async def test_identities_are_unique_per_process_and_call() -> None:
    one, two = new_identity(), new_identity()
    assert one != two
    host, pid, _ = one.rsplit("_", 2)
    assert host and pid.isdigit()


async def test_the_leader_records_its_annotations_on_the_lease_with_every_write(
    leases: FakeLeases,
) -> None:
    """What `jobrelay version` and `jobrelay get` read: the leader's version and kinds, on
    the Lease it writes anyway; annotations someone else put there are kept."""
    leases.put(NAME, held_by(""))
    leases.objects[(NAMESPACE, NAME)]["metadata"]["annotations"] = {"someone/else": "kept"}
    client = leases.client("leader")
    elector = Elector(
        client, namespace=NAMESPACE, name=NAME, identity="leader", timing=TIMING,
        rng=random.Random(0), annotations={"jobrelay.dev/version": "9.9.9"},
    )  # fmt: skip
    candidate = Candidate(elector)
    candidate.start()
    await candidate.wait_started()
    await asyncio.sleep(5)  # renewals too
    annotations = leases.objects[(NAMESPACE, NAME)]["metadata"]["annotations"]
    assert annotations == {"someone/else": "kept", "jobrelay.dev/version": "9.9.9"}
    await candidate.finish()
    await client.aclose()
