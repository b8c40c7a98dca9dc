"""bench/panel_viewers.py's verdict: medians over the rounds, against the 10 % target."""

from __future__ import annotations

from typing import Any

from bench.panel_viewers import render, summary


def window(round_: int, viewers: int, cpu: float, rss: float) -> dict[str, Any]:
    return {"round": round_, "viewers": viewers, "cpu_mean_pct": cpu, "cpu_max_pct": cpu * 2,
            "rss_mean_mib": rss, "events_per_viewer_per_s": 1.0}  # fmt: skip


def result(*windows: dict[str, Any]) -> dict[str, Any]:
    return {"windows": list(windows), "joins": [], "started_utc": "2026-11-28 07:00 UTC",
            "held": 5000}  # fmt: skip


OPTIONS = {"workloads": 5000, "churn": 2.0, "viewers": 10, "rounds": 3, "window": 40.0,
           "warmup": 5.0}  # fmt: skip


def test_medians_decide_and_one_noisy_round_does_not() -> None:
    found = result(
        window(0, 0, 20.0, 300), window(0, 10, 21.0, 305),
        window(1, 0, 22.0, 300), window(1, 10, 40.0, 306),  # one noisy round
        window(2, 0, 21.0, 301), window(2, 10, 22.5, 307),
    )  # fmt: skip
    verdict = summary(found, 10)
    assert verdict["cpu_no_viewer_pct"] == 21.0 and verdict["cpu_viewers_pct"] == 22.5
    assert round(verdict["cpu_change_pct"], 1) == 7.1 and verdict["passed"]
    found["summary"] = verdict
    assert "**PASS**" in render(found, OPTIONS)


def test_over_the_target_fails() -> None:
    found = result(window(0, 0, 20.0, 300), window(0, 10, 23.0, 300))
    verdict = summary(found, 10)
    assert not verdict["passed"]
    found["summary"] = verdict
    assert "**FAIL**" in render(found, OPTIONS)
