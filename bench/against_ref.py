"""``bench throughput --against REF``: the same rounds, alternated between the
controller of another commit (old) and this tree's (new), on one kept fleet.

The bench itself (submission, watches, the figures) is always this tree's; only
the controller process runs from REF's sources, checked out in a temporary
``git worktree`` and put first on its ``PYTHONPATH``. Rounds alternate
old, new, new, old, old, new ... so that a drift of the machine over the
run weighs on both sides alike.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import stats

Json = dict[str, Any]
OLD, NEW = "old", "new"


def alternation(rounds_per_side: int) -> list[str]:
    """old, new, new, old, old, new ...: ``rounds_per_side`` rounds of each."""
    order: list[str] = []
    for pair in range(max(0, rounds_per_side)):
        order.extend((OLD, NEW) if pair % 2 == 0 else (NEW, OLD))
    return order


def _dig(run: Json, *keys: str) -> float:
    node: Any = run
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return math.nan
        node = node[key]
    return float(node) if isinstance(node, int | float) else math.nan


# Figure -> how to read it from one throughput round (bench.scenarios.throughput_once).
FIGURES: dict[str, Callable[[Json], float]] = {
    "total_s": lambda r: _dig(r, "total_s"),
    "controller_cpu_ms_per_job": lambda r: _dig(r, "controller_cpu_ms_per_job"),
    "fleet_cpu_ms_per_job": lambda r: _dig(r, "user_window", "fleet_cpu_ms_per_job"),
    "manager_fleet_cpu_ms_per_job": lambda r: _dig(
        r, "user_window", "by_role_ms_per_job", "manager"
    ),
    "workers_fleet_cpu_ms_per_job": lambda r: _dig(
        r, "user_window", "by_role_ms_per_job", "workers"
    ),
    "manager_writes_per_job": lambda r: _dig(r, "manager_writes_per_job"),
    "worker_writes_per_job": lambda r: _dig(r, "worker_writes_per_job"),
    "dispatch_p50_ms": lambda r: _dig(r, "dispatch_ms", "p50"),
    "dispatch_p99_ms": lambda r: _dig(r, "dispatch_ms", "p99"),
    "status_p50_ms": lambda r: _dig(r, "status_ms", "p50"),
    "completion_status_p50_ms": lambda r: _dig(r, "completion_status_ms", "p50"),
    "dispatch_rate_sustained": lambda r: _dig(r, "dispatch_rate_sustained"),
    "controller_rss_peak_mib": lambda r: _dig(r, "controller", "rss_peak_mib"),
}


def ratio(new: float, old: float) -> float:
    """new ÷ old; NaN when either is unknown or old is 0."""
    if math.isnan(new) or math.isnan(old) or old == 0:
        return math.nan
    return new / old


def compare(rounds: Sequence[tuple[str, Json]]) -> Json:
    """Per figure: the median of the old rounds, of the new rounds, and new ÷ old."""
    out: Json = {}
    for figure, read in FIGURES.items():
        old = stats.median(read(r) for side, r in rounds if side == OLD)
        new = stats.median(read(r) for side, r in rounds if side == NEW)
        out[figure] = {OLD: old, NEW: new, "ratio": ratio(new, old)}
    return out


def supported_args(args: Sequence[str], help_text: str) -> list[str]:
    """``args`` without the options that ``help_text`` does not mention (an older
    controller lacks newer flags). An option's value (the next item, when it is not
    itself an option) goes with it; ``--flag=value`` is one item."""
    kept: list[str] = []
    index = 0
    while index < len(args):
        item = args[index]
        value: list[str] = []
        if (
            item.startswith("--")
            and "=" not in item
            and index + 1 < len(args)
            and not args[index + 1].startswith("--")
        ):
            value = [args[index + 1]]
        if not item.startswith("--") or item.split("=", 1)[0] in help_text:
            kept.extend([item, *value])
        index += 1 + len(value)
    return kept


@dataclass(frozen=True)
class SourceTree:
    """Where a controller's sources are: run as ``PYTHONPATH=<root>/src python -m jobrelay``."""

    label: str  # "old" or "new"
    root: Path
    ref: str
    commit: str

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.root / "src"), str(self.root)]
            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        return env

    def controller_help(self) -> str:
        """``jobrelay run --help`` of this tree (its flags)."""
        answer = subprocess.run(
            [sys.executable, "-m", "jobrelay", "run", "--help"],
            env=self.environment(),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        return answer.stdout


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@contextlib.contextmanager
def checkout(repo: Path, ref: str) -> Iterator[SourceTree]:
    """REF in a temporary detached ``git worktree``, removed afterwards."""
    commit = _git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}")
    directory = Path(tempfile.mkdtemp(prefix="jobrelay-bench-old-"))
    target = directory / "tree"
    _git(repo, "worktree", "add", "--detach", "--quiet", str(target), commit)
    try:
        yield SourceTree(OLD, target, ref, commit)
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _git(repo, "worktree", "remove", "--force", str(target))
        with contextlib.suppress(OSError):
            directory.rmdir()


def this_tree(repo: Path) -> SourceTree:
    commit = ""
    with contextlib.suppress(subprocess.CalledProcessError, OSError):
        commit = _git(repo, "rev-parse", "HEAD")
    return SourceTree(NEW, repo, "HEAD (working tree)", commit)
