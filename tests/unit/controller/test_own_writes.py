"""The versions this process wrote (controller/relay/own_writes.py): their watch events are
echoes, and no other event ever is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.controller.relay.own_writes import OwnWrites
from jobrelay.kinds.base import WorkloadKey

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
