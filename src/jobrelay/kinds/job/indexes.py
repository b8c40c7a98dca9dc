"""Index interval strings of Indexed Jobs (``completedIndexes``, ``failedIndexes``).

The apiserver stores sets of indexes as ``"1,3-5,7"``; these helpers parse,
combine and print them as sorted lists of inclusive ``(first, last)``
intervals, so that even a Job with 100 000 completions never becomes a set
of 100 000 integers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

Interval = tuple[int, int]

_NUMBER = re.compile(r"\d+")


def parse_indexes(text: str) -> list[Interval]:
    """Parse ``"x,y-z,…"``; raise ValueError unless items are well formed and strictly increasing.

    Adjacent items (``"1,2"``) are accepted as the apiserver accepts them; the
    result is in the order written, not merged.
    """
    if not text:
        return []
    intervals: list[Interval] = []
    for item in text.split(","):
        interval = _parse_item(item)
        if intervals and interval[0] <= intervals[-1][1]:
            raise ValueError(f"non-increasing order at {item!r}")
        intervals.append(interval)
    return intervals


def _parse_item(item: str) -> Interval:
    parts = item.split("-")
    if len(parts) > 2 or not all(_NUMBER.fullmatch(part) for part in parts):
        raise ValueError(f"malformed index interval {item!r}")
    first, last = int(parts[0]), int(parts[-1])
    if len(parts) == 2 and first >= last:
        raise ValueError(f"interval {item!r} is not increasing")
    return first, last


def format_indexes(intervals: Iterable[Interval]) -> str:
    """Print intervals the way the built-in Job controller does (``"x"`` or ``"x-y"``)."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in intervals)


def union(*interval_lists: list[Interval]) -> list[Interval]:
    """The sorted union, with overlapping and adjacent intervals merged."""
    merged: list[Interval] = []
    for first, last in sorted(i for intervals in interval_lists for i in intervals):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def below(intervals: list[Interval], limit: int) -> list[Interval]:
    """Only the indexes smaller than ``limit`` (an Indexed Job's ``completions``)."""
    return [(a, min(b, limit - 1)) for a, b in intervals if a < limit]


def difference(intervals: list[Interval], removed: list[Interval]) -> list[Interval]:
    """The indexes of ``intervals`` that are not in ``removed``; both sorted and disjoint."""
    result: list[Interval] = []
    j = 0
    for first, last in intervals:
        while j < len(removed) and removed[j][1] < first:
            j += 1
        start = first
        k = j
        while k < len(removed) and removed[k][0] <= last:
            if removed[k][0] > start:
                result.append((start, removed[k][0] - 1))
            start = max(start, removed[k][1] + 1)
            k += 1
        if start <= last:
            result.append((start, last))
    return result


def overlaps(a: list[Interval], b: list[Interval]) -> bool:
    """Whether some index is in both (inputs sorted and disjoint, as parse_indexes returns them)."""
    return count(difference(a, b)) != count(a)


def count(intervals: list[Interval]) -> int:
    """How many indexes the intervals hold."""
    return sum(last - first + 1 for first, last in intervals)
