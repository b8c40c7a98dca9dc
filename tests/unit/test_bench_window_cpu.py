"""bench/window_cpu.py, bench/against_ref.py and bench/peer.py: the pure parts of the
user's-window measurement (CPU from /proc stat text, the window, medians and ratios)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bench.against_ref import NEW, OLD, alternation, compare, ratio, supported_args
from bench.peer import replace_section, summarize
from bench.recorder import Trace, completion_latency
from bench.window_cpu import (
    CpuReading,
    FleetProcess,
    ProcStat,
    fleet_processes,
    parse_proc_stat,
    user_window,
    window_cpu,
)
from hypothesis import given
from hypothesis import strategies as st

NAN = math.nan


def stat_line(command: str, utime: int, stime: int, start: int, *, cutime: int = 0) -> str:
    """A /proc/PID/stat line (fields 1-22 and a few more) with the given values."""
    after = ["S", "1", "42", "42", "0", "-1", "4194304", "100", "0", "0", "0"]
    after += [str(utime), str(stime), str(cutime), "0", "20", "0", "7", "0", str(start)]
    after += ["123456", "789"]
    return f"4242 ({command}) " + " ".join(after) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (stat_line("python3", 250, 50, 9876), ProcStat(300, 9876)),
        (stat_line("kube-apiserver", 0, 0, 1), ProcStat(0, 1)),
        # The command name may hold spaces and parentheses: only the last ')' ends it.
        (stat_line("a) S 1 2 (b", 7, 3, 55), ProcStat(10, 55)),
        # Children's CPU (cutime) is not the process's own.
        (stat_line("etcd", 100, 1, 2, cutime=999), ProcStat(101, 2)),
    ],
)
def test_proc_stat_gives_the_process_own_cpu_and_start(text: str, expected: ProcStat) -> None:
    assert parse_proc_stat(text) == expected


def test_fleet_processes_are_found_per_cluster_and_shared() -> None:
    def record(name: str, pid: int) -> dict[str, Any]:
        return {"name": name, "pid": pid, "start_ticks": pid * 10, "argv": [], "log": ""}

    state = {
        "kubernetes": "v1.35.4",
        "nodes": {"count": 8, "cpu": "64"},
        "clusters": {
            "manager": {"ports": {"apiserver": 1}, "processes": {"apiserver": record("a", 1)}},
            # A record's name may say its cluster too: the component is what is left.
            "worker-1": {"ports": {}, "processes": {"etcd": record("worker-1/etcd", 2)}},
            "worker-2": {"ports": {}, "processes": {}},
        },
        "standin": {"process": record("standin", 3)},
    }
    assert fleet_processes(state) == [
        FleetProcess("manager", "a", 1, 10),
        FleetProcess("worker-1", "etcd", 2, 20),
        FleetProcess("shared", "standin", 3, 30),
    ]
    assert [p.role for p in fleet_processes(state)] == ["manager", "workers", "shared"]


APISERVER = FleetProcess("manager", "apiserver", 10, 1)
ETCD = FleetProcess("worker-1", "etcd", 11, 1)
KWOK = FleetProcess("worker-2", "kwok", 12, 1)


@pytest.mark.parametrize(
    ("start", "end", "jobs", "expected"),
    [
        # 2 s of controller CPU (100 ticks/s) over 100 Jobs: 20 ms per Job.
        (
            CpuReading(0.0, 100, {APISERVER: 0, ETCD: 0}),
            CpuReading(10.0, 300, {APISERVER: 400, ETCD: 100}),
            100,
            {
                "seconds": 10.0,
                "controller_cpu_s": 2.0,
                "controller_cpu_ms_per_job": 20.0,
                "controller_cores": 0.2,
                "fleet_cpu_s": 5.0,
                "fleet_cpu_ms_per_job": 50.0,
                "fleet_cores": 0.5,
                "by_role_s": {"manager": 4.0, "workers": 1.0},
                "by_role_ms_per_job": {"manager": 40.0, "workers": 10.0},
                "fleet_missing": [],
            },
        ),
        # A process gone by the end (or new at the end) is left out, and named.
        (
            CpuReading(0.0, 0, {APISERVER: 0, KWOK: 50}),
            CpuReading(2.0, 100, {APISERVER: 100, ETCD: 10}),
            10,
            {
                "controller_cpu_ms_per_job": 100.0,
                "fleet_cpu_s": 1.0,
                "by_cluster_s": {"manager": 1.0},
                "fleet_missing": ["worker-1/etcd", "worker-2/kwok"],
            },
        ),
        # No controller (the floor), and no Jobs: NaN, never a division by zero.
        (
            CpuReading(0.0, None, {KWOK: 0}),
            CpuReading(1.0, None, {KWOK: 100}),
            0,
            {
                "controller_cpu_s": NAN,
                "controller_cpu_ms_per_job": NAN,
                "fleet_cpu_s": 1.0,
                "fleet_cpu_ms_per_job": NAN,
                "by_component_s": {"kwok": 1.0},
            },
        ),
    ],
)
def test_window_cpu(
    start: CpuReading, end: CpuReading, jobs: int, expected: dict[str, Any]
) -> None:
    got = window_cpu(start, end, jobs, ticks=100)
    for key, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(got[key]), key
        else:
            assert got[key] == pytest.approx(value), key


@pytest.mark.parametrize(
    ("submitted", "finished", "expected"),
    [
        ([5.0, 3.0, 4.0], [10.0, 12.0, 11.0], (3.0, 12.0)),
        ([NAN, 3.0], [NAN, 7.0], (3.0, 7.0)),  # never sent / never finished: ignored
        ([], [1.0], (NAN, NAN)),
        ([1.0], [NAN], (NAN, NAN)),
    ],
)
def test_user_window(
    submitted: list[float], finished: list[float], expected: tuple[float, float]
) -> None:
    got = user_window(submitted, finished)
    assert [math.isnan(x) for x in got] == [math.isnan(x) for x in expected]
    assert [x for x in got if not math.isnan(x)] == [x for x in expected if not math.isnan(x)]


@given(st.lists(st.floats(0, 1e6), min_size=1), st.lists(st.floats(0, 1e6), min_size=1))
def test_user_window_spans_every_create_and_finish(
    submitted: list[float], finished: list[float]
) -> None:
    first, last = user_window(submitted, finished)
    assert all(first <= s for s in submitted)
    assert all(f <= last for f in finished)


@pytest.mark.parametrize(
    ("states", "finished", "expected"),
    [
        ([(1.0, (1, 0, 0, ())), (3.0, (0, 1, 0, ("Complete",)))], 3.5, 0.5),
        ([(1.0, (0, 0, 1, ("Failed",))), (2.0, (0, 0, 1, ("Failed",)))], 4.0, 3.0),
        ([(1.0, (1, 0, 0, ()))], 4.0, NAN),  # the mirror never seen finished
        ([(1.0, (0, 1, 0, ("Complete",)))], NAN, NAN),  # the Job never seen finished
    ],
)
def test_completion_latency(states: list[Any], finished: float, expected: float) -> None:
    trace = Trace("ns/job", finished=finished, mirror_states=states)
    got = completion_latency(trace)
    assert got == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize(
    ("per_side", "expected"),
    [
        (0, []),
        (1, [OLD, NEW]),
        (2, [OLD, NEW, NEW, OLD]),
        (3, [OLD, NEW, NEW, OLD, OLD, NEW]),
    ],
)
def test_rounds_alternate_old_new_new_old(per_side: int, expected: list[str]) -> None:
    assert alternation(per_side) == expected


@given(st.integers(0, 50))
def test_alternation_gives_each_side_its_rounds(per_side: int) -> None:
    order = alternation(per_side)
    assert order.count(OLD) == order.count(NEW) == per_side
    # Every pair of rounds holds one of each: neither side has the machine twice in a row
    # more often than the other.
    assert all({order[i], order[i + 1]} == {OLD, NEW} for i in range(0, len(order), 2))


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [(5.0, 10.0, 0.5), (10.0, 10.0, 1.0), (1.0, 0.0, NAN), (NAN, 1.0, NAN), (1.0, NAN, NAN)],
)
def test_ratio(new: float, old: float, expected: float) -> None:
    assert ratio(new, old) == pytest.approx(expected, nan_ok=True)


def test_compare_gives_medians_of_each_side_and_new_over_old() -> None:
    def run(total: float, cpu: float, writes: float) -> dict[str, Any]:
        return {
            "total_s": total,
            "controller_cpu_ms_per_job": cpu,
            "manager_writes_per_job": writes,
            "user_window": {"fleet_cpu_ms_per_job": 2 * cpu},
        }

    rounds = [
        (OLD, run(100.0, 30.0, 6.0)),
        (NEW, run(60.0, 5.0, 3.0)),
        (NEW, run(80.0, 7.0, 3.0)),
        (OLD, run(120.0, 32.0, 7.0)),
    ]
    got = compare(rounds)
    assert got["total_s"] == {OLD: 110.0, NEW: 70.0, "ratio": pytest.approx(70 / 110)}
    assert got["controller_cpu_ms_per_job"][NEW] == 6.0
    assert got["controller_cpu_ms_per_job"]["ratio"] == pytest.approx(6 / 31)
    assert got["manager_writes_per_job"]["ratio"] == pytest.approx(3 / 6.5)
    assert got["fleet_cpu_ms_per_job"][OLD] == 62.0
    # A figure the rounds lack (an older bench's) is NaN, not an error.
    assert math.isnan(got["dispatch_p50_ms"]["ratio"])


HELP = "Usage: jobrelay run [OPTIONS]\n  --kubeconfig PATH\n  --log-format [text|json]\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--kubeconfig", "k", "--log-format", "json"],
            ["--kubeconfig", "k", "--log-format", "json"],
        ),
        # A flag the older controller lacks goes, with its value.
        (["--kubeconfig", "k", "--api-register", "never"], ["--kubeconfig", "k"]),
        # A flag without a value goes alone.
        (["--install-crds", "--kubeconfig", "k"], ["--kubeconfig", "k"]),
        (["--metrics-address=127.0.0.1:0", "--log-format=json"], ["--log-format=json"]),
        ([], []),
    ],
)
def test_supported_args_drop_what_an_older_controller_lacks(
    args: list[str], expected: list[str]
) -> None:
    assert supported_args(args, HELP) == expected


@given(st.lists(st.sampled_from(["--kubeconfig", "--log-format", "x", "json", "--a=b"])))
def test_supported_args_keep_everything_a_newer_help_names(args: list[str]) -> None:
    assert supported_args(args, HELP + "  --a\n") == args


PAGE = (
    "# Performance\n\n## Running it\n\nrun\n\n"
    "## Peer\n\nold table\n```sh\n## not a heading\n```\n\n"
    "## Analysis\n\nby hand\n\n## Latest results — x\n\nfigures\n"
)


@pytest.mark.parametrize(
    ("page", "heading", "expected"),
    [
        (
            PAGE,
            "## Peer",
            "# Performance\n\n## Running it\n\nrun\n\n## Peer\n\nnew\n\n"
            "## Analysis\n\nby hand\n\n## Latest results — x\n\nfigures\n",
        ),
        (
            PAGE,
            "## Other",
            PAGE.replace("## Latest results", "## Other\n\nnew\n\n## Latest results"),
        ),
        ("# P\n\n## Peer\n\nold\n", "## Peer", "# P\n\n## Peer\n\nnew\n\n"),
    ],
)
def test_replace_section(page: str, heading: str, expected: str) -> None:
    assert replace_section(page, heading, "new\n", "## Latest results") == expected


def test_peer_summary_ratio_and_writes() -> None:
    floor = {"total_s": 60.0, "manager_all_writes_per_job": 0.0, "worker_all_writes_per_job": 11.8}
    relay = {
        "total_s": 78.0,
        "controller_cpu_ms_per_job": 4.5,
        "manager_writes_per_job": 3.0,
        "worker_writes_per_job": 2.0,
        "manager_all_writes_per_job": 4.0,
        "worker_all_writes_per_job": 13.8,
    }
    got = summarize(floor, relay)
    assert got["ratio"] == pytest.approx(1.3)
    assert got["controller_cpu_ms_per_job"] == 4.5
    assert got["writes_per_job"]["jobrelay"]["manager_by_jobrelay"] == 3.0
    assert got["writes_per_job"]["floor"]["workers"] == 11.8
    assert math.isnan(summarize({"total_s": NAN}, relay)["ratio"])
    assert math.isnan(summarize({}, {})["ratio"])
