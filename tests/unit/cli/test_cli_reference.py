"""docs/cli.md cannot drift from the commands: its reference part is their help, and a
CLI-conformance table holds each verb's flags against kubectl's."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from jobrelay.cli.cli_reference import MARKER, commands, reference_markdown, rewritten

PAGE = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


def test_docs_cli_md_is_the_commands_help() -> None:
    page = PAGE.read_text()
    assert MARKER in page
    assert page == rewritten(page), (
        "docs/cli.md differs from the commands' help: run "
        "`python -m jobrelay.cli.cli_reference --write` and commit docs/cli.md"
    )


def test_every_verb_has_its_own_section_and_no_placeholder() -> None:
    generated = reference_markdown()
    for path, _ in commands():
        assert f"\n### {path}\n" in generated
    assert "Unchanged" not in PAGE.read_text()


def _options(path: str) -> dict[str, set[str]]:
    """Each option of the command at ``path``, by its long name: all its spellings."""
    found = dict(commands())
    command = found[path]
    spelled: dict[str, set[str]] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            names = set(param.opts) | set(param.secondary_opts)
            longest = max(param.opts, key=len)
            spelled[longest] = names
    return spelled


# kubectl's flag for the same thing, per verb: (short, long) as kubectl spells it
# (kubectl get/logs/describe/top/version); the verb's flag must answer to both.
KUBECTL_FLAGS: dict[str, list[tuple[str | None, str]]] = {
    "jobrelay get": [("-n", "--namespace"), ("-A", "--all-namespaces"), ("-o", "--output"),
                     ("-w", "--watch"), ("-l", "--selector"), ("-L", "--label-columns"),
                     (None, "--sort-by"), (None, "--no-headers")],
    "jobrelay logs": [("-n", "--namespace"), ("-l", "--selector"), ("-f", "--follow"),
                      ("-c", "--container"), (None, "--all-containers"), (None, "--prefix"),
                      (None, "--tail"), (None, "--since"), ("-p", "--previous"),
                      (None, "--timestamps")],
    "jobrelay describe": [("-n", "--namespace"), ("-l", "--selector")],
    "jobrelay queues": [("-o", "--output"), ("-w", "--watch")],
    "jobrelay clusters": [("-o", "--output"), ("-w", "--watch")],
    "jobrelay clusters list": [("-o", "--output"), ("-w", "--watch")],
    "jobrelay clusters add": [("-n", "--namespace")],
    "jobrelay clusters remove": [("-n", "--namespace")],
    "jobrelay top": [("-n", "--namespace"), ("-A", "--all-namespaces")],
    "jobrelay version": [(None, "--client"), ("-o", "--output"), ("-n", "--namespace")],
    "jobrelay simulate": [("-f", "--filename"), ("-n", "--namespace"), ("-o", "--output")],
    "jobrelay install": [("-n", "--namespace")],
    "jobrelay run": [("-n", "--namespace")],
}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "short", "long"),
    [(path, short, long) for path, flags in KUBECTL_FLAGS.items() for short, long in flags],
)
def test_each_verb_spells_its_flags_as_kubectl(path: str, short: str | None, long: str) -> None:
    options = _options(path)
    assert long in options, f"{path} has no {long}"
    if short is not None:
        assert short in options[long], f"{path} {long} is not also {short}"


# Wherever these long flags exist, kubectl's short form comes with them.
SHORT_OF = {"--namespace": "-n", "--all-namespaces": "-A", "--output": "-o", "--watch": "-w",
            "--selector": "-l", "--follow": "-f", "--container": "-c", "--previous": "-p"}  # fmt: skip


@pytest.mark.parametrize("path", [path for path, _ in commands()])
def test_kubectls_short_forms_come_with_its_long_flags(path: str) -> None:
    for long, names in _options(path).items():
        if long in SHORT_OF:
            assert SHORT_OF[long] in names, f"{path} {long} lacks {SHORT_OF[long]}"
