"""Options several commands share: the app path (positional or kubectl's ``-f/--filename``)
and ``--values``.

``-f`` follows kubectl (the input path), not Helm (a values file): values are ``--values``
only, in every command, so a flag means the same thing wherever it appears.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import click

Command = Callable[..., Any]


def app_path(default: str | None, metavar: str) -> Callable[[Command], Command]:
    """The input path as ``PATH`` or ``-f/--filename PATH`` (one of them, once); the command
    receives it as ``path``."""

    def decorate(func: Command) -> Command:
        @functools.wraps(func)
        def wrapper(*args: Any, path: str | None, filename: tuple[str, ...], **kwargs: Any) -> Any:
            return func(*args, path=chosen_path(path, filename, default, metavar), **kwargs)

        wrapper = click.option("--filename", "-f", "filename", multiple=True, metavar=metavar,
                               help=f"The input, as the {metavar} argument (kubectl's -f).")(wrapper)
        return click.argument("path", required=False, metavar=f"[{metavar}]" if default else metavar)(wrapper)

    return decorate


def chosen_path(path: str | None, filename: tuple[str, ...], default: str | None, metavar: str) -> str:
    """The one input path given; a usage error (exit 2, like any other) when there are two,
    or none without a default."""
    given = ([path] if path is not None else []) + list(filename)
    if len(given) > 1:
        raise click.UsageError(f"one {metavar} only: got {', '.join(given)} (the argument and -f/--filename "
                             "name the same input)")
    if given:
        return given[0]
    if default is None:
        raise click.UsageError(f"missing {metavar}: give it as an argument or with -f/--filename")
    return default


def values_option(help_text: str = "Values file for *.j2 templates (repeatable, later wins).") -> Callable[[Command], Command]:
    """``--values F`` (repeatable; no short form: ``-f`` is the input path)."""
    return click.option("--values", "values", multiple=True, metavar="FILE", help=help_text)
