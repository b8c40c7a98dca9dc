"""One error style for every command, kubectl's: ``error: what is wrong`` on one line of
stderr, lowercase, with where help is for a usage error; never click's ``Error:`` nor
its usage block.

Said once here: :func:`install` makes click's own exceptions show themselves so (the
package's ``__init__`` calls it, so that every command, however it is invoked, speaks
the same), and ``main`` prints its own errors through :func:`error_line`.
"""

from __future__ import annotations

import typing as t

import click

__all__ = ["error_line", "install", "usage_error_line"]


def error_line(message: str) -> str:
    """``error: message``, its first word lowercased when it is a plain capitalised word
    (click's ``Invalid value``, ``No such option``), never a name (``RayJob``, ``API``)."""
    message = message.strip()
    if message.lower().startswith("error: "):
        message = message[len("error: ") :]
    first, _, _ = message.partition(" ")
    if first[:1].isupper() and first[1:].islower():
        message = first.lower() + message[len(first) :]
    return f"error: {message}"


def usage_error_line(message: str, command_path: str | None) -> str:
    """A usage error's one line, with where help is (kubectl's ``See '... --help'``)."""
    if not command_path:
        return error_line(message)
    return f"{error_line(message).rstrip('.')} (see '{command_path} --help')"


def _show(self: click.ClickException, file: t.IO[t.Any] | None = None) -> None:
    click.echo(error_line(self.format_message()), err=file is None, file=file)


def _show_usage(self: click.UsageError, file: t.IO[t.Any] | None = None) -> None:
    path = self.ctx.command_path if self.ctx is not None else None
    click.echo(usage_error_line(self.format_message(), path), err=file is None, file=file)


def install() -> None:
    """Make click's exceptions speak as kubectl does (idempotent)."""
    click.ClickException.show = _show  # type: ignore[method-assign]
    click.UsageError.show = _show_usage  # type: ignore[method-assign]
