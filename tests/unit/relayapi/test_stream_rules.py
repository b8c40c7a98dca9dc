"""The bounds of the logs API's streams: the line splitter, a follow's rate, the stream count."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jobrelay.relayapi.stream_rules import (
    CONTINUED,
    LineSplitter,
    RateBudget,
    StreamBudget,
    StreamClaim,
)

P = b"[pod/p] "


def split(chunks: list[bytes], limit: int = 8) -> bytes:
    splitter = LineSplitter(P, limit)
    return b"".join(splitter.feed(chunk) for chunk in chunks) + splitter.flush()


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b"a\nb\n"], P + b"a\n" + P + b"b\n"),
        ([b"a", b"b", b"\nc"], P + b"ab\n" + P + b"c\n"),  # the last line gets its newline
        ([b"\n\n"], P + b"\n" + P + b"\n"),
        ([b""], b""),
        ([b"0123456789"], P + b"01234567" + CONTINUED + P + b"89\n"),
        ([b"0123", b"4567", b"89\n"], P + b"01234567" + CONTINUED + P + b"89\n"),
        ([b"01234567\n"], P + b"01234567\n"),  # a whole line of the limit is not cut
        # A whole longer line inside one chunk is cut too; its last piece may be the limit.
        ([b"0123456789\n"], P + b"01234567" + CONTINUED + P + b"89\n"),
        ([b"0123456789abcdef\nz\n"], P + b"01234567" + CONTINUED + P + b"89abcdef\n" + P + b"z\n"),
    ],
)
def test_lines_are_prefixed_and_long_ones_cut(chunks: list[bytes], expected: bytes) -> None:
    assert split(chunks) == expected


def reassemble(output: bytes) -> bytes:
    """The input again, from the splitter's output: cut pieces joined, prefixes dropped."""
    text = b""
    for line in output.split(b"\n")[:-1]:
        assert line.startswith(P)
        piece = line[len(P) :] + b"\n"
        text += piece[: -len(CONTINUED)] if piece.endswith(CONTINUED) else piece
    return text


@given(
    st.lists(st.binary(max_size=40) | st.sampled_from([b"\n", b"abc\n", b"x" * 30])),
    st.integers(1, 20),
)
# A whole line longer than the limit inside one chunk (it was passed on uncut).
@example([b"\x00" * 30 + b"\n"], 1)
@example([b"ab", b"cdef\nxy\n"], 2)
def test_output_lines_reassemble_the_input(chunks: list[bytes], limit: int) -> None:
    data = b"".join(chunks)
    if CONTINUED.rstrip(b"\n") in data:
        return  # a line that itself ends like a cut one is ambiguous by design
    splitter = LineSplitter(P, limit)
    output = b""
    for chunk in chunks:
        output += splitter.feed(chunk)
        assert splitter.pending < limit  # never more held back than one piece
    flushed = splitter.flush()
    output += flushed
    # Only a partial last line gets a newline (one cut exactly at its end needs none).
    assert reassemble(output) == data + (b"\n" if flushed else b"")
    # Every output line is at most the limit (plus the prefix and the marker).
    assert all(len(line) <= len(P) + limit + len(CONTINUED) for line in output.split(b"\n"))


def test_a_line_without_end_costs_linear_time_and_bounded_memory() -> None:
    """50 MB without a newline, in 4 KiB chunks: the old splitter copied the whole pending
    line per chunk (12 800 copies of up to 50 MB) and held all of it."""
    chunk = b"x" * 4096
    chunks = 50 * 1024 * 1024 // len(chunk)
    splitter = LineSplitter(P)
    tracemalloc.start()
    started = time.process_time()
    try:
        out = 0
        for _ in range(chunks):
            out += len(splitter.feed(chunk))
            assert splitter.pending < splitter.limit
        out += len(splitter.flush())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.process_time() - started
    assert out >= chunks * len(chunk)
    assert peak < 1024 * 1024, f"peak {peak} bytes for a 64 KiB limit"
    # Linear: a few hundred ms even under tracemalloc; the quadratic one took minutes.
    assert elapsed < 20, f"{elapsed:.1f} s of CPU"


@pytest.mark.parametrize(
    ("steps", "waits"),
    [
        # rate 100/s, burst 100: the burst passes, then each byte waits its turn.
        ([(0.0, 100), (0.0, 50)], [0.0, 0.5]),
        ([(0.0, 100), (1.0, 100)], [0.0, 0.0]),  # refilled after a second
        ([(0.0, 100), (10.0, 100), (10.0, 10)], [0.0, 0.0, 0.1]),  # never above the burst
        ([(0.0, 300)], [2.0]),  # a chunk above the burst waits for what it lacks
    ],
)
def test_rate_budget(steps: list[tuple[float, int]], waits: list[float]) -> None:
    budget = RateBudget(rate=100.0, burst=100.0)
    assert [budget.wait(now, size) for now, size in steps] == pytest.approx(waits)


def test_stream_budget_counts_pod_streams_per_user_worker_and_overall() -> None:
    budget = StreamBudget(per_user=10, per_worker=12, overall=15)
    first = budget.claim("alice", "w1", 7)
    assert first == StreamClaim("alice", "w1", 7)
    # alice has 7 of her 10: a 60-pod --all-pods is more than one request may hold at all.
    assert "needs 61 log streams" in str(budget.claim("alice", "w1", 61))
    assert "at most 10 log streams per user" in str(budget.claim("alice", "w2", 4))
    second = budget.claim("bob", "w1", 5)
    assert isinstance(second, StreamClaim)
    assert 'from worker "w1"' in str(budget.claim("carol", "w1", 1))
    third = budget.claim("carol", "w2", 3)
    assert isinstance(third, StreamClaim)
    assert "at most 15 log streams at once" in str(budget.claim("dave", "w2", 1))
    assert (budget.open(user="alice"), budget.open(worker="w1"), budget.open()) == (7, 12, 15)
    budget.release(first)
    assert (budget.open(user="alice"), budget.open(worker="w1"), budget.open()) == (0, 5, 8)
    assert isinstance(budget.claim("alice", "w2", 4), StreamClaim)
    for claim in (second, third):
        budget.release(claim)
    assert (budget.open(user="bob"), budget.open(worker="w1"), budget.open()) == (0, 0, 4)


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xy"), st.integers(1, 6))))
def test_stream_budget_never_exceeds_and_returns_to_zero(
    requests: list[tuple[str, str, int]],
) -> None:
    budget = StreamBudget(per_user=8, per_worker=10, overall=14)
    held = []
    for user, worker, streams in requests:
        claim = budget.claim(user, worker, streams)
        if isinstance(claim, StreamClaim):
            held.append(claim)
        assert budget.open() <= 14
        assert all(budget.open(user=u) <= 8 for u in "abc")
        assert all(budget.open(worker=w) <= 10 for w in "xy")
    for claim in held:
        budget.release(claim)
    assert budget.open() == 0 and budget.open(user="a") == 0 and budget.open(worker="x") == 0
