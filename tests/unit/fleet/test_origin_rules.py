"""Which origin a manager uses, and what its record must say: --origin, else the record,
else kube-system's UID (once, then recorded)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.fleet.origin_rules import (
    OriginRecordError,
    OriginWrite,
    origin_record_manifest,
    origin_record_name,
    recorded_origin,
    settled_origin,
)
from jobrelay.vocabulary.names import origin_problem


@pytest.mark.parametrize(
    ("explicit", "recorded", "derived", "origin", "write", "warns"),
    [
        # First start, no flag: kube-system's UID, recorded.
        ("", None, "uid-1", "uid-1", OriginWrite.CREATE, False),
        # Any later start, or a restored manager whose kube-system has another UID.
        ("", "uid-1", "uid-2", "uid-1", OriginWrite.NOTHING, False),
        ("", "uid-1", None, "uid-1", OriginWrite.NOTHING, False),
        # The chart's `origin` value: used, and recorded for the CLI.
        ("hq", None, None, "hq", OriginWrite.CREATE, False),
        ("hq", "hq", None, "hq", OriginWrite.NOTHING, False),
        # A flag naming another origin wins, and says what it leaves behind.
        ("hq", "uid-1", None, "hq", OriginWrite.REPLACE, True),
    ],
)
def test_the_flag_wins_then_the_record_then_kube_systems_uid(
    explicit: str, recorded: str | None, derived: str | None, origin: str,
    write: OriginWrite, warns: bool,
) -> None:  # fmt: skip
    settled = settled_origin(explicit, recorded, derived)
    assert (settled.origin, settled.write, settled.warning is not None) == (origin, write, warns)
    if warns:
        assert settled.warning is not None and recorded in settled.warning


def test_no_origin_at_all_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="no origin"):
        settled_origin("", None, None)


labels = st.from_regex(r"\A[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?\Z")


@given(explicit=st.one_of(st.just(""), labels), recorded=st.none() | labels, derived=labels)
def test_once_recorded_the_origin_never_follows_kube_system(
    explicit: str, recorded: str | None, derived: str
) -> None:
    first = settled_origin(explicit, recorded, derived)
    # The next start sees what this one recorded, and whatever kube-system's UID is then.
    again = settled_origin(explicit, first.origin, derived + "x")
    assert again.origin == first.origin and again.write is OriginWrite.NOTHING
    assert first.origin == (explicit or recorded or derived)


@pytest.mark.parametrize(
    ("config_map", "expected"),
    [
        (None, None),
        ({"metadata": {}}, None),
        ({"data": {}}, None),
        ({"data": {"origin": "uid-1"}}, "uid-1"),
        ({"data": {"origin": "not a label"}}, "not a label value"),
        ({"data": {"origin": ""}}, "not a label value"),
        ({"data": {"origin": 7}}, "int is not a string"),
    ],
)
def test_a_record_holds_an_origin_or_names_its_fix(
    config_map: dict[str, Any] | None, expected: str | None
) -> None:
    if expected is None or not expected.startswith(("not", "int")):
        assert recorded_origin(config_map, "ns/r") == expected
        return
    with pytest.raises(OriginRecordError, match=expected) as raised:
        recorded_origin(config_map, "ns/r")
    assert "ns/r" in str(raised.value) and "--origin" in str(raised.value)


def test_the_record_is_named_after_the_lease_and_holds_one_key() -> None:
    assert origin_record_name("jobrelay.dev/relay") == "jobrelay-relay-origin"
    assert origin_record_name("example.com/batch") == "example-batch-origin"
    manifest = origin_record_manifest("jobrelay-relay-origin", "ops", "uid-1")
    assert manifest["metadata"]["namespace"] == "ops" and manifest["data"] == {"origin": "uid-1"}
    assert recorded_origin(manifest, "ops/jobrelay-relay-origin") == "uid-1"
    assert origin_problem(manifest["data"]["origin"]) is None
