"""Issue 34, "Dry run" and "Estimate" on the local fleet.

`jobrelay simulate -f` a Job that fits prints a worker and exits 0; a Job asking for
10,000 CPUs prints each worker's reason and exits 1; neither creates anything on the
manager or a worker. A queue full of four one-CPU Jobs that declare 60 s each: the fifth,
waiting, shows an estimated start within 25 % of when it really starts.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobrelay.kube.client import ApiClient
from jobrelay.kube.resources import EVENTS, JOBS, WORKER_CLUSTERS
from jobrelay.vocabulary.names import QUEUE_LABEL
from tests.conftest import FleetHandle
from tests.e2e.support import Relay
from tests.e2e.test_cli import run
from tests.e2e.test_queues import QueueMaker, cpu_job, make_queue
from tests.kubetools import eventually

pytestmark = pytest.mark.e2e

__all__ = ["make_queue"]  # a fixture, used by name

EXPECTED = "jobrelay.dev/expected-duration"


async def written(relay: Relay, clients: dict[str, ApiClient]) -> dict[str, object]:
    """The Jobs and Events of the namespace on the manager and every worker, by their
    resourceVersions: what a write there would change."""
    found: dict[str, object] = {}
    for cluster in ("manager", *relay.workers):
        for resource in (JOBS, EVENTS):
            listed = await clients[cluster].list(resource, namespace=relay.namespace)
            found[f"{cluster}/{resource.plural}"] = sorted(
                (o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in listed.items
            )
    return found


async def workers_published(relay: Relay) -> None:
    """Every worker's WorkerCluster says it is connected and what it has: what simulate
    and the estimate read (the controller writes it a moment after it starts)."""

    async def published() -> bool | None:
        listed = (await relay.manager.list(WORKER_CLUSTERS)).items
        ready = {
            w["metadata"]["name"] for w in listed
            if (w.get("status") or {}).get("capacity")
            and any(c.get("type") == "Connected" and c.get("status") == "True"
                    for c in (w.get("status") or {}).get("conditions") or [])
        }  # fmt: skip
        return set(relay.workers) <= ready or None

    await eventually(published, timeout=30, what="WorkerClusters connected, capacity written")


async def test_simulate_prints_a_worker_or_each_workers_reason_and_writes_nothing(
    relay: Relay, relay_fleet: FleetHandle, clients: dict[str, ApiClient], tmp_path: Path
) -> None:
    await workers_published(relay)
    before = await written(relay, clients)
    fits = tmp_path / "fits.yaml"
    fits.write_text(yaml.safe_dump(cpu_job("fits", "1", "1s")))
    result = await run(relay_fleet, "simulate", "-f", str(fits), "-n", relay.namespace)
    assert result.code == 0, result
    worker = re.search(r"^  worker: +(\S+)$", result.stdout, re.MULTILINE)
    assert worker is not None and worker.group(1) in relay.workers, result.stdout
    assert "admitted now:     yes" in result.stdout

    huge = tmp_path / "huge.yaml"
    huge.write_text(yaml.safe_dump(cpu_job("huge", "10000", "1s")))
    result = await run(relay_fleet, "simulate", "-f", str(huge), "-n", relay.namespace,
                       "-o", "json")  # fmt: skip
    assert result.code == 1, result
    [verdict] = yaml.safe_load(result.stdout)["items"]
    assert verdict["reason"] == "NeverFits" and verdict["worker"] is None
    refused = {r["worker"]: r["reason"] for r in verdict["refusals"]}
    assert set(relay.workers) <= set(refused), refused
    assert all("10000 cpu" in refused[w] for w in relay.workers), refused
    text = await run(relay_fleet, "simulate", "-f", str(huge), "-n", relay.namespace)
    assert text.code == 1 and all(f"    {w}: " in text.stdout for w in relay.workers), text

    assert await written(relay, clients) == before


def _seconds(words: str) -> float:
    """``in about 55s`` / ``in about 2m`` / ``now`` in seconds."""
    if words == "now":
        return 0.0
    found = re.fullmatch(r"in about (\d+)([smhd])", words)
    assert found is not None, words
    return int(found.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[found.group(2)]


def _estimate_cell(table: str, name: str) -> str:
    header, *rows = table.splitlines()
    at = header.index("ESTIMATED START")
    row = next(r for r in rows if r.split()[1] == name)
    return row[at:].split("   ")[0].strip()


def _declaring(name: str, queue: str) -> dict[str, Any]:
    job = cpu_job(name, "1", "60s", **{QUEUE_LABEL: queue})
    job["metadata"]["annotations"] = {EXPECTED: "60s"}
    return job


async def test_the_fifth_of_a_full_queue_is_estimated_within_a_quarter(
    relay: Relay, relay_fleet: FleetHandle, make_queue: QueueMaker
) -> None:
    await workers_published(relay)
    queue = await make_queue(relay.namespace, nominalQuota={"cpu": "4"},
                             borrowingLimit={"cpu": "0"})  # fmt: skip
    ahead = [f"ahead-{i}" for i in range(4)]
    for name in ahead:
        await relay.submit(_declaring(name, queue))
    for name in ahead:
        await relay.wait_active(name)
    await relay.submit(_declaring("fifth", queue))
    held = await relay.wait("fifth", lambda j: bool((j.get("metadata") or {}).get("annotations", {})
                            .get("jobrelay.dev/not-placed")), timeout=30,
                            what="held by its queue")  # fmt: skip
    assert not (held["metadata"].get("annotations") or {}).get("jobrelay.dev/cluster")

    asked = time.monotonic()
    table = await run(relay_fleet, "get", "jobs", "-n", relay.namespace, "-o", "wide")
    assert table.code == 0, table
    estimated = _seconds(_estimate_cell(table.stdout, "fifth"))
    assert _estimate_cell(table.stdout, "ahead-0") == "-"
    described = await run(relay_fleet, "describe", "job", "fifth", "-n", relay.namespace)
    assert described.code == 0, described
    assert "estimated start: in about" in described.stdout, described.stdout
    # The runs ahead that end first, together, free its room: those that started in the
    # same second as the first (starts are whole seconds), so one to four of them.
    assert re.search(r"basis: declared run times of [1-4] running ahead\b", described.stdout), (
        described.stdout
    )

    await relay.wait_placed("fifth", timeout=120)
    real = time.monotonic() - asked
    print(f"estimated start in {estimated:.0f} s, real start in {real:.1f} s")
    assert abs(estimated - real) <= 0.25 * real, (estimated, real)
