"""`jobrelay get` shows a held workload's queue and its current position (issue 24, "Seeing
it"): a queue with one slot is flooded, and the table and ``-o json`` number the waiting
Jobs 1..N in the admission pass's order (higher priority first, then older)."""

from __future__ import annotations

import json

import pytest

from jobrelay.vocabulary.names import QUEUE_LABEL
from tests.conftest import FleetHandle
from tests.e2e.support import Relay
from tests.e2e.test_cli import run
from tests.e2e.test_queues import QueueMaker, cpu_job, make_queue, priority_class
from tests.kubetools import job_manifest

pytestmark = pytest.mark.e2e

__all__ = ["make_queue", "priority_class"]  # fixtures, used by name

RUN_FOREVER = {"fleet.jobrelay.dev/outcome": "run-forever"}


async def test_get_numbers_a_flooded_queue_in_priority_then_age_order(
    relay: Relay, relay_fleet: FleetHandle, make_queue: QueueMaker, priority_class: str
) -> None:
    queue = await make_queue(relay.namespace, nominalQuota={"cpu": "1"},
                             borrowingLimit={"cpu": "0"})  # fmt: skip
    blocker = job_manifest("blocker", cpu="1", annotations=RUN_FOREVER)
    blocker["metadata"]["labels"] = {QUEUE_LABEL: queue}
    await relay.submit(blocker)
    await relay.wait_placed("blocker")  # the queue's one CPU is taken until the test ends
    # Submitted in name order: same-second creation times are ordered by name, so age
    # order is name order either way.
    low = [f"w-{i}" for i in range(4)]
    for name in low:
        await relay.submit(cpu_job(name, "1", "1s", **{QUEUE_LABEL: queue}))
    urgent = cpu_job("urgent", "1", "1s", **{QUEUE_LABEL: queue})
    urgent["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    await relay.submit(urgent)
    expected = {"urgent": "1", **{name: str(i + 2) for i, name in enumerate(low)}}

    table = await run(relay_fleet, "get", "jobs", "-n", relay.namespace)
    assert table.code == 0, table
    header, *rows = table.stdout.splitlines()
    columns = header.split()
    at_queue, at_position = columns.index("QUEUE"), columns.index("POSITION")
    shown = {row.split()[1]: (row.split()[at_queue], row.split()[at_position]) for row in rows}
    assert shown == {"blocker": (queue, "-"), **{n: (queue, p) for n, p in expected.items()}}

    printed = await run(relay_fleet, "get", "jobs", "-n", relay.namespace, "-o", "json")
    assert printed.code == 0, printed
    positions = {
        item["metadata"]["name"]: item["metadata"]["annotations"].get("jobrelay.dev/queue-position")
        for item in json.loads(printed.stdout)["items"]
    }  # fmt: skip
    assert positions == {"blocker": None, **expected}
