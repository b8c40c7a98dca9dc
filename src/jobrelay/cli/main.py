"""The `jobrelay` command."""

from __future__ import annotations

import click

from jobrelay import __version__
from jobrelay.cli.fleet import fleet


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jobrelay")
def cli() -> None:
    """jobrelay: dispatch Kubernetes Jobs (spec.managedBy) to a fleet of worker clusters."""


cli.add_command(fleet)


def main() -> None:
    cli()
