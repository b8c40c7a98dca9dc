"""One error style, kubectl's: `error: ...` on one line, lowercase, for click's usage
errors as for the commands' own, however the command is invoked."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.cli.error_style import error_line, usage_error_line
from jobrelay.cli.main import cli
from jobrelay.cli.queues import queues


@pytest.mark.parametrize(
    ("message", "line"),
    [
        ("Invalid value for '-o': x", "error: invalid value for '-o': x"),
        ("No such option: --nope", "error: no such option: --nope"),
        ("RayJob t is not placed", "error: RayJob t is not placed"),
        ("API unavailable", "error: API unavailable"),
        ("error: already said", "error: already said"),
        ("Error: said by click", "error: said by click"),
        ("cannot connect", "error: cannot connect"),
    ],
)
def test_error_lines_are_kubectls(message: str, line: str) -> None:
    assert error_line(message) == line


def test_a_usage_error_says_where_help_is() -> None:
    assert usage_error_line("Missing argument 'NAME'.", "jobrelay logs") == (
        "error: missing argument 'NAME' (see 'jobrelay logs --help')"
    )


@given(st.text(max_size=80))
def test_every_error_line_starts_lowercase_on_one_prefix(message: str) -> None:
    line = error_line(message)
    assert line.startswith("error: ") and not line.startswith("error: error: ")


@pytest.mark.parametrize(
    "args",
    [["queues", "-o", "jsonpath="], ["logs"], ["get", "--nope"], ["clusters", "add"],
     ["top", "--interval", "0"], ["version", "-o", "xml"]],
)  # fmt: skip
def test_usage_errors_are_one_line_through_the_group(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and line.endswith("--help')")
    assert "Usage:" not in result.output and "Traceback" not in result.output


def test_a_command_invoked_on_its_own_speaks_the_same() -> None:
    result = CliRunner().invoke(queues, ["-o", "jsonpath="])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid value for '-o' / '--output'")
