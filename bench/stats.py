"""Small statistics helpers: percentiles, medians, rates over time."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile (0..1) of already sorted values, linearly interpolated."""
    if not sorted_values:
        return math.nan
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = fraction * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(values: Iterable[float]) -> dict[str, float]:
    """count, min, p50, p95, p99, max and mean of ``values`` (NaN when there are none)."""
    ordered = sorted(values)
    return {
        "count": float(len(ordered)),
        "min": ordered[0] if ordered else math.nan,
        "p50": percentile(ordered, 0.50),
        "p95": percentile(ordered, 0.95),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1] if ordered else math.nan,
        "mean": statistics.fmean(ordered) if ordered else math.nan,
    }


def median(values: Iterable[float]) -> float:
    finite = [value for value in values if not math.isnan(value)]
    return statistics.median(finite) if finite else math.nan


def sustained_rate(times: Sequence[float], low: float = 0.1, high: float = 0.9) -> float:
    """Events per second between the ``low`` and ``high`` quantiles of their times.

    Leaves out the ramp-up and the tail, where a burst is not yet (or no
    longer) limited by the system under test.
    """
    ordered = sorted(times)
    if len(ordered) < 2:
        return math.nan
    first = round(low * (len(ordered) - 1))
    last = round(high * (len(ordered) - 1))
    span = ordered[last] - ordered[first]
    return (last - first) / span if span > 0 else math.nan


def per_second(times: Iterable[float], origin: float, width: float = 1.0) -> list[int]:
    """How many of ``times`` fall in each bin of ``width`` seconds from ``origin``."""
    offsets = [time - origin for time in times]
    if not offsets:
        return []
    bins = [0] * (max(0, math.floor(max(offsets) / width)) + 1)
    for offset in offsets:
        bins[max(0, math.floor(offset / width))] += 1
    return bins
