"""Durations written as Go writes them (``time.ParseDuration``): ``20s``, ``1h30m``,
``1.5h``, ``300ms``, and ``0``. Pure.

Flags that Kubernetes tools spell as durations are spelled so here too, and told back
to the user the same way.
"""

from __future__ import annotations

import re

__all__ = ["go_duration_text", "parse_go_duration"]

_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
    "h": 3600.0,
}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
# A duration is at most this long as text (a longer one is refused, not parsed).
_MAX_TEXT = 64


def parse_go_duration(text: str) -> float:
    """Seconds in ``text``, a Go duration (a sequence of number-unit parts, ``0`` alone
    needing none); ValueError for anything else. Negative durations are refused."""
    stripped = text.strip()
    if len(stripped) > _MAX_TEXT:
        raise ValueError(
            f"a duration of more than {_MAX_TEXT} characters: {stripped[:_MAX_TEXT]!r}..."
        )
    if stripped in ("0", "+0"):
        return 0.0
    body = stripped[1:] if stripped.startswith("+") else stripped
    if not body or body.startswith("-"):
        raise ValueError(f"{text!r} is not a duration of 0 or more (e.g. 20s, 30m, 1h)")
    seconds, at = 0.0, 0
    for found in _PART.finditer(body):
        if found.start() != at:
            break
        seconds += float(found.group(1)) * _UNITS[found.group(2)]
        at = found.end()
    if at != len(body):
        raise ValueError(f"{text!r} is not a duration (e.g. 20s, 30m, 1h, 1h30m, or 0)")
    return seconds


def go_duration_text(seconds: float) -> str:
    """``seconds`` as a short Go duration: ``0s``, ``20s``, ``1h``, ``1h30m``, ``1.5s``."""
    if seconds <= 0:
        return "0s"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    units = ((hours, "h"), (minutes, "m"), (secs, "s"))
    return "".join(f"{value}{unit}" for value, unit in units if value)
