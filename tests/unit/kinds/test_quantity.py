"""Kubernetes quantities read with bounded work: what Kubernetes accepts, what no
scheduler can count, and the time any of it takes."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.placement.units import to_units
from jobrelay.vocabulary.quantity import (
    INT64_MAX,
    MAX_LENGTH,
    QuantityError,
    Unusable,
    parse_quantity,
    read_quantity,
)

# Generous for a 2-core machine shared with others: a parse takes microseconds.
MILLISECOND = 0.001


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", Decimal(0)),
        ("-0", Decimal(0)),
        ("+1", Decimal(1)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("1.G", Decimal(10**9)),  # Kubernetes allows an empty fraction
        ("1E", Decimal(10**18)),  # the exa suffix
        ("1E3", Decimal(1000)),  # an exponent
        ("1e-3", Decimal("0.001")),
        ("1e+3", Decimal(1000)),
        ("0.1n", Decimal("1e-9")),  # rounded up to one nano-unit, as Kubernetes does
        ("1.0000000001", Decimal("1.000000001")),
        ("1e-999999", Decimal("1e-9")),  # tiny, not refused: Kubernetes makes it 1n
        ("-1e-999999", Decimal("-1e-9")),
        ("0." + "0" * 90 + "1", Decimal("1e-9")),
        ("9223372036854775807", Decimal(INT64_MAX)),
        ("8Ei", Decimal(INT64_MAX)),  # binary suffixes are capped, as Kubernetes does
        ("100Ei", Decimal(INT64_MAX)),
        ("-100Ei", Decimal(-INT64_MAX)),
        ("0" * 90 + "12", Decimal(12)),
        (2**63 - 1, Decimal(INT64_MAX)),
        (1e3, Decimal(1000)),
    ],
)
def test_what_kubernetes_accepts(text: str | int | float, value: Decimal) -> None:
    assert read_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1e999999", "larger than Kubernetes can count"),
        ("1e1000000", "larger than Kubernetes can count"),  # decimal.Overflow before
        ("1e4294967296", "larger than Kubernetes can count"),
        ("9223372036854775808", "larger than Kubernetes can count"),
        ("9.3e18", "larger than Kubernetes can count"),
        ("10E", "larger than Kubernetes can count"),
        ("9" * 100_000, "longer than 100 characters"),
        ("1" * (MAX_LENGTH + 1), "longer than 100 characters"),
        ("1Ei" * 1000, "longer than 100 characters"),
        ("1Ei1Ei", "not a Kubernetes quantity"),
        ("", "not a Kubernetes quantity"),
        (".", "not a Kubernetes quantity"),
        ("+", "not a Kubernetes quantity"),
        ("1.5.5", "not a Kubernetes quantity"),
        ("1e", "not a Kubernetes quantity"),
        ("1e1.5", "not a Kubernetes quantity"),
        ("1K", "not a Kubernetes quantity"),
        ("1GB", "not a Kubernetes quantity"),
        ("١٢", "not a Kubernetes quantity"),  # Unicode digits: Decimal takes them, Kubernetes not
        ("\uff11", "not a Kubernetes quantity"),
        ("NaN", "not a Kubernetes quantity"),
        ("Infinity", "not a Kubernetes quantity"),
        ("0x10", "not a Kubernetes quantity"),
        ("1_000", "not a Kubernetes quantity"),
        (float("inf"), "not a finite number"),
        (float("nan"), "not a finite number"),
        (1e300, "larger than Kubernetes can count"),
        (10**100, "larger than Kubernetes can count"),
        (2**63, "larger than Kubernetes can count"),
        (True, "not a quantity"),
        (None, "not a quantity"),
        ([1], "not a quantity"),
    ],
)
def test_what_is_refused_and_why(text: object, why: str) -> None:
    refused = read_quantity(text)
    assert isinstance(refused, Unusable) and why in str(refused)
    assert len(str(refused)) < 200  # the text is shortened in messages
    with pytest.raises(QuantityError, match=why) as raised:
        parse_quantity(text)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("resource", "text", "why"),
    [
        ("memory", "-1", "is negative"),
        ("cpu", "-500m", "is negative"),
        ("cpu", "9223372036854775807", "more than Kubernetes can count in milli-cpu"),
        ("memory", Decimal("1e999999"), "not a number Kubernetes can count"),
        ("memory", Decimal("NaN"), "not a number Kubernetes can count"),
    ],
)
def test_placement_units_refuse_what_kubernetes_cannot_count(
    resource: str, text: str | Decimal, why: str
) -> None:
    with pytest.raises(QuantityError, match=why):
        to_units(resource, text)


def test_units_at_the_bound() -> None:
    assert to_units("memory", "8Ei") == INT64_MAX
    assert to_units("cpu", "9223372036854775m") == 9223372036854775
    assert to_units("cpu", "1n") == 1  # a request never shrinks to nothing


WORST = ["1e999999", "1e1000000", "-1e-999999", "9" * 100_000, "1Ei" * 50_000, "1e" + "9" * 98]


@pytest.mark.parametrize("text", WORST, ids=lambda t: f"{t[:12]}...{len(t)}")
def test_the_worst_inputs_cost_microseconds(text: str) -> None:
    best = min(_seconds(lambda: read_quantity(text)) for _ in range(5))
    assert best < MILLISECOND
    best = min(_seconds(lambda: _to_units_or_none(text)) for _ in range(5))
    assert best < MILLISECOND


def _to_units_or_none(text: str) -> int | None:
    try:
        return to_units("memory", text)
    except QuantityError:
        return None


def _seconds(call: object) -> float:
    assert callable(call)
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


# -- properties -------------------------------------------------------------------------

digits = st.text(alphabet="0123456789", max_size=30)
suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
)
exponents = st.integers(-(10**7), 10**7).map(lambda e: f"e{e}")
quantity_text = st.builds(
    lambda sign, whole, fraction, suffix: f"{sign}{whole}{fraction}{suffix}",
    st.sampled_from(["", "+", "-"]),
    digits,
    st.one_of(st.just(""), digits.map(lambda d: "." + d)),
    suffixes | exponents,
)


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(
    st.one_of(quantity_text, st.text(max_size=40), st.from_regex(r"[0-9.eE+\-KMGTPimunk]{0,40}"))
)
def test_any_text_is_a_bounded_number_or_a_refusal_in_microseconds(text: str) -> None:
    value = read_quantity(text)
    # The best of three: a hang or a blow-up, not a pause of a busy machine.
    assert min(_seconds(lambda: read_quantity(text)) for _ in range(3)) < MILLISECOND
    if isinstance(value, Unusable):
        return
    assert value.is_finite() and abs(value) <= INT64_MAX
    # Whole nano-units, as Kubernetes keeps them.
    assert value == value.quantize(Decimal("1e-9"))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 10**18), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi"]))
def test_well_formed_quantities_read_exactly(number: int, suffix: str) -> None:
    factor = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    exact = number * factor[suffix]
    value = read_quantity(f"{number}{suffix}")
    if exact > INT64_MAX and suffix.endswith("i"):
        assert value == INT64_MAX
    elif exact > INT64_MAX:
        assert isinstance(value, Unusable)
    else:
        assert value == exact


@given(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi"]),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "M", "G"]),
)
def test_remembered_units_are_the_units_read_anew(resource: str, number: int, suffix: str) -> None:
    """A quantity string's units are remembered; the answer is the one read from its
    Decimal, every time, and a refusal is raised again each time it is asked."""
    text = f"{number}{suffix}"
    assert to_units(resource, text) == to_units(resource, parse_quantity(text))
    assert to_units(resource, text) == to_units(resource, parse_quantity(text))
    for _ in range(2):
        with pytest.raises(QuantityError, match="is negative"):
            to_units(resource, f"-{number + 1}{suffix}")
