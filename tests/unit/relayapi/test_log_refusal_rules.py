"""A worker's refusal inside a log stream: the API's line, and `jobrelay logs` taking it out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.relayapi.log_refusal_rules import (
    MAX_REFUSALS_KEPT,
    PodRefusal,
    RefusalFilter,
    pod_refusal_line,
)


def _filtered(chunks: list[bytes]) -> tuple[bytes, list[PodRefusal]]:
    refusals = RefusalFilter()
    out = b"".join(refusals.feed(chunk) for chunk in chunks) + refusals.flush()
    return out, refusals.refusals


@pytest.mark.parametrize(
    ("stream", "printed", "refused"),
    [
        (b"a\nb\n", b"a\nb\n", []),
        (b"a\n" + pod_refusal_line("p-1", "Forbidden"), b"a\n", [PodRefusal("p-1", "Forbidden")]),
        # --all-pods: each pod's lines, its refusal too, after its prefix.
        (b"[pod/p-0] hi\n[pod/p-1] [jobrelay: pod p-1: Forbidden]\n", b"[pod/p-0] hi\n",
         [PodRefusal("p-1", "Forbidden")]),
        (b'[jobrelay: pod p: pods "p" not found]', b"", [PodRefusal("p", 'pods "p" not found')]),
        # The API's other lines are output, not errors.
        (b"x\n[jobrelay: no output for 300 s; stopped following]\n",
         b"x\n[jobrelay: no output for 300 s; stopped following]\n", []),
        (b"[jobrelay: output cut at the byte limit; use --tail or --since]\n",
         b"[jobrelay: output cut at the byte limit; use --tail or --since]\n", []),
        # Log lines that merely look alike.
        (b"[info] [jobrelay: pod x: y]\n", b"[info] [jobrelay: pod x: y]\n", []),
        (b"say [jobrelay: pod x: y]\n", b"say [jobrelay: pod x: y]\n", []),
        (b"[", b"[", []),
        (b"no newline at the end", b"no newline at the end", []),
    ],
)  # fmt: skip
def test_refusal_lines_are_taken_out(
    stream: bytes, printed: bytes, refused: list[PodRefusal]
) -> None:
    assert _filtered([stream]) == (printed, refused)


def test_output_that_cannot_be_a_refusal_passes_at_once() -> None:
    refusals = RefusalFilter()
    assert refusals.feed(b"progress 10%") == b"progress 10%"
    assert refusals.feed(b" 20%") == b" 20%"
    assert refusals.feed(b"\n[jobrelay: pod") == b"\n"
    assert refusals.feed(b" p: Forbidden]\nnext") == b"next"
    assert refusals.refusals == [PodRefusal("p", "Forbidden")]


def test_a_long_line_starting_with_a_bracket_is_not_held_for_ever() -> None:
    refusals = RefusalFilter()
    out = refusals.feed(b"[" + b"x" * 5000) + refusals.feed(b"y\n")
    assert out == b"[" + b"x" * 5000 + b"y\n" and refusals.refusals == []


_LINES = st.one_of(
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"[pod/a] hello", b"[x]", b"[", b"]", b"[jobrelay: pod"]),
    st.builds(lambda pod, why: pod_refusal_line(pod, why)[:-1],
              st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
              st.sampled_from(["Forbidden", "InternalError", 'pods "p" not found'])),
)  # fmt: skip


@given(st.lists(_LINES, max_size=12), st.lists(st.integers(1, 40), max_size=20))
def test_however_the_stream_is_cut_the_result_is_the_same(
    lines: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    whole = _filtered([stream])
    chunks, at = [], 0
    for size in cuts:
        chunks.append(stream[at : at + size])
        at += size
    chunks.append(stream[at:])
    assert _filtered(chunks) == whole
    # Nothing but the refusal lines is ever dropped.
    kept = [line for line in lines if _filtered([line + b"\n"])[1] == []]
    assert whole[0] == b"".join(line + b"\n" for line in kept)


def test_lines_that_look_like_refusals_do_not_grow_the_reader_without_bound() -> None:
    # A pod's own output may print refusal-shaped lines: kept up to a bound, then counted.
    stream = RefusalFilter()
    lines = b"".join(pod_refusal_line(f"p{i}", "Forbidden") for i in range(200))
    assert stream.feed(lines) == b""
    assert len(stream.refusals) == MAX_REFUSALS_KEPT
    assert stream.refusals_dropped == 200 - MAX_REFUSALS_KEPT
