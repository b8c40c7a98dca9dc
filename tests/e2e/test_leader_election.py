"""Two real `jobrelay run` replicas with leader election, against the real local fleet.

Exactly one leads (the Lease's holder, and its /readyz role); the other keeps
warm caches and writes nothing. Jobs dispatched by the leader complete. When
the leader is SIGKILLed, the standby takes over once the lease runs out (a
lease duration after it last saw it renewed, plus at most two tries); when the
leader is stopped with SIGTERM it releases the lease and the standby takes
over at its next try. Jobs keep completing after each handover, every Event
on them names the replica that led (reportingInstance), and no standby logged
a write. The handover durations are printed.
"""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from jobrelay.controller.options import LeaderElectionSettings, lease_name_for
from jobrelay.kube.client import ApiClient
from jobrelay.kube.election.election_rules import RETRY_JITTER
from jobrelay.kube.resources import LEASES
from jobrelay.vocabulary.names import DEFAULT_CONTROLLER_NAME
from tests.e2e.support import Relay, Replica
from tests.kubetools import eventually, job_manifest

if TYPE_CHECKING:
    from tests.conftest import FleetHandle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

DEFAULTS = LeaderElectionSettings()
LEASE = lease_name_for(DEFAULT_CONTROLLER_NAME)
NAMESPACE = "jobrelay-system"
TRY = DEFAULTS.retry_period * (1 + RETRY_JITTER)  # longest wait between two tries
# A SIGKILLed leader's lease runs out a lease duration after the standby saw its
# last renewal, which it saw at most one try after it was made; the standby
# notices at its next try. Slack for a busy 2-core machine.
KILL_HANDOVER_MAX = DEFAULTS.lease_duration + 2 * TRY + 5.0
# A released lease is taken at the standby's next try; the leader first drains
# its in-flight reconciles.
TERM_HANDOVER_MAX = TRY + 5.0


def micro_seconds(stamp: str) -> float:
    """A Lease's MicroTime as seconds since the epoch."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def lease_spec(manager: ApiClient) -> dict[str, Any]:
    lease = await manager.get(LEASES, LEASE, namespace=NAMESPACE)
    return dict(lease["spec"])


async def run_jobs(relay: Relay, prefix: str, leader: Replica, identity: str) -> None:
    """Three Jobs dispatched and completed; every Event on them written by ``identity``."""
    names = [f"{prefix}-{index}" for index in range(3)]
    for name in names:
        await relay.submit(job_manifest(name, annotations={"fleet.jobrelay.dev/duration": "1s"}))
    relay.controller = leader
    finished = await asyncio.gather(*(relay.verify(name) for name in names))
    for done in finished:
        events = await relay.events(done.uid)
        instances = {event.get("reportingInstance") for event in events}
        assert instances == {identity}, (
            f"{done.job['metadata']['name']}: Events written by {instances}, "
            f"expected the leader {identity} alone"
        )


def assert_wrote_nothing_while_standing_by(replica: Replica) -> None:
    writes = replica.writes_logged(before_event="leading")
    assert not writes, f"{replica.log_path.stem} wrote while standing by: {writes[:5]}"


async def wait_lease_holder(manager: ApiClient, identity: str) -> dict[str, Any]:
    async def named() -> dict[str, Any] | None:
        spec = await lease_spec(manager)
        return spec if spec["holderIdentity"] == identity else None

    return await eventually(named, timeout=30, what=f"the Lease naming {identity}")


async def test_one_leader_warm_standby_and_handovers_on_sigkill_and_sigterm(
    replicas: dict[str, Replica],
    clients: dict[str, ApiClient],
    fleet: FleetHandle,
    namespace: str,
) -> None:
    a, b = replicas["a"], replicas["b"]
    manager = clients["manager"]
    handovers: list[tuple[str, float]] = []

    # -- one leader, one warm standby ----------------------------------------------
    await a.start(manager)
    first = await a.wait_role("leader", timeout=60)
    a_id = first["identity"]
    await b.start(manager, clear_worker_status=False)
    standby = await b.wait_role("standby", leader=a_id, timeout=60)
    b_id = standby["identity"]
    assert standby == {"role": "standby", "ready": True, "leader": a_id, "identity": b_id}
    assert first["leader"] == a_id and await a.readyz() == (200, first)
    spec = await lease_spec(manager)
    assert spec["holderIdentity"] == a_id
    assert spec["leaseDurationSeconds"] == DEFAULTS.lease_duration
    transitions = spec["leaseTransitions"]

    async with Relay(clients, fleet.workers, namespace, a) as relay:
        await run_jobs(relay, "under-a", a, a_id)
        assert not b.logged("leading")
        assert_wrote_nothing_while_standing_by(b)

        # -- SIGKILL: the standby takes over once the lease has run out ------------
        killed_at = time.monotonic()
        await a.kill(signal.SIGKILL)
        last_renewal = await lease_spec(manager)  # a is gone: nobody renews it any more
        took_over = await b.wait_role("leader", timeout=KILL_HANDOVER_MAX + 10)
        handover = time.monotonic() - killed_at
        handovers.append(("SIGKILL of the leader", handover))
        print(f"\nhandover after SIGKILL of the leader: {handover:.1f}s")
        assert took_over["leader"] == b_id
        assert handover <= KILL_HANDOVER_MAX, handover
        assert_wrote_nothing_while_standing_by(b)
        spec = await lease_spec(manager)
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == (b_id, transitions + 1)
        # Safety: the takeover came a whole lease duration after a's last renewal
        # (both stamped by this machine's clock).
        gap = micro_seconds(spec["acquireTime"]) - micro_seconds(last_renewal["renewTime"])
        print(f"a's last renewal to b's acquisition: {gap:.1f}s")
        assert last_renewal["holderIdentity"] == a_id
        assert gap >= DEFAULTS.lease_duration, gap
        await run_jobs(relay, "under-b", b, b_id)

        # -- a restarted replica stands by ---------------------------------------------
        await a.start(manager, clear_worker_status=False)
        again = await a.wait_role("standby", leader=b_id, timeout=60)
        a2_id = again["identity"]
        assert a2_id != a_id

        # -- SIGTERM: the leader releases the lease, the standby takes it at once ---
        stopped_at = time.monotonic()
        await b.stop()  # exit code 0
        await a.wait_role("leader", timeout=TERM_HANDOVER_MAX + 10)
        handover = time.monotonic() - stopped_at
        handovers.append(("SIGTERM of the leader", handover))
        print(f"handover after SIGTERM of the leader: {handover:.1f}s")
        assert handover <= TERM_HANDOVER_MAX, handover
        assert b.logged("released")
        assert_wrote_nothing_while_standing_by(a)
        spec = await wait_lease_holder(manager, a2_id)
        assert spec["leaseTransitions"] == transitions + 2
        await run_jobs(relay, "under-a2", a, a2_id)

    print("handovers: " + ", ".join(f"{what} {seconds:.1f}s" for what, seconds in handovers))
