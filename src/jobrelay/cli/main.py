"""The `jobrelay` command.

Subcommands are imported when they are run (or their own help is asked for), not
before: `jobrelay --help` and TAB completion of a verb import none of them, nor the
API client under them. Each verb's short help is written here for that reason; a
unit test keeps it equal to the command's own.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

import click
from click.shell_completion import CompletionItem

from jobrelay import __version__
from jobrelay.cli.error_style import error_line


@dataclass(frozen=True)
class Subcommand:
    module: str  # the module that defines it
    attribute: str  # its click command there
    short_help: str  # shown by `jobrelay --help` and completion without importing it
    # Runs until SIGTERM or SIGINT: one that comes while it is still being imported ends
    # it as one later would (exit 0), rather than as the kernel's default (killed).
    until_signalled: bool = False


SUBCOMMANDS: dict[str, Subcommand] = {
    "clusters": Subcommand(
        "jobrelay.cli.clusters", "clusters",
        "Worker clusters registered with the management cluster (WorkerCluster objects).",
    ),
    "demo": Subcommand(
        "jobrelay.cli.demo", "demo",
        "Bring up a local fleet, run jobrelay, and dispatch a batch of sample Jobs and JobSets.",
    ),
    "describe": Subcommand(
        "jobrelay.cli.describe", "describe",
        "Show one workload: state and why it waits, placement history, status and "
        "conditions, the mirror's conditions and pods on its worker, and its Events (the "
        "worker's relayed).",
    ),
    "fleet": Subcommand(
        "jobrelay.cli.fleet", "fleet",
        "Run a local fleet of real Kubernetes clusters (manager + workers, KWOK nodes).",
    ),
    "get": Subcommand(
        "jobrelay.cli.get", "get",
        "List managed workloads: cluster, state (Held, Pending, Dispatched, Running, "
        "Blocked, Complete, Failed, Suspended) and why, completions, age and duration.",
    ),
    "install": Subcommand(
        "jobrelay.run_command", "install",
        "Check that jobrelay's CRDs are served, and create the controller's namespace.",
    ),
    # An alias of `get` (the same options and output), kept for those used to it.
    "jobs": Subcommand("jobrelay.cli.get", "get", "An alias of get."),
    "logs": Subcommand(
        "jobrelay.cli.logs", "logs",
        "Print the logs of a workload's pods, read from its worker through the jobrelay "
        "controller.",
    ),
    "manifests": Subcommand(
        "jobrelay.cli.manifests", "manifests",
        "Print manifests generated from jobrelay's settings (apply them with kubectl).",
    ),
    "queues": Subcommand(
        "jobrelay.cli.queues", "queues",
        "The fleet's queues (RelayQueue objects): weight, pending and admitted workloads, "
        "usage of nominal quota per resource, fair and actual share of the fleet.",
    ),
    "run": Subcommand(
        "jobrelay.run_command", "run",
        "Run the controller in the foreground until SIGTERM or SIGINT.", until_signalled=True,
    ),
    "simulate": Subcommand(
        "jobrelay.cli.simulate", "simulate",
        "Where and when workloads would run, were they submitted now: the queue each would "
        "join, whether it would be admitted now, the worker it would go to or why each "
        "worker refuses, and its estimated start.",
    ),
    "top": Subcommand(
        "jobrelay.cli.top", "top",
        "The fleet at a glance: per worker, whether it is connected, its nodes, CPU, memory "
        "and GPUs used of allocatable, its unfinished mirrors and the workloads running "
        "there; then the managed workloads by state (-n: of one namespace).",
    ),
    "version": Subcommand(
        "jobrelay.cli.version", "version",
        "Print the client's version and the controller's (from its leader's Lease).",
    ),
}  # fmt: skip


# Absent from the container image: `fleet` and `demo` need it.
LOCAL_FLEET_PACKAGE = "jobrelay.localfleet"


def _short_help(text: str, limit: int = 45) -> str:
    """``text`` cut to ``limit`` as click cuts a command's own short help (through a bare
    Command, click's public way: its helper function is deprecated)."""
    return click.Command(None, short_help=text).get_short_help_str(limit)


def _stop_before_starting() -> None:
    """Until the command puts its own handlers in place (the controller's runner does, first
    thing), SIGTERM or SIGINT exits 0: nothing was started, so there is nothing to stop. A
    rollout may stop a pod a moment after it started, while its modules still load."""

    def stop(_signum: int, _frame: object) -> None:
        raise SystemExit(0)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)


class LazyGroup(click.Group):
    """A group whose subcommands (``SUBCOMMANDS``) are imported on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = SUBCOMMANDS.get(cmd_name)
        if found is None:
            return None
        if found.until_signalled:
            _stop_before_starting()
        try:
            module = importlib.import_module(found.module)
        except ModuleNotFoundError as missing:
            if not (missing.name or "").startswith(LOCAL_FLEET_PACKAGE):
                raise
            # The container image leaves the local fleet out: one line, not an ImportError.
            raise click.ClickException(
                f"`jobrelay {cmd_name}` needs the local fleet ({LOCAL_FLEET_PACKAGE}), which "
                "this installation leaves out (the container image does): install the jobrelay "
                "package (pip or pipx) to run it"
            ) from None
        command = getattr(module, found.attribute)
        assert isinstance(command, click.Command), found
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in SUBCOMMANDS)
        rows = [
            (name, _short_help(SUBCOMMANDS[name].short_help, limit))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        verbs = [
            CompletionItem(name, help=_short_help(SUBCOMMANDS[name].short_help))
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
        ]
        # The group's own options (click.Command's completion, not Group's, which would
        # import every verb).
        return verbs + click.Command.shell_complete(self, ctx, incomplete)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Exit codes: 0 ok, 1 the apiserver refused or could not be reached (or another "
    "error), 2 usage, 3 not found, 130 interrupted. Shell completion: "
    'eval "$(_JOBRELAY_COMPLETE=bash_source jobrelay)" (zsh_source, fish_source).',
)
@click.version_option(__version__, prog_name="jobrelay")
def cli() -> None:
    """jobrelay: dispatch Kubernetes Jobs (spec.managedBy) to a fleet of worker clusters."""


def main() -> None:
    _main()


def plugin_main() -> None:
    """``kubectl-jobrelay``: the same commands as ``kubectl jobrelay ...`` (a kubectl plugin)."""
    _main(prog_name="kubectl jobrelay", complete_var="_KUBECTL_JOBRELAY_COMPLETE")


def _main(**settings: Any) -> None:
    """Run the CLI: no log line reaches the user unless `jobrelay run` sets up logging (the
    command's one error line says it all), and no traceback either."""
    logging.getLogger().addHandler(logging.NullHandler())  # not Python's last resort
    try:
        code = cli.main(standalone_mode=False, **settings)
    except click.exceptions.NoArgsIsHelpError as error:  # a bare group: its help
        error.show()
        sys.exit(error.exit_code)
    except click.ClickException as error:  # usage errors too: one line (error_style)
        error.show()
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo(error_line("aborted"), err=True)
        sys.exit(1)
    except Exception as error:
        if os.environ.get("JOBRELAY_DEBUG"):
            raise
        click.echo(
            error_line(
                f"{type(error).__name__}: {error} (unexpected, a bug in jobrelay "
                f"{__version__}: please report it; JOBRELAY_DEBUG=1 shows where)"
            ),
            err=True,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
