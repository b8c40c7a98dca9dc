"""The `jobrelay` group loads its verbs lazily: help and completion import none of them,
`get --help` imports no HTTP stack, and `jobs` is `get` under another name."""

from __future__ import annotations

import json
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
