"""The pure parts of ``python -m bench.many_workers``: the fit, the projection, the
limits, the /proc and /metrics readings, and the check that no Job ran twice."""

from __future__ import annotations

import math

import pytest
from bench import worker_model
from bench.many_workers import _sizes
from bench.worker_model import Line, fit_line, run_twice_problems
from hypothesis import given
from hypothesis import strategies as st


def test_a_least_squares_line_through_exact_points_is_that_line() -> None:
    line = fit_line([(1, 100.0), (8, 107.0), (32, 131.0)])
    assert line.base == pytest.approx(99.0) and line.per_worker == pytest.approx(1.0)
    assert line.at(1000) == pytest.approx(1099.0)


@pytest.mark.parametrize(
    ("points", "base", "per_worker"),
    [
        ([], math.nan, math.nan),
        ([(8, 5.0)], 5.0, 0.0),
        ([(8, 5.0), (8, 7.0)], 6.0, 0.0),
        ([(1, 2.0), (8, math.nan), (32, 33.0)], 1.0, 1.0),
    ],
)
def test_degenerate_fits(points: list[tuple[float, float]], base: float, per_worker: float) -> None:
    line = fit_line(points)
    assert line.base == pytest.approx(base, nan_ok=True)
    assert line.per_worker == pytest.approx(per_worker, nan_ok=True)


@given(
    st.floats(-1e3, 1e3),
    st.floats(-1e2, 1e2),
    st.lists(st.integers(1, 2000), min_size=2, max_size=6, unique=True),
)
def test_the_fit_recovers_any_line(base: float, slope: float, xs: list[int]) -> None:
    line = fit_line([(x, base + slope * x) for x in xs])
    assert line.per_worker == pytest.approx(slope, abs=1e-6)
    assert line.base == pytest.approx(base, abs=1e-5)


def test_where_a_line_reaches_a_limit() -> None:
    assert Line(100, 2).reaches(640) == 270
    assert Line(700, 2).reaches(640) == 0  # met already
    assert Line(100, 0).reaches(640) == math.inf  # never
    assert Line(100, -1).reaches(640) == math.inf


def _size(workers: int, rss: float, cpu: float) -> dict[str, object]:
    idle = {"controller_rss_mib": rss, "controller_cpu_pct": cpu, "connections": 10 * workers,
            "watches": 9.0 * workers, "requests_per_min": 12.0 * workers}  # fmt: skip
    return {"workers": workers, "idle": idle}


def test_the_model_projects_the_fitted_cost_and_orders_the_limits() -> None:
    sizes = [_size(1, 81, 0.2), _size(8, 88, 0.9), _size(32, 112, 3.3)]
    model = worker_model.model(sizes, held_kib=2.0, open_files=1024, inotify=512)
    rows = {row["workers"]: row for row in model["rows"]}
    assert set(rows) == {1, 8, 32, 100, 1000}
    assert rows[1000]["controller_rss_mib"] == pytest.approx(1080)
    assert rows[1000]["controller_cpu_pct"] == pytest.approx(100.1)
    assert rows[1000]["connections"] == pytest.approx(10_000)
    # A million held at 2 KiB: 1,953 MiB more.
    assert rows[100]["controller_rss_held_mib"] == pytest.approx(180 + 1_000_000 * 2 / 1024)
    names = [item["limit"].split(" (")[0] for item in model["limits"]]
    assert names == [
        "the chart's memory limit with 1,000,000 workloads held",
        "open files",
        "inotify instances of this machine",
        "the chart's memory limit",
        "one core of idle CPU",
    ]
    assert [round(item["workers"]) for item in model["limits"]] == [0, 102, 167, 560, 999]
    text = worker_model.render({**_result(sizes), "model": model})
    assert "| 1,000 | 1,080 |" in text and "| open files (RLIMIT_NOFILE 1,024)" in text


def _result(sizes: list[dict[str, object]]) -> dict[str, object]:
    for size in sizes:
        size["fleet"] = {"up_seconds": 60.0}
        size["idle"].update(  # type: ignore[attr-defined]
            worker_apiserver_rss_mib_mean=200.0, worker_apiserver_cpu_pct_mean=0.8
        )
    return {"started_utc": "now", "command": "python -m bench.many_workers", "sizes": sizes,
            "machine": {"jobrelay_commit": "abc"}}  # fmt: skip


METRICS = """\
# TYPE jobrelay_apiserver_requests_total counter
jobrelay_apiserver_requests_total{worker="",verb="list",code="200"} 40
jobrelay_apiserver_requests_total{worker="worker-1",verb="watch",code="200"} 9
jobrelay_apiserver_requests_total{worker="worker-1",verb="get",code="200"} 30
jobrelay_apiserver_requests_total{worker="worker-1",verb="get",code="0"} 2
jobrelay_apiserver_requests_total{worker="worker-2",verb="list",code="200"} 9
"""


