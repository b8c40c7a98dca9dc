"""Which queue a workload goes to: the label, else the namespace's first matching queue."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.admission.support import queue, queues

from jobrelay.admission.queue_choice import (
    QueueChoice,
    Queued,
    QueueIndex,
    QueueNotAllowed,
    QueueNotFound,
    Unqueued,
    own_queues,
    queue_for,
)

QUEUES = queues(
    queue("team-a", labels={"team": "a"}),
    queue("team-b", labels={"team": "b"}),
    queue("zz-all"),  # {}: every namespace
    queue("b-also", labels={"team": "b"}),
)
ONLY_A = queues(queue("team-a", labels={"team": "a"}))
CATCH_ALL_FIRST = queues(queue("aa-all"), queue("team-a", labels={"team": "a"}))
TWO_CATCH_ALLS = queues(queue("all-2"), queue("all-1"))

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
    ("the catch-all may be named where no own queue is", "zz-all", {"team": "c"}, QUEUES,
     Queued("zz-all")),
    ("the catch-all is no way out of a team's queue", "zz-all", {"team": "a"}, QUEUES,
     QueueNotAllowed("zz-all", "ns", ("team-a",))),
    ("nor out of two", "zz-all", {"team": "b"}, QUEUES,
     QueueNotAllowed("zz-all", "ns", ("b-also", "team-b"))),
    ("a catch-all sorting first does not take a team's namespace", None, {"team": "a"},
     CATCH_ALL_FIRST, Queued("team-a")),
    ("nor a namespace of no team", None, {"team": "c"}, CATCH_ALL_FIRST, Queued("aa-all")),
    ("of two catch-alls, the first by name", None, {}, TWO_CATCH_ALLS, Queued("all-1")),
    ("another catch-all may be named", "all-2", {}, TWO_CATCH_ALLS, Queued("all-2")),
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
    catch_all = QueueNotAllowed("zz-all", "team-a", ("team-a",))
    assert catch_all.reason == "QueueNotAllowed"
    assert "zz-all is a catch-all" in catch_all.message
    assert "has its own: team-a" in catch_all.message


_selectors = st.sampled_from([{}, {"team": "a"}, {"team": "b"}, {"tier": "x"}])


@given(
    st.dictionaries(st.sampled_from(["q1", "q2", "q3", "q4"]), _selectors, max_size=4),
    st.sampled_from([{}, {"team": "a"}, {"team": "b", "tier": "x"}, {"tier": "x"}]),
    st.sampled_from([None, "q1", "q2", "q3", "q4"]),
)
def test_a_label_never_leaves_the_namespaces_own_queues(
    selectors: dict[str, dict[str, str]], labels: dict[str, str], named: str | None
) -> None:
    known = queues(*(queue(name, labels=selector) for name, selector in selectors.items()))
    own = {name for name, selector in selectors.items()
           if selector and all(labels.get(k) == v for k, v in selector.items())}  # fmt: skip
    choice = queue_for(named, "ns", labels, known)
    # A pass that found the namespace's own queues once gets the same answer.
    assert queue_for(named, "ns", labels, known, own=own_queues(labels, known)) == choice
    # So does one that sorted the queues out once for every namespace (QueueIndex).
    index = QueueIndex.of(known)
    assert queue_for(named, "ns", labels, known, own=index.own(labels), index=index) == choice
    assert queue_for(named, "ns", labels, known, index=index) == choice
    assert own_queues(labels, known) == index.own(labels) == tuple(sorted(own))
    if isinstance(choice, Queued):
        assert known[choice.queue].namespace_selector.matches(labels)
        assert choice.queue in own or not own  # a catch-all only where no own queue is
        if named:
            assert choice.queue == named
        elif own:
            assert choice.queue == min(own)
    elif named is None:
        assert choice == Unqueued()
        assert not any(q.namespace_selector.matches(labels) for q in known.values())
