"""Spawning, identifying and stopping real child processes by recorded PID and start time."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobrelay.localfleet import processes
from jobrelay.localfleet.processes import ProcessRecord


@pytest.fixture
def spawned() -> Iterator[list[ProcessRecord]]:
    """Records of what a test spawns, stopped afterwards whatever the test did."""
    records: list[ProcessRecord] = []
    yield records
    processes.stop(records, grace_seconds=0.5)


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def wait_for_exit(record: ProcessRecord, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    while (code := processes.exit_status(record)) is None:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return code


def test_spawned_sleep_is_running_until_stopped(
    tmp_path: Path, spawned: list[ProcessRecord]
) -> None:
    record = processes.spawn("test/sleep", ["sleep", "30"], tmp_path / "logs" / "sleep.log")
    spawned.append(record)
    assert record.start_ticks > 0
    assert processes.is_running(record)
    assert "starting sleep 30" in Path(record.log).read_text()

    started = time.monotonic()
    assert processes.stop([record]) == ["test/sleep"]
    assert time.monotonic() - started < 5  # sleep dies of SIGTERM, no grace period wasted
    assert not processes.is_running(record)
    assert not Path(f"/proc/{record.pid}").exists()  # reaped, not left a zombie


def test_a_reused_pid_is_not_ours_and_is_never_signalled(
    tmp_path: Path, spawned: list[ProcessRecord]
) -> None:
    record = processes.spawn("test/sleep", ["sleep", "30"], tmp_path / "sleep.log")
    spawned.append(record)
    # What a record of an earlier process looks like once the kernel gave its PID to another.
    stale = dataclasses.replace(record, start_ticks=record.start_ticks - 1)
    assert not processes.is_running(stale)
    assert processes.stop([stale], grace_seconds=0.2) == []
    assert processes.is_running(record)


def test_stop_kills_what_ignores_sigterm_after_the_grace_period(
    tmp_path: Path, spawned: list[ProcessRecord]
) -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('handler', 'installed', flush=True)\n"
        "time.sleep(30)\n"
    )
    record = processes.spawn("test/stubborn", [sys.executable, "-c", script], tmp_path / "s.log")
    spawned.append(record)
    wait_until(lambda: "handler installed" in processes.log_tail(record))
    started = time.monotonic()
    assert processes.stop([record], grace_seconds=0.5) == ["test/stubborn"]
    assert time.monotonic() - started >= 0.5
    assert not processes.is_running(record)


def test_exit_status_of_a_child_that_failed(tmp_path: Path, spawned: list[ProcessRecord]) -> None:
    record = processes.spawn("test/fail", ["sh", "-c", "echo boom; exit 3"], tmp_path / "f.log")
    spawned.append(record)
    assert wait_for_exit(record) == 3
    assert not processes.is_running(record)
    assert processes.log_tail(record) == "boom"


def test_an_unreaped_zombie_is_not_running(tmp_path: Path, spawned: list[ProcessRecord]) -> None:
    record = processes.spawn("test/true", ["true"], tmp_path / "t.log")
    spawned.append(record)

    def state() -> str:
        return Path(f"/proc/{record.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    wait_until(lambda: state() == "Z")
    assert not processes.is_running(record)
    assert wait_for_exit(record) == 0


def test_log_tail_shows_only_the_latest_run(tmp_path: Path, spawned: list[ProcessRecord]) -> None:
    log = tmp_path / "component.log"
    first = processes.spawn("test/a", ["sh", "-c", "echo first run failed"], log)
    spawned.append(first)
    wait_for_exit(first)
    second = processes.spawn("test/a", ["true"], log)
    spawned.append(second)
    wait_for_exit(second)
    assert "first run failed" in log.read_text()
    assert processes.log_tail(first) == "(it wrote nothing)"


def test_log_tail_keeps_the_last_lines(tmp_path: Path, spawned: list[ProcessRecord]) -> None:
    record = processes.spawn("test/seq", ["seq", "1", "100"], tmp_path / "seq.log")
    spawned.append(record)
    wait_for_exit(record)
    assert processes.log_tail(record, lines=3) == "98\n99\n100"


def test_record_round_trips_through_json() -> None:
    record = ProcessRecord("manager/etcd", 4242, 123456, ["/usr/bin/etcd", "--name=x"], "/l.log")
    assert ProcessRecord.from_json(record.to_json()) == record
