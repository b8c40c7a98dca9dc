"""Which queue `jobrelay get` says a workload is in, from what the user could read."""

from __future__ import annotations

from typing import Any

import pytest

from jobrelay.admission.queue_model import LabelSelector, QueueSpec
from jobrelay.admission.queue_places import QueueKnowledge, QueuePlace, is_pending, places, queue_of
from jobrelay.admission.workload_reads import Priorities
from jobrelay.kinds.catalog import DEDICATED

JOB = DEDICATED["Job.v1.batch"]
QUEUES = {
    "team-a": QueueSpec("team-a", namespace_selector=LabelSelector({"team": "a"})),
    "zz-all": QueueSpec("zz-all"),
}
LABELS = {"ns-a": {"team": "a"}, "ns-b": {}}


def job(namespace: str = "ns-a", queue: str | None = None, **extra: Any) -> dict[str, Any]:
    labels = {"jobrelay.dev/queue": queue} if queue else {}
    return {"metadata": {"name": "j", "namespace": namespace, "labels": labels}, **extra}


CASES = {
    "the label names it": (job(queue="team-a"), QueueKnowledge(QUEUES, LABELS), "team-a"),
    "the first selector that takes the namespace": (
        job(),
        QueueKnowledge(QUEUES, LABELS),
        "team-a",
    ),
    "the catch-all when no other takes it": (job("ns-b"), QueueKnowledge(QUEUES, LABELS), "zz-all"),
    "a queue that does not admit the namespace": (
        job("ns-b", queue="team-a"),
        QueueKnowledge(QUEUES, LABELS),
        "",
    ),
    "a queue that does not exist": (job(queue="nope"), QueueKnowledge(QUEUES, LABELS), ""),
    "namespaces unreadable: the label alone": (
        job(queue="team-a"),
        QueueKnowledge(QUEUES, None),
        "team-a",
    ),
    "namespaces unreadable: no label, no queue": (job(), QueueKnowledge(QUEUES, None), ""),
    "namespaces unreadable: a label naming no queue": (
        job(queue="nope"),
        QueueKnowledge(QUEUES, None),
        "",
    ),
    "queues unreadable: the label alone": (job(queue="any"), QueueKnowledge(None, LABELS), "any"),
    "queues unreadable: no label": (job(), QueueKnowledge(None, LABELS), ""),
}


@pytest.mark.parametrize("obj,known,expected", CASES.values(), ids=CASES.keys())
def test_queue_of(obj: dict[str, Any], known: QueueKnowledge, expected: str) -> None:
    assert queue_of(obj, known) == expected


PENDING = {
    "waiting": (job(), True),
    "placed": (job(metadata={"name": "j", "annotations": {"jobrelay.dev/cluster": "w1"}}), False),
    "suspended": (job(spec={"suspend": True}), False),
    "finished": (job(status={"conditions": [{"type": "Failed", "status": "True"}]}), False),
    "being deleted": (
        {"metadata": {"name": "j", "namespace": "n", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
        False,
    ),
}


@pytest.mark.parametrize("obj,expected", PENDING.values(), ids=PENDING.keys())
def test_is_pending(obj: dict[str, Any], expected: bool) -> None:
    assert is_pending(JOB, obj) is expected


def test_a_template_it_cannot_read_has_priority_0() -> None:
    def entry(name: str, created: str, template: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": "ns-b", "creationTimestamp": created},
            "spec": {"template": template},
        }

    known = QueueKnowledge(QUEUES, LABELS, Priorities({"high": 10}))
    found = places(
        [
            (JOB, entry("broken", "2026-01-01T00:00:01Z", "not a template")),
            (JOB, entry("high", "2026-01-01T00:00:09Z", {"spec": {"priorityClassName": "high"}})),
        ],
        known,
    )
    assert found == {
        "Job ns-b/high": QueuePlace("zz-all", 1),
        "Job ns-b/broken": QueuePlace("zz-all", 2),
    }
