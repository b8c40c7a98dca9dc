"""The jobrelay controller as a separate process, and its RSS and CPU from ``/proc``."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.against_ref import SourceTree, supported_args
from bench.controllermetrics import listening_url

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ControllerError(RuntimeError):
    """The controller did not start, or died."""


class ControllerProcess:
    """``python -m jobrelay run --kubeconfig <manager> --log-format json`` with a log file.

    Only the PID started here is ever signalled. With ``source``, the controller
    runs from that tree's sources, without the options its ``run --help`` lacks.
    """

    def __init__(
        self,
        kubeconfig: Path,
        log_path: Path,
        extra_args: Sequence[str] = (),
        source: SourceTree | None = None,
        source_help: str | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.source = source
        self.source_help = source_help
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._offset = 0
        self.started_at = math.nan
        self.ready_at = math.nan
        # Where the current run serves /metrics (logged before it is ready).
        self.metrics_url: str | None = None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise ControllerError("the controller is not running")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def argv(self) -> list[str]:
        options = self._options()
        if self.source_help is not None:
            options = supported_args(options, self.source_help)
        return [sys.executable, "-m", "jobrelay", "run", *options]

    def _options(self) -> list[str]:
        return [
            "--kubeconfig",
            str(self.kubeconfig),
            "--log-format",
            "json",
            "--metrics-address",
            "127.0.0.1:0",
            "--install-crds",  # the local fleet's admin: the CRD of the code measured
            # No aggregated API (auto would serve and register it on the loopback fleet):
            # the controller measured stays the one measured before.
            "--api-register",
            "never",
            # Finished mirrors deleted at once (the default keeps them an hour): the
            # delete is part of each Job's cost, and the bench waits for it.
            "--finished-mirror-ttl",
            "0",
            *self.extra_args,
        ]

    def start(self) -> None:
        if self.running:
            raise ControllerError("the controller is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"--- bench: starting {' '.join(self.argv)}\n".encode())
        self._log.flush()
        self._offset = self.log_path.stat().st_size
        self.started_at = time.monotonic()
        self.metrics_url = None
        self._process = subprocess.Popen(
            self.argv,
            env=self.source.environment() if self.source is not None else None,
            cwd=self.source.root if self.source is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C of the bench reaches it through stop() only
        )

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> float:
        """Wait for the controller's ``ready`` log line; returns seconds since start."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise ControllerError(
                    f"the controller exited while starting; {self.log_path} ends:\n{self.log_tail()}"
                )
            for entry in self._new_entries():
                self.metrics_url = listening_url(entry) or self.metrics_url
                if entry.get("event") == "ready" or str(entry.get("msg", "")).startswith(
                    "jobrelay ready"
                ):
                    self.ready_at = time.monotonic()
                    return self.ready_at - self.started_at
            await asyncio.sleep(0.05)
        raise ControllerError(
            f"the controller was not ready within {timeout:.0f}s; {self.log_path} ends:\n"
            + self.log_tail()
        )

    def _new_entries(self) -> list[dict[str, Any]]:
        with self.log_path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        entries = []
        for line in data[:complete].splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return entries

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT; returns the exit code."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return process.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_levels(self) -> dict[str, int]:
        """How many log lines of each level the controller wrote (whole log file)."""
        counts: Counter[str] = Counter()
        with contextlib.suppress(OSError), self.log_path.open("rb") as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict):
                        counts[str(entry.get("level", "?"))] += 1
        return dict(counts)


# -- /proc sampling ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcSample:
    at: float  # time.monotonic()
    cpu_seconds: float  # utime + stime so far
    rss_bytes: int


def read_proc(pid: int) -> ProcSample:
    """One reading of a process's CPU time (``/proc/PID/stat``) and RSS (``/proc/PID/status``)."""
    at = time.monotonic()
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime (fields 14, 15)
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
            break
    return ProcSample(at, cpu, rss)


@dataclass
class ProcSampler:
    """Samples a process every ``interval`` seconds while running (``async with``)."""

    pid: int
    interval: float = 0.5
    samples: list[ProcSample] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ProcSampler:
        self.sample()
        self._task = asyncio.create_task(self._run(), name=f"sample pid {self.pid}")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sample()

    def sample(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            self.samples.append(read_proc(self.pid))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    def window(self, start: float, end: float) -> dict[str, float]:
        """CPU (% of one core: mean and busiest interval) and RSS (MiB) between two times."""
        inside = [s for s in self.samples if start <= s.at <= end]
        if len(inside) < 2:
            return {
                "seconds": end - start,
                "cpu_mean_pct": math.nan,
                "cpu_max_pct": math.nan,
                "cpu_seconds": math.nan,
                "rss_peak_mib": math.nan,
                "rss_mean_mib": math.nan,
                "rss_end_mib": math.nan,
            }
        steps = [
            100.0 * (b.cpu_seconds - a.cpu_seconds) / (b.at - a.at)
            for a, b in itertools.pairwise(inside)
            if b.at > a.at
        ]
        first, last = inside[0], inside[-1]
        rss = [s.rss_bytes / 2**20 for s in inside]
        return {
            "seconds": last.at - first.at,
            "cpu_mean_pct": 100.0 * (last.cpu_seconds - first.cpu_seconds) / (last.at - first.at),
            "cpu_max_pct": max(steps) if steps else math.nan,
            "cpu_seconds": last.cpu_seconds - first.cpu_seconds,
            "rss_peak_mib": max(rss),
            "rss_mean_mib": sum(rss) / len(rss),
            "rss_end_mib": rss[-1],
        }

    def series(self, origin: float) -> list[tuple[float, float, float]]:
        """(seconds from origin, CPU % over the preceding interval, RSS MiB) per sample."""
        out = []
        for a, b in itertools.pairwise(self.samples):
            if b.at > a.at:
                cpu = 100.0 * (b.cpu_seconds - a.cpu_seconds) / (b.at - a.at)
                out.append((b.at - origin, cpu, b.rss_bytes / 2**20))
        return out


# -- the controller's own log ----------------------------------------------------------

# Best effort: messages of the dispatcher that mark the steps of a dispatch. If
# their wording changes the breakdown is simply left out.
LOG_STEPS = {"placed": "placed ", "mirror_created": "created mirror "}


def _epoch(stamp: str) -> float:
    parsed = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()


def log_steps(path: Path) -> dict[str, dict[str, float]]:
    """Per step (``placed``, ``mirror_created``): Job key -> wall-clock time of its first log line."""
    steps: dict[str, dict[str, float]] = {step: {} for step in LOG_STEPS}
    with contextlib.suppress(OSError), path.open("rb") as handle:
        for line in handle:
            if not line.startswith(b"{"):
                continue
            try:
                entry = json.loads(line)
                job, message, stamp = entry.get("job"), entry.get("msg", ""), entry["ts"]
            except (ValueError, KeyError, AttributeError):
                continue
            if not isinstance(job, str):
                continue
            for step, prefix in LOG_STEPS.items():
                if message.startswith(prefix) and job not in steps[step]:
                    with contextlib.suppress(ValueError):
                        steps[step][job] = _epoch(stamp)
    return steps
