"""The `jobrelay` command."""

from __future__ import annotations

import click

from jobrelay import __version__
from jobrelay.cli.clusters import clusters
from jobrelay.cli.demo import demo
from jobrelay.cli.describe import describe
from jobrelay.cli.fleet import fleet
from jobrelay.cli.get import get
from jobrelay.cli.jobs import jobs
from jobrelay.cli.logs import logs
from jobrelay.cli.run import install, run
from jobrelay.cli.top import top


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Exit codes: 0 ok, 1 the apiserver refused or could not be reached (or another "
    "error), 2 usage, 3 not found, 130 interrupted. Shell completion: "
    'eval "$(_JOBRELAY_COMPLETE=bash_source jobrelay)" (zsh_source, fish_source).',
)
@click.version_option(__version__, prog_name="jobrelay")
def cli() -> None:
    """jobrelay: dispatch Kubernetes Jobs (spec.managedBy) to a fleet of worker clusters."""


for command in (run, install, clusters, jobs, get, describe, top, logs, fleet, demo):
    cli.add_command(command)


def main() -> None:
    cli()


def plugin_main() -> None:
    """``kubectl-jobrelay``: the same commands as ``kubectl jobrelay ...`` (a kubectl plugin)."""
    cli(prog_name="kubectl jobrelay", complete_var="_KUBECTL_JOBRELAY_COMPLETE")
