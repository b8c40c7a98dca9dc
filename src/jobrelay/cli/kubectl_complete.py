"""``kubectl_complete-jobrelay``: TAB completion of ``kubectl jobrelay ...``.

kubectl 1.26+ completes a plugin's arguments by running the executable
``kubectl_complete-PLUGIN`` found on $PATH with the words typed after the plugin's name,
the last one being the word to complete (maybe ""), and reads its answer as a Cobra
program's ``__complete``: one candidate a line (``value<TAB>description``), then a last
line ``:DIRECTIVE``. The candidates are click's own completion of the same commands.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from click.shell_completion import CompletionItem, ShellComplete

# Cobra's ShellCompDirective values.
DEFAULT = 0  # the shell completes file names
ERROR = 1
NO_FILE = 4
FILTER_DIRS = 16


def answer(items: Sequence[CompletionItem]) -> list[str]:
    """The lines kubectl reads: the candidates, then the directive."""
    kinds = {item.type for item in items}
    if "file" in kinds:
        return [f":{DEFAULT}"]
    if "dir" in kinds:
        return [f":{FILTER_DIRS}"]
    lines = []
    for item in items:
        value = _one_line(str(item.value))
        lines.append(f"{value}\t{_one_line(item.help)}" if item.help else value)
    return [*lines, f":{NO_FILE}"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> None:
    from jobrelay.cli.main import cli

    # A completion must print nothing but its answer: no log line, no traceback.
    logging.getLogger().addHandler(logging.NullHandler())
    words = list(sys.argv[1:] if argv is None else argv)
    args, incomplete = words[:-1], (words[-1] if words else "")
    completer = ShellComplete(cli, {}, "kubectl jobrelay", "_KUBECTL_JOBRELAY_COMPLETE")
    try:
        items = completer.get_completions(args, incomplete)
    except Exception:  # a half-typed command line click cannot parse: no candidates
        items, lines = [], [f":{ERROR}"]
    else:
        lines = answer(items)
    sys.stdout.write("".join(f"{line}\n" for line in lines))
