"""A pending workload's place in its queue: the order the admission pass serves it in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.admission.support import entry, fleet, queue, queues

from jobrelay.admission.fair_order import admission_pass, positions, queue_order
from jobrelay.admission.queue_model import Entry

CASES = {
    "nothing waits": ([], {}),
    "oldest first": (
        [entry("b", "q", created=2), entry("a", "q", created=1), entry("c", "q", created=3)],
        {"Job q/a": 1, "Job q/b": 2, "Job q/c": 3},
    ),
    "higher priority first, whatever its age": (
        [entry("old", "q", created=1), entry("urgent", "q", created=9, priority=100)],
        {"Job q/urgent": 1, "Job q/old": 2},
    ),
    "same priority and age: by key": (
        [entry("b", "q"), entry("a", "q")],
        {"Job q/a": 1, "Job q/b": 2},
    ),
    "admitted ones take no place": (
        [entry("running", "q", created=0, admitted=True), entry("next", "q", created=5)],
        {"Job q/next": 1},
    ),
    "each queue counts on its own": (
        [entry("a1", "a", created=2), entry("b1", "b", created=1), entry("a2", "a", created=3)],
        {"Job a/a1": 1, "Job a/a2": 2, "Job b/b1": 1},
    ),
    "negative priorities come after the default": (
        [entry("low", "q", priority=-5, created=0), entry("plain", "q", created=7)],
        {"Job q/plain": 1, "Job q/low": 2},
    ),
}


@pytest.mark.parametrize("given_entries,expected", CASES.values(), ids=CASES.keys())
def test_positions(given_entries: list[Entry], expected: dict[str, int]) -> None:
    assert positions(given_entries) == expected


entries = st.lists(
    st.builds(
        entry,
        st.text("abcdef", min_size=1, max_size=3),
        st.sampled_from(["q1", "q2", "q3"]),
        priority=st.integers(-3, 3),
        created=st.integers(0, 50),
        admitted=st.booleans(),
    ),
    max_size=40,
    unique_by=lambda e: e.key,
)


@given(entries)
def test_each_queue_is_numbered_1_to_n_in_queue_order(given_entries: list[Entry]) -> None:
    places = positions(given_entries)
    pending = [e for e in given_entries if not e.admitted]
    assert set(places) == {e.key for e in pending}
    for name in {e.queue for e in pending}:
        mine = sorted((e for e in pending if e.queue == name), key=lambda e: places[e.key])
        assert [places[e.key] for e in mine] == list(range(1, len(mine) + 1))
        assert mine == sorted(mine, key=queue_order)


@given(entries)
def test_the_order_entries_come_in_does_not_matter(given_entries: list[Entry]) -> None:
    assert positions(given_entries) == positions(list(reversed(given_entries)))


@given(entries)
def test_positions_are_the_admission_pass_positions_when_nothing_fits(
    given_entries: list[Entry],
) -> None:
    """`jobrelay get` numbers a queue as the controller's held reason does."""
    specs = queues(queue("q1"), queue("q2"), queue("q3"))
    result = admission_pass(specs, given_entries, fleet(), fits=lambda _entry: False)
    assert result.admitted == ()
    assert dict(result.positions) == positions(given_entries)
