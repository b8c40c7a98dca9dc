"""The versions this process wrote (controller/relay/own_writes.py): their watch events are
echoes, and no other event ever is; one that comes before its write's answer waits for it,
and every other event that came meanwhile is queued."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.controller.relay.own_writes import WAITING_AT_MOST, OwnWrites
from jobrelay.kinds.base import WorkloadKey
from jobrelay.vocabulary.outcome import Lane

A = WorkloadKey("Job.v1.batch", "ns/a")
B = WorkloadKey("Job.v1.batch", "ns/b")


def test_the_echo_of_the_last_write_is_known_once() -> None:
    writes = OwnWrites()
    writes.wrote(A, "10")
    assert not writes.is_echo(A, "9")  # an earlier version, delivered late
    assert not writes.is_echo(B, "10")  # another object
    assert writes.is_echo(A, "10")
    assert not writes.is_echo(A, "10")  # seen: forgotten
    assert len(writes) == 0


def test_only_the_newest_write_of_an_object_is_kept() -> None:
    writes = OwnWrites()
    writes.wrote(A, "10")
    writes.wrote(A, "12")
    assert not writes.is_echo(A, "10")  # reconciled as any event: harmless
    assert writes.is_echo(A, "12")


def test_no_version_and_gone_objects_remember_nothing() -> None:
    writes = OwnWrites()
    writes.wrote(A, None)
    writes.wrote(B, "")
    assert len(writes) == 0
    assert not writes.is_echo(A, None)
    writes.wrote(A, "3")
    writes.forget(A)
    assert not writes.is_echo(A, "3")


def test_bounded_the_oldest_forgotten() -> None:
    writes = OwnWrites(remembered=2)
    keys = [WorkloadKey("Job.v1.batch", f"ns/{i}") for i in range(3)]
    for index, key in enumerate(keys):
        writes.wrote(key, str(index))
    assert len(writes) == 2
    assert not writes.is_echo(keys[0], "0")
    assert writes.is_echo(keys[2], "2")


@given(st.lists(st.tuples(st.booleans(), st.sampled_from([A, B]), st.integers(1, 6)), max_size=40))
def test_an_event_is_an_echo_only_of_a_version_written_and_not_seen_since(
    steps: list[tuple[bool, WorkloadKey, int]],
) -> None:
    writes = OwnWrites()
    last: dict[WorkloadKey, str] = {}
    for is_write, key, version in steps:
        if is_write:
            writes.wrote(key, str(version))
            last[key] = str(version)
        else:
            echo = writes.is_echo(key, str(version))
            assert echo == (last.get(key) == str(version))
            if echo:
                del last[key]


# -- an echo that comes before the write's answer ----------------------------------------


class _Queued(list[tuple[WorkloadKey, Lane]]):
    def __call__(self, key: WorkloadKey, lane: Lane) -> None:
        self.append((key, lane))


def test_an_echo_that_comes_before_the_answer_waits_for_it_and_is_dropped() -> None:
    queued = _Queued()
    writes = OwnWrites(requeue=queued)
    with writes.writing(A) as write:
        assert writes.defer(A, "10", Lane.STATUS)  # the echo, before the answer
        assert not writes.defer(B, "4", Lane.FRESH)  # another object: no write under way
        write.answered("10")
    assert queued == []
    assert not writes.is_echo(A, "10")  # seen already: nothing kept for it
    assert not writes.defer(A, "11", Lane.STATUS)  # the write is over: events go on


def test_other_changes_that_came_during_the_write_are_queued_in_their_best_lane() -> None:
    queued = _Queued()
    writes = OwnWrites(requeue=queued)
    with writes.writing(A) as write:
        assert writes.defer(A, "9", Lane.STATUS)
        assert writes.defer(A, "12", Lane.FRESH)
        write.answered("11")
    assert queued == [(A, Lane.FRESH)]
    assert writes.is_echo(A, "11")  # its echo is still to come


def test_a_write_that_fails_or_tells_no_answer_queues_what_came_meanwhile() -> None:
    queued = _Queued()
    writes = OwnWrites(requeue=queued)
    with pytest.raises(RuntimeError), writes.writing(A):
        writes.defer(A, "9", Lane.STATUS)
        raise RuntimeError("refused")
    with writes.writing(B):
        writes.defer(B, "3", Lane.BACKGROUND)  # answered with a conflict, say: no version
    assert queued == [(A, Lane.STATUS), (B, Lane.BACKGROUND)]
    assert len(writes) == 0


def test_nothing_waits_without_a_queue_or_for_a_write_whose_echo_is_looked_at() -> None:
    writes = OwnWrites()
    with writes.writing(A) as write:
        assert not writes.defer(A, "10", Lane.STATUS)
        write.answered("10")
    assert writes.is_echo(A, "10")
    queued = _Queued()
    writes = OwnWrites(requeue=queued)
    with writes.writing(A, echo_skippable=False) as write:
        assert not writes.defer(A, "10", Lane.STATUS)
        write.answered("10")
    assert not writes.is_echo(A, "10")  # its echo is looked at
    assert queued == []


def test_events_waiting_for_one_write_are_bounded() -> None:
    queued = _Queued()
    writes = OwnWrites(requeue=queued)
    with writes.writing(A) as write:
        waited = [writes.defer(A, str(v), Lane.STATUS) for v in range(WAITING_AT_MOST + 2)]
        write.answered("0")
    assert waited == [True] * WAITING_AT_MOST + [False, False]  # the rest queued at once
    assert queued == [(A, Lane.STATUS)]


@given(
    st.lists(st.tuples(st.integers(1, 6), st.sampled_from(list(Lane))), max_size=WAITING_AT_MOST),
    st.one_of(st.none(), st.integers(1, 6)),
)
def test_every_event_during_a_write_is_its_echo_or_queued(
    came: list[tuple[int, Lane]], answer: int | None
) -> None:
    queued = _Queued()
    writes = OwnWrites(requeue=queued)
    with writes.writing(A) as write:
        for version, lane in came:
            assert writes.defer(A, str(version), lane)
        write.answered(None if answer is None else str(answer))
    others = [lane for version, lane in came if version != answer]
    assert queued == ([(A, min(others))] if others else [])
    echoed = any(version == answer for version, _lane in came)
    assert writes.is_echo(A, str(answer)) == (answer is not None and not echoed)
