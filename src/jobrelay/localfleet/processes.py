"""Start, identify and stop the fleet's processes by the PIDs we recorded.

A PID alone is not an identity (the kernel reuses them), so each record keeps
the process's start time as the kernel reports it; a process is ours only when
both match. Nothing is ever stopped by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The line spawn() writes before each run's output in a component's (appended) log.
_RUN_HEADER = re.compile(r"^--- \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d starting .*$", re.M)
_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_ticks: int
    argv: list[str]
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=[str(arg) for arg in data["argv"]],
            log=str(data["log"]),
        )


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z" and not _has_live_threads(pid):
        # A zombie has exited; only its parent's wait() is missing. But a killed
        # multi-threaded (Go) process shows its main thread as a zombie while the
        # other threads still tear down, holding its sockets: that one is still alive.
        return None
    return int(fields[19])


def _has_live_threads(pid: int) -> bool:
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def is_running(record: ProcessRecord) -> bool:
    return _start_ticks(record.pid) == record.start_ticks


def spawn(
    name: str, argv: list[str], log_path: Path, *, env: dict[str, str] | None = None
) -> ProcessRecord:
    """Start ``argv`` detached from us (own session), its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(
            # One line, whatever the arguments hold: log_tail finds runs by these headers.
            f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting "
            f"{shlex.join(argv).replace(chr(10), ' ')}\n".encode()
        )
        log.flush()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    ticks = _start_ticks(process.pid)
    # Popen objects reap their child when garbage-collected; we detach on purpose,
    # so keep the exit status from turning into a zombie warning later.
    process.returncode = 0
    return ProcessRecord(name, process.pid, ticks or 0, argv, str(log_path))


def exit_status(record: ProcessRecord) -> int | None:
    """Reap ``record`` if it is our exited child, returning its exit code."""
    try:
        pid, status = os.waitpid(record.pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if pid == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def stop(records: list[ProcessRecord], *, grace_seconds: float = 10.0) -> list[str]:
    """SIGTERM every live record, SIGKILL what is left after the grace period.

    Returns the names of the processes that were running.
    """
    live = [record for record in records if is_running(record)]
    for record in live:
        _signal(record, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(_still_alive(record) for record in live):
        time.sleep(0.05)
    for record in live:
        if _still_alive(record):
            _signal(record, signal.SIGKILL)
    for record in live:
        _reap(record)
    return [record.name for record in live]


def _still_alive(record: ProcessRecord) -> bool:
    exit_status(record)
    return is_running(record)


def _signal(record: ProcessRecord, signum: int) -> None:
    if not is_running(record):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signum)


def _reap(record: ProcessRecord) -> None:
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and is_running(record):
        exit_status(record)
        time.sleep(0.02)


def log_tail(record: ProcessRecord, lines: int = 15) -> str:
    """The last ``lines`` lines the process wrote, never an earlier run's (logs are appended to)."""
    try:
        with Path(record.log).open("rb") as log:
            # Long-lived apiservers write hundreds of MB; the tail is all we need.
            log.seek(max(0, log.seek(0, os.SEEK_END) - _TAIL_BYTES))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    headers = list(_RUN_HEADER.finditer(text))
    this_run = text[headers[-1].end() :] if headers else text
    this_run_lines = this_run.strip("\n").splitlines()
    if not this_run_lines:
        return "(it wrote nothing)"
    return "\n".join(this_run_lines[-lines:])
