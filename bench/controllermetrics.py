"""The controller's own latency figures, read from its ``/metrics`` (no log parsing).

``jobrelay run --metrics-address 127.0.0.1:0`` logs where it listens
(``"event": "metrics-listening"``); at the end of a run the bench scrapes it
once. Its histograms time what the bench cannot see from outside: from the
management Job seen by jobrelay's informer to its mirror created (the POST
answered), and from a mirror change seen to the manager's status written.
Quantiles are estimated from the buckets as PromQL's ``histogram_quantile`` does
(linear within a bucket), so they are as coarse as the buckets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import httpx2
from prometheus_client.parser import text_string_to_metric_families

Json = dict[str, Any]

# Histogram name -> the key the bench reports it under.
HISTOGRAMS = {
    "jobrelay_dispatch_latency_seconds": "dispatch_ms",
    "jobrelay_status_update_latency_seconds": "status_copy_ms",
    "jobrelay_reconcile_duration_seconds": "reconcile_ms",
}
COUNTERS = {
    "jobrelay_dispatched_total": "dispatched",
    "jobrelay_finished_total": "finished",
    "jobrelay_redispatched_total": "redispatched",
    "jobrelay_reconcile_errors_total": "reconcile_errors",
    "jobrelay_apiserver_requests_total": "apiserver_requests",
    "jobrelay_apiserver_request_errors_total": "apiserver_request_errors",
}


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """``histogram_quantile(q, ...)`` over cumulative ``(upper bound, count)`` buckets."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] == 0:
        return math.nan
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in ordered:
        if count >= rank:
            if math.isinf(upper):
                return lower  # beyond the last finite bucket: its bound is all we know
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return ordered[-1][0]


def figures(text: str) -> Json:
    """Counts and p50/p95/p99 (ms) of the latency histograms, and the counters' totals."""
    buckets: dict[str, dict[float, float]] = {name: {} for name in HISTOGRAMS}
    sums: dict[str, float] = dict.fromkeys(HISTOGRAMS, 0.0)
    totals: dict[str, float] = dict.fromkeys(COUNTERS.values(), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name.endswith("_bucket") and name[: -len("_bucket")] in buckets:
                bound = float(sample.labels["le"])
                series = buckets[name[: -len("_bucket")]]
                series[bound] = series.get(bound, 0.0) + sample.value  # summed over labels
            elif name.endswith("_sum") and name[: -len("_sum")] in sums:
                sums[name[: -len("_sum")]] += sample.value
            elif name in COUNTERS:
                totals[COUNTERS[name]] += sample.value
    out: Json = {"counters": totals}
    for name, key in HISTOGRAMS.items():
        series = sorted(buckets[name].items())
        count = series[-1][1] if series else 0.0
        out[key] = {
            "count": count,
            "mean": 1000 * sums[name] / count if count else math.nan,
            **{f"p{round(q * 100)}": 1000 * quantile(q, series) for q in (0.5, 0.95, 0.99)},
        }
    return out


async def scrape(url: str, timeout: float = 10.0) -> Json:
    async with httpx2.AsyncClient(timeout=timeout, trust_env=False) as http:
        answer = await http.get(url)
    answer.raise_for_status()
    return figures(answer.text)


def listening_url(entry: Mapping[str, Any]) -> str | None:
    """The /metrics URL a controller log entry announces, if it is that entry."""
    if entry.get("event") != "metrics-listening":
        return None
    addresses = entry.get("addresses") or ()
    return f"http://{addresses[0]}/metrics" if addresses else None
