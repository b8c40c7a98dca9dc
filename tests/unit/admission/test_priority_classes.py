"""Priority is the admin's: a delegated workload may name no system PriorityClass, and a
RelayQueue that lists its allowed classes takes no other. Tables, then properties."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.admission.support import queue, queues
from tests.unit.admission.test_planner import _room, candidate, key, names, view

from jobrelay.admission.planner import plan
from jobrelay.admission.priority_classes import (
    PRIORITY_CLASS_NOT_ALLOWED,
    priority_class_refusal,
    stated_priority_classes,
)
from jobrelay.admission.queue_model import QueueSpec, WithinQueue

TEAM = QueueSpec("team", allowed_priority_classes=frozenset({"batch-low", "batch-high"}))
OPEN = QueueSpec("open")


@pytest.mark.parametrize(
    ("classes", "queue_spec", "refused", "words"),
    [
        ((), None, False, ""),
        (("batch-low",), None, False, ""),
        (("system-node-critical",), None, True, "'system-node-critical' is the cluster's own"),
        (("system-cluster-critical",), OPEN, True, "system-"),
        (("system-anything",), TEAM, True, "system-"),
        (("batch-low", "batch-high"), TEAM, False, ""),
        (("batch-low", "urgent"), TEAM, True, "RelayQueue team does not allow PriorityClass 'urgent' (it allows batch-high, batch-low)"),
        (("urgent",), OPEN, False, ""),
        (("urgent",), QueueSpec("none", allowed_priority_classes=frozenset()), True, "(it allows none)"),
        (("systemic",), OPEN, False, ""),
    ],
)  # fmt: skip
def test_what_is_refused(
    classes: tuple[str, ...], queue_spec: QueueSpec | None, refused: bool, words: str
) -> None:
    hold = priority_class_refusal(classes, queue_spec)
    assert (hold is not None) == refused
    if hold is not None:
        assert hold.reason == PRIORITY_CLASS_NOT_ALLOWED and hold.settled
        assert hold.event_type == "Warning" and words in hold.message, hold.message


def test_the_names_stated_are_read_each_once_and_a_template_without_one_states_none() -> None:
    templates = [
        {"spec": {"priorityClassName": "a"}},
        {"spec": {}},
        {"spec": {"priorityClassName": "a"}},
        {"spec": {"priorityClassName": "b"}},
        {"spec": {"priorityClassName": 7}},
        "nonsense",
    ]
    assert stated_priority_classes(templates) == ("a", "b")


_names = st.text(alphabet="abcsytem-", min_size=1, max_size=12)


@given(st.lists(_names, max_size=5), st.none() | st.frozensets(_names, max_size=4))
def test_a_class_passes_only_when_it_is_no_system_one_and_the_queue_lists_it(
    classes: list[str], allowed: frozenset[str] | None
) -> None:
    hold = priority_class_refusal(classes, QueueSpec("q", allowed_priority_classes=allowed))
    fine = all(
        not name.startswith("system-") and (allowed is None or name in allowed) for name in classes
    )
    assert (hold is None) == fine
    assert priority_class_refusal([], QueueSpec("q", allowed_priority_classes=allowed)) is None


def test_a_refused_workload_neither_waits_in_its_queue_nor_preempts() -> None:
    specs = queues(dataclasses.replace(
        queue("q", nominal={"cpu": "2"}, borrowing={"cpu": "0"}, within=WithinQueue.LOWER_PRIORITY)
    ))  # fmt: skip
    running = [candidate(f"low{i}", "q", created=i, placed="w1") for i in range(2)]
    critical = candidate("critical", "q", created=5, priority=2_000_001_000)
    critical = critical._replace(
        read=dataclasses.replace(critical.read, priority_classes=("system-node-critical",))
    )
    made = plan(view(*running, critical, specs=specs, free=0, room=_room))
    assert made.victims == {} and names(made.admitted) == []
    assert not made.waits("Job ns/critical") and "Job ns/critical" not in made.positions
    # Allowed (a class of its own): it displaces the newest lower-priority one.
    allowed = critical._replace(read=dataclasses.replace(critical.read, priority_classes=("hi",)))
    made = plan(view(*running, allowed, specs=specs, free=0, room=_room))
    assert list(made.victims) == [key("low1")]
