from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from bench import plot
from bench.fair_share import render_markdown, running_cpu, slim_pod
from bench.fair_share_rules import Sample, every, saturated, share_series, summarize, targets
from hypothesis import given
from hypothesis import strategies as st

WEIGHTS = {"a": 1.0, "b": 1.0, "c": 2.0}
WAITING = {"a": 5, "b": 5, "c": 5}


def _sample(at: float, a: float, b: float, c: float, pending: dict[str, int] = WAITING) -> Sample:
    return Sample(at, {"a": a, "b": b, "c": c}, pending)


def test_targets_are_the_weights_normalised() -> None:
    assert targets(WEIGHTS) == {"a": 0.25, "b": 0.25, "c": 0.5}


@pytest.mark.parametrize(
    ("samples", "window"),
    [
        # the ramp-up is left out: the window starts once 90 % of the fleet runs
        ([_sample(0, 0, 0, 0), _sample(1, 4, 4, 8), _sample(2, 8, 8, 16)], [2]),
        ([_sample(0, 7, 7, 15), _sample(1, 8, 8, 13)], [0, 1]),  # 29 of 32 is full enough
        # it ends at the first sample where a queue waits for nothing
        (
            [
                _sample(0, 8, 8, 16),
                _sample(1, 8, 8, 16),
                _sample(2, 8, 8, 16, {"a": 3, "b": 3, "c": 0}),
                _sample(3, 8, 8, 16),
            ],
            [0, 1],
        ),
        # a queue dry before the fleet ever fills: no saturated period at all
        ([_sample(0, 1, 1, 1, {"a": 0, "b": 1, "c": 1}), _sample(1, 8, 8, 16)], []),
        ([_sample(0, 2, 2, 2), _sample(1, 3, 3, 3)], []),  # never full
    ],
)
def test_the_saturated_window(samples: list[Sample], window: list[float]) -> None:
    assert [s.at for s in saturated(samples, 32)] == window


def test_shares_are_cpu_seconds_over_the_window_against_the_targets() -> None:
    samples = [_sample(0, 0, 0, 0), _sample(1, 8, 8, 16), _sample(2, 10, 6, 16),
               _sample(3, 8, 8, 16, {"a": 1, "b": 0, "c": 9})]  # fmt: skip
    summary = summarize(samples, WEIGHTS, 32)
    assert (summary.start, summary.end, summary.samples) == (1, 2, 2)
    assert summary.shares == {"a": 18 / 64, "b": 14 / 64, "c": 0.5}
    assert summary.deviation_pp["a"] == pytest.approx(3.125)
    assert summary.deviation_pp["b"] == pytest.approx(-3.125)
    assert summary.max_deviation_pp == pytest.approx(3.125)
    assert summary.utilization == pytest.approx(1.0)
    assert summary.passed


def test_a_queue_more_than_five_points_off_fails() -> None:
    summary = summarize([_sample(0, 6, 6, 20)], WEIGHTS, 32)
    assert summary.shares["c"] == pytest.approx(0.625)
    assert summary.max_deviation_pp == pytest.approx(12.5)
    assert not summary.passed


def test_no_saturated_period_fails_and_says_so() -> None:
    summary = summarize([_sample(0, 1, 1, 1)], WEIGHTS, 32)
    assert summary.start is None and summary.samples == 0 and not summary.passed
    assert math.isinf(summary.max_deviation_pp)


def test_a_queue_missing_from_a_sample_runs_nothing() -> None:
    summary = summarize([Sample(0, {"a": 16, "b": 16}, WAITING)], WEIGHTS, 32)
    assert summary.shares == {"a": 0.5, "b": 0.5, "c": 0.0}
    assert summary.deviation_pp["c"] == pytest.approx(-50.0)


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 8), min_size=1),
    st.lists(st.integers(1, 20), min_size=1, max_size=30),
)
def test_running_in_proportion_to_the_weights_is_exactly_fair(
    weights: dict[str, int], scales: list[int]
) -> None:
    fleet = max(scales) * sum(weights.values())
    samples = [
        Sample(index, {q: float(w * k) for q, w in weights.items()}, dict.fromkeys(weights, 1))
        for index, k in enumerate(sorted(scales, reverse=True))  # full first, then draining
    ]
    summary = summarize(samples, {q: float(w) for q, w in weights.items()}, fleet)
    assert summary.samples >= 1
    assert sum(summary.shares.values()) == pytest.approx(1.0)
    assert summary.max_deviation_pp == pytest.approx(0.0, abs=1e-9)
    assert summary.passed