def test_requests_by_worker_and_their_rates() -> None:
    before = worker_model.requests_by_worker(METRICS)
    assert before == {"worker-1": {"watch": 9, "get": 32}, "worker-2": {"list": 9}}
    after = {"worker-1": {"watch": 10, "get": 47}, "worker-2": {"list": 9}}
    rates = worker_model.request_rates(before, after, 30.0)
    assert rates["worker-1"] == {"requests_per_min": 30.0, "rewatches_per_min": 2.0,
                                 "watches_opened": 10}  # fmt: skip
    assert rates["worker-2"]["requests_per_min"] == 0


TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 111 1
   1: 0100007F:A1B3 0100007F:1F90 06 00000000:00000000 00:00000000 00000000     0        0 112 1
   2: 0100007F:A1B4 0100007F:1F91 01 00000000:00000000 00:00000000 00000000     0        0 113 1
   3: 0100007F:A1B5 0100007F:1F91 01 00000000:00000000 00:00000000 00000000     0        0 999 1
"""


def test_established_connections_by_remote_port_of_the_process_sockets_only() -> None:
    sockets = worker_model.tcp_sockets(TCP)
    assert sockets[111] == (0x1F90, "01") and sockets[112] == (0x1F90, "06")
    # 112 is TIME_WAIT, 999 another process's.
    assert worker_model.connections_by_port([111, 112, 113, 5], sockets) == {8080: 1, 8081: 1}


def test_mirror_records_parse_and_skip_what_is_not_one() -> None:
    assert worker_model.mirror_records("1:worker-3:u1,2:worker-5:u2,junk,") == [
        (1, "worker-3", "u1"), (2, "worker-5", "u2")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("placements", "recorded", "found", "moved_from", "problem"),
    [
        (["w1"], [(1, "w1", "a")], [("w1", "a", 1)], None, None),
        (["w1"], [], [("w1", "a", 1)], None, None),  # a short Job: never recorded
        (["w1"], [(1, "w1", "a")], [], None, None),  # deleted by its TTL
        (["w1"], [(1, "w1", "a"), (1, "w1", "b")], [("w1", "b", 1)], None, "run 1 has 2 mirrors"),
        (["w1", "w2"], [], [("w2", "b", 2)], None, "placed 2 times"),
        (["w1"], [], [("w1", "a", 1), ("w2", "c", 1)], None, "2 mirrors on the workers"),
        (["w1"], [(1, "w1", "a")], [("w1", "z", 1)], None, "not the recorded one of run 1"),
        (["w1"], [], [("w2", "a", 1)], None, "the Job placed on w1"),
        (["w1"], [], [("w1", "a", 2)], None, "of run 2, not 1"),
        (["w1", "w2"], [(1, "w1", "a"), (2, "w2", "b")], [("w2", "b", 2)], "w1", None),
        (["w1", "w2"], [(1, "w1", "a")], [("w2", "b", 2)], "w1", None),
        # The lost worker's stale mirror still there: two mirrors.
        (
            ["w1", "w2"],
            [(1, "w1", "a")],
            [("w2", "b", 2), ("w1", "a", 1)],
            "w1",
            "2 mirrors on the workers",
        ),
        (["w1", "w2"], [(1, "w1", "a")], [("w1", "a", 1)], "w1", "of run 1, not 2"),
        (["w3"], [(1, "w3", "a")], [("w3", "a", 1)], "w1", "not moved off w1"),
    ],
)
def test_run_twice_problems(
    placements: list[str],
    recorded: list[tuple[int, str, str]],
    found: list[tuple[str, str, int]],
    moved_from: str | None,
    problem: str | None,
) -> None:
    problems = run_twice_problems(placements, recorded, found, moved_from=moved_from)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_worker_counts_from_repeated_and_comma_options() -> None:
    assert _sizes(("1,8", "32", "8")) == [1, 8, 32]
    with pytest.raises(Exception, match="1 or more"):
        _sizes(("0",))


def test_failed_checks_name_what_a_run_did_not_show() -> None:
    burst = {"jobs": 10, "complete": 10, "workers_used": 3, "ran_twice": {}}
    lost = {"jobs": 4, "complete": 4, "doomed_jobs": 1, "moved": 1, "ran_twice": {}}
    assert worker_model.failed_checks({"workers": 3, "burst": burst, "lose_one": lost}) == []
    assert worker_model.failed_checks({"workers": 3}) == []
    bad = {
        "workers": 4,
        "burst": {**burst, "complete": 9, "ran_twice": {"j1": ["2 mirrors"]}},
        "lose_one": {**lost, "moved": 0},
    }
    assert worker_model.failed_checks(bad) == [
        "1 of the Jobs not Complete",
        "only 3 of 4 workers used",
        "1 Jobs may have run twice",
        "1 Jobs not moved off the lost worker",
    ]
