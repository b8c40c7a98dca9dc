"""Which queue a workload goes to: the label, else the namespace's first matching queue."""

from __future__ import annotations

import pytest
from tests.unit.admission.support import queue, queues

from jobrelay.admission.queue_choice import (
    QueueChoice,
    Queued,
    QueueNotAllowed,
    QueueNotFound,
    Unqueued,
    queue_for,
)

QUEUES = queues(
    queue("team-a", labels={"team": "a"}),
    queue("team-b", labels={"team": "b"}),
    queue("zz-all"),  # {}: every namespace
    queue("b-also", labels={"team": "b"}),
)
ONLY_A = queues(queue("team-a", labels={"team": "a"}))

CASES: list[tuple[str, str | None, dict[str, str], dict, QueueChoice]] = [
    ("the label names the queue", "team-a", {"team": "a"}, QUEUES, Queued("team-a")),
    ("a labelled queue needs the namespace admitted", "team-a", {"team": "b"}, QUEUES,
     QueueNotAllowed("team-a", "ns")),
    ("a named queue that does not exist", "team-x", {"team": "a"}, QUEUES,
     QueueNotFound("team-x")),
    ("no label: the matching queue", None, {"team": "a"}, QUEUES, Queued("team-a")),
    ("no label, several match: first by name", None, {"team": "b"}, QUEUES, Queued("b-also")),
    ("an empty label is no label", "", {"team": "a"}, QUEUES, Queued("team-a")),
    ("the catch-all takes the rest", None, {"team": "c"}, QUEUES, Queued("zz-all")),
    ("no queue matches: unqueued", None, {"team": "c"}, ONLY_A, Unqueued()),
    ("no queues at all: unqueued", None, {}, {}, Unqueued()),
    ("a label but no queues", "team-a", {}, {}, QueueNotFound("team-a")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("named", "labels", "known", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_queue_for(named: str | None, labels: dict[str, str], known: dict,
                   expected: QueueChoice) -> None:  # fmt: skip
    assert queue_for(named, "ns", labels, known) == expected


def test_the_warnings_say_what_to_do() -> None:
    missing = QueueNotFound("team-x")
    assert missing.reason == "QueueNotFound"
    assert "no RelayQueue named 'team-x'" in missing.message
    assert "jobrelay.dev/queue" in missing.message
    refused = QueueNotAllowed("team-a", "lab")
    assert refused.reason == "QueueNotAllowed"
    assert "does not admit namespace lab" in refused.message
    assert "name another queue" in refused.message
