"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from jobrelay.kinds.naming import origin_problem
from jobrelay.kube.api import ApiClient, KubeconfigError


def checked_origin(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: --origin must be a label value ("" or None: not given)."""
    problem = origin_problem(value) if value else None
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def manager_options(func: Any) -> Any:
    """--kubeconfig/--context of the management cluster (default: like kubectl)."""
    func = click.option("--context", default=None, help="Context of the management kubeconfig.")(
        func
    )
    func = click.option(
        "--kubeconfig",
        "kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        envvar="JOBRELAY_KUBECONFIG",
        help="Management cluster kubeconfig [default: $KUBECONFIG, ~/.kube/config, in-cluster].",
    )(func)
    return func


def manager_client(kubeconfig: Path | None, context: str | None) -> ApiClient:
    try:
        if kubeconfig is not None:
            return ApiClient.from_kubeconfig(kubeconfig, context, cluster="manager")
        return ApiClient.from_environment(context, cluster="manager")
    except KubeconfigError as error:
        raise click.ClickException(f"{error} (pass --kubeconfig)") from error
