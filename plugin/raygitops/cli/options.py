"""Options several commands share: the app path (positional or kubectl's ``-f/--filename``),
``--values``, ``-o/--output``, the directories a command writes, the old spellings kept for
one release, and the values shell completion offers.

``-f`` follows kubectl (the input path), not Helm (a values file): values are ``--values``
only, in every command, so a flag means the same thing wherever it appears.  ``-o/--output``
is the format of what a command prints, as in kubectl and ``helm ... -o``; a directory a
command writes is a ``--...-dir`` or ``--...-out`` option (helm template's ``--output-dir``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import click
from click.core import ParameterSource
from click.shell_completion import CompletionItem

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


# Every value of every command's -o/--output: a directory option refuses these names, the
# mistake of a format given where a directory is asked for (`render --out json`).
FORMATS = ("yaml", "json", "text", "markdown", "table")


def deprecated(old: str, new: str) -> None:
    """The one line an old spelling costs (on stderr: stdout carries only the result)."""
    click.echo(f"raygitops: warning: {old} is deprecated and goes in the next release: use {new}", err=True)


def renamed(old: str, new: str, dest: str, **option: Any) -> Callable[[Command], Command]:
    """``old``, the former name of the option ``new`` (which the command receives as
    ``dest``): accepted for one release, hidden from ``--help``, with a :func:`deprecated`
    line; both given is a usage error (exit 2)."""
    hidden = f"{dest}_{old.lstrip('-').replace('-', '_')}"

    def decorate(func: Command) -> Command:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden)
            if value is not None:
                if click.get_current_context().get_parameter_source(dest) is ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"{old} is the old name of {new}: give {new} only")
                deprecated(old, new)
                kwargs[dest] = value
            return func(*args, **kwargs)

        return click.option(old, hidden, hidden=True, default=None,
                            help=f"Deprecated: the old name of {new}.", **option)(wrapper)

    return decorate


def output_option(choices: Sequence[str], default: str, help_text: str, *, old: str | None = "--format",
                  also: Sequence[str] = ()) -> Callable[[Command], Command]:
    """``-o/--output FORMAT`` (kubectl's and helm's), received as ``fmt``; ``old``, its
    former name, still works for one release.  ``also``: further names that stay (presync's
    ``--log-format``, which the hook Jobs rendered by other versions pass)."""
    unknown = set(choices) - set(FORMATS)
    if unknown:
        raise ValueError(f"-o/--output {sorted(unknown)}: add them to FORMATS")
    choice = click.Choice(list(choices))

    def decorate(func: Command) -> Command:
        if old is not None:
            func = renamed(old, "-o/--output", "fmt", type=choice)(func)
        return click.option("--output", "-o", *also, "fmt", type=choice, default=default, show_default=True,
                            help=help_text)(func)

    return decorate


class OutputDir(click.Path):
    """A directory a command writes into: never a format name (``render --output-dir json``
    meant ``-o json``: a usage error, and nothing is written).  ``./json`` is such a
    directory, said so."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, dir_okay=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value in FORMATS:
            self.fail(f"{value!r} is an output format, not a directory: to print {value}, use -o {value} "
                      f"(a directory named {value}: ./{value})", param, ctx)
        return super().convert(value, param, ctx)


def _offer(values: Callable[[], Sequence[str]]) -> Callable[[click.Context, click.Parameter, str], list[CompletionItem]]:
    """A ``shell_complete`` offering ``values()`` (read when completing, not at import)."""

    def complete(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        return [CompletionItem(v) for v in values() if v.startswith(incomplete)]

    return complete


def _kuberay_versions() -> list[str]:
    from raygitops.model import crdschema

    return list(crdschema.SCHEMAS)


def _running_jobs_policies() -> list[str]:
    from raygitops.model import jobs

    return list(jobs.POLICIES)


def kuberay_version_option(help_text: str) -> Callable[[Command], Command]:
    """``--kuberay-version VERSION``; completion offers the KubeRay lines raygitops ships the
    CRD schema of (the setting itself is checked with the app's other settings)."""
    return click.option("--kuberay-version", default=None, metavar="VERSION", help=help_text,
                        shell_complete=_offer(_kuberay_versions))


def running_jobs_option(help_text: str) -> Callable[[Command], Command]:
    """``--running-jobs POLICY``; completion offers the policies (checked with the app's
    other settings, as the annotation and the Argo CD parameter are)."""
    return click.option("--running-jobs", default=None, metavar="POLICY", help=help_text,
                        shell_complete=_offer(_running_jobs_policies))
