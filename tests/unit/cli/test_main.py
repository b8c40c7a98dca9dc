"""The `jobrelay` group loads its verbs lazily: help and completion import none of them,
`get --help` imports no HTTP stack, and `jobs` is `get` under another name."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import jobrelay
from jobrelay.cli.main import SUBCOMMANDS, cli

HEAVY = (
    "aiohttp",
    "lightkube",
    "httpx2",
    "jobrelay.kube",
    "jobrelay.relayapi.user_client",
    "asyncio",
)
SRC = Path(jobrelay.__file__).resolve().parents[1]
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def imported_after(*args: str) -> list[str]:
    """The modules a fresh interpreter holds after ``jobrelay ARGS`` (deterministic: no
    timing), those of the HEAVY packages only."""
    script = (
        "import json, sys\n"
        "from jobrelay.cli.main import cli\n"
        "try:\n"
        f"    cli({list(args)!r}, prog_name='jobrelay')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.mark.parametrize("args", [["--help"], ["get", "--help"], ["jobs", "--help"]])
def test_help_imports_no_http_stack(args: list[str]) -> None:
    assert imported_after(*args) == []


def test_the_group_help_imports_no_verb() -> None:
    script = (
        "import sys\nfrom jobrelay.cli.main import cli\n"
        "try:\n    cli(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('jobrelay.cli.') "
        "and m not in ('jobrelay.cli.main', 'jobrelay.cli.error_style')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", sorted(set(SUBCOMMANDS) - {"jobs"}))
def test_each_short_help_is_the_commands_own(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    assert SUBCOMMANDS[name].short_help == command.get_short_help_str(limit=1000)


def test_jobs_is_get() -> None:
    context = click.Context(cli)
    assert cli.get_command(context, "jobs") is cli.get_command(context, "get")
    shown = CliRunner().invoke(cli, ["jobs", "--help"])
    assert shown.exit_code == 0 and shown.output.startswith("Usage: cli jobs [OPTIONS]")
    assert "--output" in shown.output and "--watch" in shown.output


def test_an_unknown_verb_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["nope"])
    assert result.exit_code == 2
    assert result.output == "error: no such command 'nope' (see 'cli --help')\n"


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_run_stopped_while_its_modules_load_exits_0(
    monkeypatch: pytest.MonkeyPatch, signum: signal.Signals
) -> None:
    """A signal that arrives while `run` is still being imported ends it with code 0, as
    the runner's own handlers would once in place; not killed, and no traceback."""
    arrived: list[int] = []
    saved = {s: signal.signal(s, lambda n, _f: arrived.append(n)) for s in SIGNALS}

    def loading(name: str) -> object:
        os.kill(os.getpid(), signum)  # handled before the next line runs
        raise AssertionError(f"{name} went on loading after {signum.name}")

    monkeypatch.setattr(importlib, "import_module", loading)
    try:
        with pytest.raises(SystemExit) as stopped:
            cli.get_command(click.Context(cli), "run")
        assert stopped.value.code == 0
        assert arrived == []  # the earlier handler was replaced, not called
        # Other verbs leave the handlers as they were.
        monkeypatch.undo()
        signal.signal(signum, saved[signum])
        cli.get_command(click.Context(cli), "version")
        assert signal.getsignal(signum) is saved[signum]
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
