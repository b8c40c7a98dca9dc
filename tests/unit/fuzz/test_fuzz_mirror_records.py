"""``jobrelay.dev/mirrors`` on a management object may have been written by anyone (without
the admission policy): reading it never raises, keeps only well-formed entries, and what
jobrelay writes reads back the same."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from tests.unit.fuzz.hostile import HUGE_TEXT, anything, counted, fuzz, odd_text

from jobrelay.vocabulary.names import MIRRORS_ANNOTATION
from jobrelay.vocabulary.placement import (
    RecordedMirror,
    mirror_records,
    with_recorded_mirror,
    without_records_from,
)

_ENTRY_PARTS = st.from_regex(r"[0-9a-z:,\- ²٣]{0,40}", fullmatch=True)


@fuzz(600)
@given(st.one_of(odd_text, _ENTRY_PARTS, HUGE_TEXT, anything))
@example("1:w1:u," * 20_000)
@example("99999999999999999999:w1:u")
@example("²:w1:u,٣:w1:u,0:w1:u,-1:w1:u,1::u,1:w1:,1:w1:u:v")
@counted
def test_reading_any_mirrors_annotation_never_raises(value: Any) -> None:
    obj: Any = {"metadata": {"annotations": {MIRRORS_ANNOTATION: value}}}
    records = mirror_records(obj)
    for run, recorded in records.items():
        assert isinstance(run, int) and 1 <= run <= 100_000
        assert recorded.cluster and recorded.uid and ":" not in recorded.uid
    again = with_recorded_mirror(obj, 2, "w1", "uid-2")
    assert mirror_records({"metadata": {"annotations": again}})[2] == RecordedMirror("w1", "uid-2")
    forgotten = without_records_from(obj, 1)
    assert forgotten == {MIRRORS_ANNOTATION: None}


_CLUSTERS = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
_UIDS = st.uuids().map(str)


@fuzz(300)
@given(st.dictionaries(st.integers(1, 50), st.tuples(_CLUSTERS, _UIDS), max_size=6))
@counted
def test_what_jobrelay_records_reads_back(entries: dict[int, tuple[str, str]]) -> None:
    obj: Any = {"metadata": {}}
    for run in sorted(entries):
        obj = {"metadata": {"annotations": with_recorded_mirror(obj, run, *entries[run])}}
    assert mirror_records(obj) == {run: RecordedMirror(*entry) for run, entry in entries.items()}
