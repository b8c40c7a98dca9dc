"""The `jobrelay` command."""

from __future__ import annotations

import click

from jobrelay import __version__
from jobrelay.cli.clusters import clusters
from jobrelay.cli.demo import demo
from jobrelay.cli.fleet import fleet
from jobrelay.cli.jobs import jobs
from jobrelay.cli.logs import logs
from jobrelay.cli.run import install, run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jobrelay")
def cli() -> None:
    """jobrelay: dispatch Kubernetes Jobs (spec.managedBy) to a fleet of worker clusters."""


for command in (run, install, clusters, jobs, fleet, demo, logs):
    cli.add_command(command)


def main() -> None:
    cli()
