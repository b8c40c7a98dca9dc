"""bench/controllermetrics.py: the controller's latency figures from its /metrics text."""

from __future__ import annotations

import math

import pytest
from bench.controllermetrics import figures, listening_url, quantile

from jobrelay.observe.metrics import Metrics


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0.5, 1.0), (0.25, 0.5), (1.0, 2.0), (0.75, 1.5)],
)
def test_quantiles_interpolate_within_a_bucket_like_promql(q: float, expected: float) -> None:
    # 2 observations up to 1 s, 2 more up to 2 s.
    assert quantile(q, [(1.0, 2.0), (2.0, 4.0), (math.inf, 4.0)]) == pytest.approx(expected)


def test_no_observations_give_no_quantile() -> None:
    assert math.isnan(quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]))
    assert math.isnan(quantile(0.5, []))


def test_beyond_the_last_bucket_is_its_bound() -> None:
    assert quantile(0.99, [(1.0, 1.0), (math.inf, 10.0)]) == 1.0


def test_figures_from_a_real_registry() -> None:
    metrics = Metrics()
    for seconds in (0.02, 0.03, 0.2, 0.4):
        metrics.dispatch_latency.observe(seconds)
    metrics.dispatched.labels("worker-1", "Job.v1.batch").inc(3)
    metrics.dispatched.labels("worker-2", "Job.v1.batch").inc()
    metrics.reconciled("Job.v1.batch", "done", 0.01)
    metrics.reconciled("JobSet.v1alpha2.jobset.x-k8s.io", "done", 0.01)
    found = figures(metrics.render().decode())
    dispatch = found["dispatch_ms"]
    assert dispatch["count"] == 4
    assert dispatch["mean"] == pytest.approx(162.5)
    assert 25 <= dispatch["p50"] <= 250
    assert found["status_copy_ms"]["count"] == 0 and math.isnan(found["status_copy_ms"]["p50"])
    assert found["reconcile_ms"]["count"] == 2  # summed over kinds
    assert found["counters"]["dispatched"] == 4


def test_the_listening_line_gives_the_url() -> None:
    entry = {"event": "metrics-listening", "addresses": ["127.0.0.1:40123"]}
    assert listening_url(entry) == "http://127.0.0.1:40123/metrics"
    assert listening_url({"event": "ready"}) is None