@given(st.lists(st.tuples(*[st.integers(0, 32)] * 3), min_size=1, max_size=40))
def test_shares_always_sum_to_one_when_anything_ran(rows: list[tuple[int, int, int]]) -> None:
    samples = [_sample(i, a, b, c) for i, (a, b, c) in enumerate(rows)]
    summary = summarize(samples, WEIGHTS, 1)  # a fleet of 1: any running sample is full
    if summary.samples:
        assert sum(summary.shares.values()) == pytest.approx(1.0)
        assert summary.passed == (summary.max_deviation_pp <= 5.0)
    for index, shares in enumerate(zip(*share_series(samples, "abc").values(), strict=True)):
        assert sum(shares) == pytest.approx(1.0 if sum(rows[index]) else 0.0)


def test_every_keeps_one_sample_per_step() -> None:
    samples = [_sample(t, 0, 0, 0) for t in (0, 0.9, 2.1, 9.9, 10.2, 19.0, 20.5)]
    assert [s.at for s in every(samples, 10)] == [0, 10.2, 20.5]


def _pod(namespace: str, phase: str, cpu: str = "1", deleting: bool = False) -> dict[str, object]:
    metadata: dict[str, object] = {"name": "p", "namespace": namespace, "resourceVersion": "1"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"containers": [{"resources": {"requests": {"cpu": cpu}}},
                                {"resources": {}}]},
        "status": {"phase": phase},
    }  # fmt: skip


def test_running_cpu_counts_running_pods_by_their_namespaces_queue() -> None:
    pods = [slim_pod(p) for p in (
        _pod("ns-a", "Running"), _pod("ns-a", "Running", "500m"), _pod("ns-a", "Pending"),
        _pod("ns-c", "Running", "2"), _pod("ns-c", "Running", deleting=True),
        _pod("ns-c", "Succeeded"), _pod("elsewhere", "Running"),
    )]  # fmt: skip
    queue_of = {"ns-a": "a", "ns-b": "b", "ns-c": "c"}
    assert running_cpu(pods, queue_of) == {"a": 1.5, "b": 0.0, "c": 2.0}


def _result() -> dict[str, object]:
    samples = [_sample(0, 0, 0, 0), _sample(1, 8, 8, 16), _sample(2, 9, 7, 16),
               _sample(12, 16, 16, 0, {"a": 2, "b": 2, "c": 0})]  # fmt: skip
    return {
        "started_utc": "2026-11-26 19:00 UTC",
        "command": "python -m bench fairshare",
        "machine": {"nproc": 2, "jobrelay_commit": "abc"},
        "fleet": {"workers": ["worker-1", "worker-2"], "shape": "2 nodes x 8 CPU"},
        "scenario": {
            "params": {"jobs_per_queue": 3, "seed": 1, "weights": WEIGHTS, "pod": "1 CPU"},
            "capacity_cpu": 32.0,
            "samples": [asdict(s) for s in samples],
            "summary": asdict(summarize(samples, WEIGHTS, 32)),
            "complete": True,
            "seconds_to_all_finished": 40.0,
        },
    }


def test_the_report_prints_the_series_the_shares_and_the_verdict() -> None:
    markdown = render_markdown(_result())
    assert "| 0 | 0 | 0 | 0 | 0 | 0 % | 0 % | 0 % | 5 | 5 | 5 |" in markdown
    assert "| 12 | 16 | 16 | 0 | 32 | 50 % | 50 % | 0 % | 2 | 2 | 0 |" in markdown
    assert "| a | 1 | 25.0 % | 26.6 % | +1.6 pp |" in markdown
    assert "**PASS**: max deviation 1.6 pp" in markdown


def test_the_plot_is_written(tmp_path: Path) -> None:
    path = tmp_path / "shares.png"
    assert plot.plot_shares(_result(), path) == f"plot written to {path}"
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_python_m_bench_fairshare_is_its_own_command() -> None:
    repo = Path(__file__).parents[2]
    own = subprocess.run([sys.executable, "-m", "bench", "fairshare", "--help"], cwd=repo,
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert own.returncode == 0, own.stderr
    assert "Usage: python -m bench fairshare" in own.stdout and "--jobs-per-queue" in own.stdout
    others = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=repo,
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert others.returncode == 0 and "python -m bench fairshare" in others.stdout
