"""Options and helpers shared by the CLI commands.

Defining a command's options imports nothing heavy: the API client (aiohttp, lightkube,
httpx2) is imported when a command runs, so that `jobrelay CMD --help` starts at once.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.shell_completion import CompletionItem

from jobrelay.vocabulary.names import origin_problem

if TYPE_CHECKING:
    from jobrelay.kube.client import ApiClient
    from jobrelay.kube.errors import ApiError

T = TypeVar("T")


def checked_origin(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: --origin must be a label value ("" or None: not given)."""
    problem = origin_problem(value) if value else None
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def checked_kind_names(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """A ``--kind`` callback: each value must be ``Kind.version.group[=managedBy]`` (exit 2
    otherwise)."""
    from jobrelay.kinds import KindError  # imported when a command runs, not at start-up
    from jobrelay.kinds.managed_by_claims import parse_kind_flag

    for value in values:
        try:
            parse_kind_flag(value)
        except KindError as error:
            raise click.BadParameter(str(error)) from error
    return values


def checked_field_flags(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """A ``--managed-by-field`` callback: ``Kind.version.group=FIELD``, FIELD a known place."""
    from jobrelay.kinds import KindError
    from jobrelay.kinds.managed_by_claims import parse_field_flag

    for value in values:
        try:
            parse_field_flag(value)
        except KindError as error:
            raise click.BadParameter(str(error)) from error
    return values


def manager_options(func: Any) -> Any:
    """--kubeconfig/--context of the management cluster (default: like kubectl)."""
    return _manager_flags(
        func,
        envvar="JOBRELAY_KUBECONFIG",
        default_help="$KUBECONFIG, ~/.kube/config, in-cluster",
    )


def _manager_flags(func: Any, *, envvar: str | None, default_help: str) -> Any:
    func = click.option("--context", default=None, help="Context of the management kubeconfig.")(
        func
    )
    return click.option(
        "--kubeconfig",
        "kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        envvar=envvar,
        help=f"Management cluster kubeconfig [default: {default_help}].",
    )(func)


def manager_client(kubeconfig: Path | None, context: str | None) -> ApiClient:
    from jobrelay.kube.client import ApiClient
    from jobrelay.kube.errors import KubeconfigError

    try:
        if kubeconfig is not None:
            return ApiClient.from_kubeconfig(kubeconfig, context, cluster="manager")
        return ApiClient.from_environment(context, cluster="manager")
    except KubeconfigError as error:
        raise click.ClickException(kubeconfig_problem(error)) from None


def kubeconfig_problem(error: BaseException) -> str:
    """A kubeconfig that cannot be used, and what to do about it, in one line."""
    text = str(error)
    if "context is not in the kubeconfig" in text:
        return f"{text}: pick one that `kubectl config get-contexts` lists with --context"
    if "--kubeconfig" in text:
        return text
    return f"{text} (pass --kubeconfig, or --context)"


def manager_flags_options(func: Any) -> Any:
    """--kubeconfig/--context of the management cluster on a subcommand of a group that has
    them too: the subcommand's win (:func:`given_manager_flags`). No $JOBRELAY_KUBECONFIG
    here: the group reads it, and a variable must not outrank the group's own flags."""
    return _manager_flags(
        func, envvar=None, default_help="the group's, $KUBECONFIG, ~/.kube/config, in-cluster"
    )


def given_manager_flags(
    ctx: click.Context, names: tuple[str, ...] = ("manager_kubeconfig", "kubeconfig")
) -> tuple[Path | None, str | None]:
    """The manager's kubeconfig and context for a command: the innermost command that was
    given each flag on the command line (a subcommand before its group), else the
    innermost value at all (an environment variable's, a default)."""
    chain = []
    current: click.Context | None = ctx
    while current is not None:
        chain.append(current)
        current = current.parent
    return _innermost(chain, names), _innermost(chain, ("context",))


def _innermost(chain: list[click.Context], names: tuple[str, ...]) -> Any:
    from click.core import ParameterSource

    for level in chain:
        for name in names:
            if level.get_parameter_source(name) is ParameterSource.COMMANDLINE:
                return level.params[name]
    for level in chain:
        for name in names:
            if level.params.get(name) is not None:
                return level.params[name]
    return None


# Exit codes scripts can rely on: 0 done, 1 the apiserver refused or could not be reached
# (or anything else went wrong), 2 a wrong flag or argument (click's own), and:
EXIT_NOT_FOUND = 3  # the named object does not exist


class NotFound(click.ClickException):
    """The object named on the command line does not exist (exit 3)."""

    exit_code = EXIT_NOT_FOUND


def api_failure(error: ApiError) -> click.ClickException:
    """An apiserver's answer as a CLI error: 404 exits 3, anything else 1."""
    if error.is_not_found:
        return NotFound(error.message or str(error))
    if error.code == 0:
        return click.ClickException(unreachable_problem(error))
    return click.ClickException(f"the management cluster answered {error}")


def unreachable_problem(error: ApiError) -> str:
    """``cannot connect to https://127.0.0.1:1 (connection refused)``, and what to do."""
    server = error.details.get("server") or "the management cluster"
    cause = error.details.get("cause") or error.message
    return (
        f"cannot connect to {server} ({cause}): check --kubeconfig and --context, and that "
        "its apiserver is up"
    )


EXIT_INTERRUPTED = 130  # Ctrl-C (a watch, `top`), as a shell reports it


def run_command(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine: API errors become CLI errors with their exit code (the
    first one, out of a task group too), Ctrl-C exits 130 quietly."""
    import asyncio

    from jobrelay.kube.errors import ApiError, KubeconfigError

    try:
        return asyncio.run(coroutine)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    except BaseExceptionGroup as group:
        raise _cli_error(_first_leaf(group)) from None
    except (ApiError, KubeconfigError) as error:
        raise _cli_error(error) from None


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _cli_error(error: BaseException) -> BaseException:
    from jobrelay.kube.errors import ApiError, KubeconfigError

    if isinstance(error, KeyboardInterrupt):
        return click.exceptions.Exit(EXIT_INTERRUPTED)
    if isinstance(error, ApiError):
        return api_failure(error)
    if isinstance(error, KubeconfigError):
        return click.ClickException(kubeconfig_problem(error))
    return error


def kubeconfig_namespace(kubeconfig: Path | None, context: str | None) -> str:
    """The namespace kubectl would use: the context's (``$KUBECONFIG``'s files merged), in
    a pod its own, else ``default``."""
    from jobrelay.kube.connecting import context_namespace

    return context_namespace(kubeconfig, context) or "default"


def namespace_options(func: Any) -> Any:
    """-n/--namespace and -A/--all-namespaces, as kubectl spells them."""
    func = click.option(
        "-A", "--all-namespaces", is_flag=True, help="Every namespace (overrides -n)."
    )(func)
    func = click.option(
        "-n", "--namespace", default=None, shell_complete=complete_namespaces,
        help="The namespace [default: the kubeconfig context's, else default].",
    )(func)  # fmt: skip
    return func


def complete_namespaces(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of -n: the manager's namespaces (nothing when it cannot be asked)."""
    params = ctx.params

    async def names() -> list[str]:
        from jobrelay.kube.resources import NAMESPACES

        async with manager_client(params.get("kubeconfig"), params.get("context")) as client:
            listed = await client.list(NAMESPACES)
        return [obj["metadata"]["name"] for obj in listed.items]

    return [CompletionItem(name) for name in _completions(names) if name.startswith(incomplete)]


def _completions(fetch: Callable[[], Coroutine[Any, Any, list[str]]]) -> list[str]:
    import asyncio

    from jobrelay.kube.errors import ApiError, KubeconfigError

    try:
        return asyncio.run(asyncio.wait_for(fetch(), _COMPLETION_TIMEOUT))
    except (ApiError, KubeconfigError, click.ClickException, TimeoutError, OSError):
        return []


_COMPLETION_TIMEOUT = 3.0
