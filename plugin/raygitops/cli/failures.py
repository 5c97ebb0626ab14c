"""The CLI boundary: every failure of a command becomes one line on stderr and exit 1.

Its own module, so that the commands of ``presync/``, ``preview/`` and ``status/`` do not
import ``raygitops.cli.main`` (which imports them back, lazily).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import click

from raygitops.cli import helmplugin
from raygitops.errors import RaygitopsError


def fail(err: BaseException) -> None:
    """Report an error as one line and exit non-zero (never a traceback, unless debugging)."""
    if os.environ.get("RAYGITOPS_DEBUG"):
        raise err
    if isinstance(err, RaygitopsError):
        lines = [f"raygitops: {line}" for line in err.lines()]
    else:
        lines = [f"raygitops: internal error: {type(err).__name__}: {err}".splitlines()[0]]
    for line in lines:
        click.echo(line, err=True)
    if helmplugin.under_helm_plugin():
        helmplugin.report_error("\n".join(lines))
    # Always exit 1: CI gates on diff's 0 / 3 / 1, and Argo CD and Helm only need non-zero.
    sys.exit(1)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command body, turning every failure into :func:`fail`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt, click.exceptions.Exit, click.ClickException):
            raise
        except BaseException as err:  # noqa: BLE001 - the CLI boundary
            fail(err)

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper
