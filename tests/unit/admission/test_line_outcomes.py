"""A pass's outcome per queue, kept as runs: holds and positions found when asked are the
ones a dict written entry by entry would hold."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.admission.support import entry

from jobrelay.admission.line_outcomes import Holds, LineOutcome, Positions
from jobrelay.admission.queue_model import QueueHold

FULL = QueueHold("QueueQuotaExceeded", "full")
NO_ROOM = QueueHold("WaitingForRoom", "no room")


def outcome(count: int, queue: str = "q") -> LineOutcome:
    return LineOutcome([entry(f"w{at}", queue) for at in range(count)])


def test_runs_of_one_hold_are_found_by_key_and_admitted_ones_take_no_place() -> None:
    line = outcome(6)
    line.hold(0, 1, NO_ROOM)
    line.hold(1, 3, NO_ROOM)  # the same hold right after: one run
    line.admit(3)
    line.hold(4, 6, FULL)
    lines = {"q": line}
    queue_of = {f"Job q/w{at}": "q" for at in range(6)}
    holds, places = Holds(lines, queue_of), Positions(lines, queue_of)

    assert dict(holds) == {"Job q/w0": NO_ROOM, "Job q/w1": NO_ROOM, "Job q/w2": NO_ROOM,
                           "Job q/w4": FULL, "Job q/w5": FULL}  # fmt: skip
    assert dict(places) == {"Job q/w0": 1, "Job q/w1": 2, "Job q/w2": 3, "Job q/w4": 4,
                            "Job q/w5": 5}  # fmt: skip
    assert len(holds) == 5 and len(places) == 5
    assert "Job q/w3" not in holds and "Job q/w3" not in places
    assert holds.get("Job other/x") is None and places.get("Job q/nobody") is None
    assert [(e.key, hold, place) for e, hold, place in line.heads(2)] == [
        ("Job q/w0", NO_ROOM, 1),
        ("Job q/w1", NO_ROOM, 2),
    ]


def test_a_key_of_a_queue_the_pass_did_not_serve_is_neither_held_nor_placed() -> None:
    holds = Holds({"q": outcome(1)}, {"Job q/w0": "gone"})
    assert "Job q/w0" not in holds and dict(holds) == {}


# Decisions in order over one queue: each step admits its entry, or holds a run of the
# given length for one of two holds.
steps = st.lists(
    st.one_of(
        st.just(("admit", 1, None)),
        st.tuples(st.just("hold"), st.integers(1, 4), st.sampled_from([FULL, NO_ROOM])),
    ),
    max_size=20,
)


@given(steps, st.integers(0, 5))
def test_holds_positions_and_heads_are_those_written_one_by_one(
    decisions: list[tuple[str, int, QueueHold | None]], undecided: int
) -> None:
    count = sum(length for _, length, _ in decisions) + undecided
    line = outcome(count)
    keys = [e.key for e in line.entries]
    written: dict[str, QueueHold] = {}
    admitted: set[str] = set()
    at = 0
    for what, length, why in decisions:
        if what == "admit":
            line.admit(at)
            admitted.add(keys[at])
        else:
            assert why is not None
            line.hold(at, at + length, why)
            written.update(dict.fromkeys(keys[at : at + length], why))
        at += length
    waiting = [key for key in keys if key not in admitted]
    placed = {key: place for place, key in enumerate(waiting, start=1)}
    lines, queue_of = {"q": line}, dict.fromkeys(keys, "q")

    holds, places = Holds(lines, queue_of), Positions(lines, queue_of)
    assert dict(holds) == written and len(holds) == len(written)
    assert all(holds[key] is why for key, why in written.items())
    assert dict(places) == placed and len(places) == len(placed)
    assert [(e.key, hold, place) for e, hold, place in line.heads(3)] == [
        (key, written.get(key), placed[key]) for key in waiting[:3]
    ]
