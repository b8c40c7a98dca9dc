"""What every `jobrelay clusters` verb shares: the manager's flags (a subcommand's own
win over the group's), the worker flags two verbs take, and how a verb runs (the
management cluster's refusals said as what to do about them; Ctrl-C said as what it
left behind).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from jobrelay.cli.common import given_manager_flags, manager_flags_options, unreachable_problem
from jobrelay.cli.controller_namespace import namespace_default_help
from jobrelay.fleet import workerclusters
from jobrelay.kube.client import ApiClient
from jobrelay.kube.errors import ApiError

__all__ = [
    "allow_exec_option",
    "kind_option",
    "locate_for_verb",
    "manager_flags",
    "manager_kubeconfig",
    "namespace_option",
    "run_verb",
    "verb_manager",
]

T = TypeVar("T")

manager_kubeconfig = click.option(
    "--manager-kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="An older spelling of --kubeconfig (the management cluster's).",
)


def manager_flags(func: Any) -> Any:
    """A subcommand's --kubeconfig/--context (the manager's, before the group's) and
    --manager-kubeconfig."""
    return manager_kubeconfig(manager_flags_options(func))


def verb_manager() -> tuple[Path | None, str | None]:
    """The manager's kubeconfig and context a verb was given (its own, else the group's)."""
    return given_manager_flags(click.get_current_context())


allow_exec_option = click.option(
    "--allow-exec-credentials", is_flag=True,
    help="Accept a worker kubeconfig whose user runs an exec credential plugin; the "
         "controller needs `jobrelay run --allow-exec-credentials` to use it too.",
)  # fmt: skip
namespace_option = click.option(
    "-n", "--namespace", default=None,
    help="The controller's namespace, where it reads the workers' kubeconfig Secrets "
         f"[default: {namespace_default_help()}].",
)  # fmt: skip
kind_option = click.option(
    "--kind", "kind_names", multiple=True, metavar="Kind.version.group",
    help="A kind the controller runs (repeatable), as `jobrelay run --kind` [default: the "
         "kinds its leader records on its Lease, else Job.v1.batch].",
)  # fmt: skip


async def locate_for_verb(
    client: ApiClient,
    namespace: str | None,
    kind_names: tuple[str, ...],
    controller_name: str,
    *,
    need_kinds: bool = True,
) -> tuple[str, tuple[str, ...]]:
    """The controller's namespace and the kinds a verb works with (``--namespace`` and
    ``--kind`` when given, else found through its Lease; a warning when no Lease says)."""
    from datetime import UTC, datetime

    from jobrelay.cli.controller_namespace import kinds_for_verb, locate_controller, recorded_kinds
    from jobrelay.kinds.catalog import DEFAULT_KINDS
    from jobrelay.vocabulary.leases import lease_name_for

    lease_name = lease_name_for(controller_name)
    located = await locate_controller(client, namespace, lease_name, datetime.now(UTC))
    if kind_names or not need_kinds:
        return located.namespace, kind_names
    recorded = await recorded_kinds(client, located, lease_name)
    kinds, warning = kinds_for_verb(
        kind_names, recorded, f"{located.namespace}/{lease_name}", DEFAULT_KINDS
    )
    if warning:
        click.echo(warning, err=True)
    return located.namespace, kinds


def run_verb(coroutine: Coroutine[Any, Any, T], on_interrupt: Callable[[], str] | None = None) -> T:
    """Run ``coroutine``; API and registry errors become CLI errors, and Ctrl-C says
    (``on_interrupt``) what it left behind, exiting 130 like a shell."""
    try:
        return asyncio.run(coroutine)
    except ApiError as error:
        raise click.ClickException(_manager_error(error)) from error
    except workerclusters.RegistryError as error:
        raise click.ClickException(str(error)) from error
    except KeyboardInterrupt:
        if on_interrupt is None:
            raise
        click.echo(on_interrupt(), err=True)
        raise click.exceptions.Exit(130) from None


def _manager_error(error: ApiError) -> str:
    """A refusal or silence of the management cluster, and what to do about it.

    (The workers' errors never get here: `remove` reports them itself.)
    """
    if error.code == 0:
        return unreachable_problem(error)
    if error.code in (401, 403):
        return (
            f"the management cluster refused the request ({error}): `jobrelay clusters` needs "
            "to get, list, watch, patch and delete workerclusters.jobrelay.dev, and to get and "
            "delete Secrets in --namespace; use a kubeconfig with those rights"
        )
    return f"the management cluster answered {error}; run the command again once that is fixed"
