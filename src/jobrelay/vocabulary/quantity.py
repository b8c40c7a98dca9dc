"""Kubernetes quantities (``500m``, ``2Gi``, ``1e3``), read with bounded work. Pure.

Quantities come from tenants (pod templates) and from workers (Node allocatable, Pod
requests), so a hostile one must cost no more than a well-formed one. The text is
checked against Kubernetes' own grammar (resource.ParseQuantity: a sign, ASCII digits,
an optional fraction, then one suffix among the binary ``Ki``..``Ei``, the decimal
``n u m k M G T P E`` or an exponent ``e<int>``) and its size is worked out from the
digits and the exponent *before* any number is built: nothing beyond what Kubernetes
can count (a signed 64-bit integer of base units) is ever turned into a Decimal or an
int. A refusal is a value (:class:`Unusable`) or, for callers that want an exception,
:class:`QuantityError`, a ValueError; never an ArithmeticError.

Kubernetes' own rules, kept: values round up (away from zero) to whole nano-units;
binary-suffixed values are capped at the int64 maximum. Ours, stricter: a decimal value
beyond the int64 maximum is refused (the apiserver stores ``1e999999`` for a Job, but no
scheduler can count it), and so is text longer than :data:`MAX_LENGTH` characters.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import (
    ROUND_UP,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    Underflow,
)

INT64_MAX = 2**63 - 1
# Longer than any quantity a person writes (the int64 maximum has 19 digits); bounds the
# cost of everything below.
MAX_LENGTH = 100

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# [0-9], not \d: Python's \d (and Decimal) take any Unicode digit; Kubernetes does not.
_GRAMMAR = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?"
)
_NANO = Decimal("1e-9")
# Exact for every value that passes the size checks (<= MAX_LENGTH digits, |exp| <= 30).
_EXACT = Context(
    prec=2 * MAX_LENGTH,
    Emax=10_000,
    Emin=-10_000,
    traps=[InvalidOperation, DivisionByZero, Overflow, Underflow, Inexact],
)
_ROUNDING_UP = Context(
    prec=2 * MAX_LENGTH, rounding=ROUND_UP, Emax=10_000, Emin=-10_000, traps=[InvalidOperation]
)
_SPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Unusable:
    """Why a quantity cannot be used, in words for the user (with the text, shortened)."""

    text: str
    why: str

    def __str__(self) -> str:
        return f"{shown(self.text)} {self.why}"


class QuantityError(ValueError):
    """An unusable quantity, and where it was read (``container 'main', memory``)."""

    def __init__(self, unusable: Unusable, where: str = "") -> None:
        super().__init__(f"{where}: {unusable}" if where else str(unusable))
        self.unusable = unusable
        self.where = where

    def within(self, outer: str) -> QuantityError:
        """The same refusal, its place named from further out (``pod template 'w'``)."""
        return QuantityError(self.unusable, f"{outer}, {self.where}" if self.where else outer)


def shown(text: str, limit: int = 40) -> str:
    """The text quoted for a message, shortened past ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _too_large(text: str) -> Unusable:
    return Unusable(text, f"is larger than Kubernetes can count (at most {INT64_MAX}, about 8Ei)")


def read_quantity(raw: object) -> Decimal | Unusable:
    """A quantity as the API writes it (a string, or a JSON number) as a Decimal, or why
    it cannot be used. Costs microseconds whatever the input."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return Unusable(type(raw).__name__, "is not a quantity (a string such as 500m or 2Gi)")
    if isinstance(raw, int):
        # bit_length, not str(): a huge int is never written out in digits.
        return (
            Decimal(raw)
            if raw.bit_length() <= 63
            else _too_large(f"{raw.bit_length()}-bit integer")
        )
    if isinstance(raw, float):
        if not math.isfinite(raw):
            return Unusable(repr(raw), "is not a finite number")
        raw = repr(raw)
    if len(raw) > MAX_LENGTH:
        return Unusable(raw, f"is longer than {MAX_LENGTH} characters")
    return _read_text(raw)


# The same few texts ("10m", "16Mi") come with every pod event: each is parsed once.
# Bounded: at most this many texts of at most MAX_LENGTH characters, whoever writes them.
@functools.lru_cache(maxsize=4096)
def _read_text(raw: str) -> Decimal | Unusable:
    try:
        return _parse(raw.strip(_SPACE), raw)
    except (ArithmeticError, ValueError):  # pragma: no cover - the checks above prevent it
        return Unusable(raw, "is not a number Kubernetes can use")


def _parse(text: str, raw: str) -> Decimal | Unusable:
    match = _GRAMMAR.fullmatch(text)
    if match is None or not (match["whole"] or match["fraction"]):
        return Unusable(raw, "is not a Kubernetes quantity (such as 500m, 2Gi or 1e3)")
    whole, fraction = match["whole"], match["fraction"] or ""
    suffix, exponent_text = match["suffix"] or "", match["exponent"]
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Decimal(0)
    binary = _BINARY_SUFFIXES.get(suffix)
    # The power of ten of the leading digit, without building the number.
    significant = whole.lstrip("0")
    lead = len(significant) - 1 if significant else -(len(fraction) - len(fraction.lstrip("0")) + 1)
    # The exponent has at most MAX_LENGTH digits: int() of it is cheap.
    exponent = _DECIMAL_SUFFIXES.get(suffix, 0) if exponent_text is None else int(exponent_text)
    # 2**60 < 10**19: a binary suffix adds at most 19 to the power of ten.
    magnitude = lead + (19 if binary is not None else exponent)
    if magnitude >= 19 and binary is None:
        return _too_large(raw)
    negative = match["sign"] == "-"
    if magnitude < -9:
        # Below one nano-unit: Kubernetes rounds it up (away from zero) to one.
        return -_NANO if negative else _NANO
    number = Decimal(f"{match['sign']}{whole or '0'}{'.' + fraction if fraction else ''}")
    if binary is not None:
        value = _EXACT.multiply(number, Decimal(2**binary))
        if abs(value) > INT64_MAX:
            # As Kubernetes does for binary suffixes: capped, not refused.
            value = Decimal(-INT64_MAX if negative else INT64_MAX)
    else:
        value = _EXACT.scaleb(number, exponent)
        if abs(value) > INT64_MAX:
            return _too_large(raw)
    return _round_to_nano(value)


def _round_to_nano(value: Decimal) -> Decimal:
    """Up (away from zero) to whole nano-units, as Kubernetes does."""
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= -9:
        return value
    return value.quantize(_NANO, context=_ROUNDING_UP)


def parse_quantity(raw: object) -> Decimal:
    """A quantity as a Decimal; :class:`QuantityError` (a ValueError) if unusable."""
    value = read_quantity(raw)
    if isinstance(value, Unusable):
        raise QuantityError(value)
    return value
