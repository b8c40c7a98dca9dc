"""docs/cli.md's reference: every verb's help, generated from the commands themselves so
that the page cannot drift from them (a unit test compares the two).

``python -m jobrelay.cli.cli_reference --write`` rewrites the generated part of
docs/cli.md (everything after :data:`MARKER`); without ``--write`` it prints it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

__all__ = ["MARKER", "commands", "reference_markdown", "rewritten"]

MARKER = (
    "<!-- Generated from the commands' help by `python -m jobrelay.cli.cli_reference "
    "--write`: do not edit below. -->"
)
# Help is laid out for this width, whatever the terminal that generates it.
_WIDTH = 88
# Verbs that are another's name: said once, not repeated.
_ALIASES = {"jobs": "get"}


def commands() -> Iterator[tuple[str, click.Command]]:
    """Every verb and subcommand, as ``jobrelay VERB [SUB]``, in the order of `--help`."""
    from jobrelay.cli.main import SUBCOMMANDS, cli

    root = click.Context(cli, info_name="jobrelay")
    for name in sorted(SUBCOMMANDS):
        if name in _ALIASES:
            continue
        command = cli.get_command(root, name)
        assert command is not None, name
        yield from _walk(f"jobrelay {name}", command)


def _walk(path: str, command: click.Command) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command, info_name=path)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                yield from _walk(f"{path} {name}", sub)


def _help(path: str, command: click.Command) -> str:
    context = click.Context(
        command, info_name=path, terminal_width=_WIDTH, max_content_width=_WIDTH
    )
    return command.get_help(context)


def reference_markdown() -> str:
    """The generated part of docs/cli.md: a section per verb, its help verbatim."""
    parts = [MARKER, "", "## Reference", ""]
    parts.append(
        "Each verb's `--help`, as this version prints it. "
        + "; ".join(f"`jobrelay {alias}` is `jobrelay {of}`" for alias, of in _ALIASES.items())
        + "."
    )
    for path, command in commands():
        parts += ["", f"### {path}", "", "```text", _help(path, command), "```"]
    return "\n".join(parts) + "\n"


def rewritten(page: str) -> str:
    """``page`` (docs/cli.md) with its generated part made anew."""
    written, _, _ = page.partition(MARKER)
    return written + reference_markdown()


def main(argv: list[str]) -> int:
    page = Path(__file__).resolve().parents[3] / "docs" / "cli.md"
    if argv[1:] == ["--write"]:
        page.write_text(rewritten(page.read_text()))
        return 0
    sys.stdout.write(reference_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
