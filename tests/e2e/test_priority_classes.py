"""Priority is the admin's, on the local fleet (issue 33's "Priority"): a Job asking for
``system-node-critical`` is held with a Warning ``PriorityClassNotAllowed`` and gets no
mirror, and another tenant's running Job in the same queue (``withinQueue:
LowerPriority``) is not preempted for it. (``system-node-critical`` exists in every
apiserver.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from jobrelay.kube.resources import JOBS
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION, PREEMPTED_BY_ANNOTATION, QUEUE_LABEL
from tests.e2e.support import Relay, placement
from tests.e2e.test_queues import NAME_LABEL, QueueMaker, cpu_job, make_queue  # noqa: F401
from tests.kubetools import is_true

pytestmark = pytest.mark.e2e


async def test_a_system_priority_class_is_refused_and_preempts_no_other_tenant(
    relay: Relay,
    make_queue: QueueMaker,  # noqa: F811
    make_namespace: Callable[[list[str]], Awaitable[str]],
    make_relay: Callable[[str], Awaitable[Relay]],
) -> None:
    other = await make_relay(await make_namespace(["manager", *relay.workers]))
    both = [relay.namespace, other.namespace]
    queue = await make_queue(
        relay.namespace, nominalQuota={"cpu": "1"}, borrowingLimit={"cpu": "0"},
        preemption={"withinQueue": "LowerPriority"},
        namespaceSelector={"matchExpressions": [
            {"key": NAME_LABEL, "operator": "In", "values": both}]},
    )  # fmt: skip
    # The other tenant fills the queue.
    await other.submit(cpu_job("steady", "1", "8s", **{QUEUE_LABEL: queue}))
    await other.wait_active("steady")
    critical = cpu_job("critical", "1", "1s", **{QUEUE_LABEL: queue})
    critical["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    created = await relay.submit(critical)
    event = await relay.wait_event(
        created["metadata"]["uid"],
        lambda e: e.get("type") == "Warning" and e.get("reason") == "PriorityClassNotAllowed",
        what="a Warning PriorityClassNotAllowed on the critical Job",
    )
    assert "system-node-critical" in event["message"], event
    held = await relay.get("critical")
    said = (held["metadata"].get("annotations") or {}).get(NOT_PLACED_ANNOTATION, "")
    assert said.startswith("PriorityClassNotAllowed: "), said
    # The other tenant's Job runs to its end, once, never preempted.
    done = await other.wait_finished("steady", timeout=60)
    assert is_true(done, "Complete"), done["status"]
    assert PREEMPTED_BY_ANNOTATION not in (done["metadata"].get("annotations") or {})
    assert len(other.mirror_uids(done["metadata"]["uid"])) == 1
    assert not any(e.get("reason") == "Preempted"
                   for e in await other.events(done["metadata"]["uid"]))  # fmt: skip
    # And the refused one got no mirror anywhere, even with the queue free now.
    held = await relay.get("critical")
    assert not placement(held)
    assert relay.mirror_uids(created["metadata"]["uid"]) == set()
    for worker in relay.workers:
        listed = await relay.clients[worker].list(JOBS, namespace=relay.namespace)
        assert not [j for j in listed.items if j["metadata"]["name"] == "critical"]
