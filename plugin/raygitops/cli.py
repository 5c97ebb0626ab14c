"""The ``raygitops`` command line.

Sub-commands load lazily: ``render`` must not pay for (or even import) the Kubernetes client
the hook needs.  Every user error is one ``path:line: message`` line on stderr and exit 1;
stdout carries only the result, and only once it is complete.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any, Callable

import click

from raygitops import __version__
from raygitops.errors import RaygitopsError

# name -> "module:attribute" of a click command, imported only when invoked or listed.
COMMANDS = {
    "render": "raygitops.cli:render",
    "hash": "raygitops.cli:hash_command",
    "diff": "raygitops.preview.command:diff",
    "presync": "raygitops.presync.command:presync",
    "status": "raygitops.status.command:status",
    "version": "raygitops.cli:version",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._load(name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name and module_name.startswith(err.name):
                return None  # that face of raygitops is not installed in this build
            raise
        return getattr(module, attr)


def fail(err: BaseException) -> None:
    """Report an error as one line and exit non-zero (never a traceback, unless debugging)."""
    if os.environ.get("RAYGITOPS_DEBUG"):
        raise err
    if isinstance(err, RaygitopsError):
        click.echo(f"raygitops: {err}", err=True)
        sys.exit(1)
    # Still exit 1: CI gates on diff's 0 / 3 / 1, and Argo CD only needs non-zero.
    click.echo(f"raygitops: internal error: {type(err).__name__}: {err}".splitlines()[0], err=True)
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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="raygitops")
def main() -> None:
    """Make GitOps changes to KubeRay RayClusters reach their pods."""


@click.command()
@click.argument("path", default=".", metavar="[PATH|-]")
@click.option("--values", "-f", "values", multiple=True, help="Values file for *.j2 templates (repeatable, later wins).")
@click.option("--config", type=str, default=None, help="App config file (default: PATH/raygitops.yaml).")
@click.option("--out", "out_dir", default=None, help="Write one file per object into DIR instead of stdout.")
@click.option("--format", "-o", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@click.option("--namespace", "-n", default=None, help="Namespace of objects that name none.")
@click.option("--hook-image", default=None, help="Image of the PreSync hook Job.")
@click.option("--keep-upgrade-strategy/--move-upgrade-strategy", default=None,
              help="Keep spec.upgradeStrategy (KubeRay >= 1.6) instead of moving it to the annotation.")
@click.option("--kuberay-version", default=None, metavar="VERSION",
              help="The KubeRay operator the app runs on (e.g. 1.6.2): refuse what it would drop.")
# Numbers arrive as text and are checked with every other source's values (raygitops.settings),
# so a bad one is the product's one-line error naming the flag, not a usage error.
@click.option("--drain-grace", "drain_grace_seconds", default=None, metavar="SECONDS")
@click.option("--timeout", "timeout_seconds", default=None, metavar="SECONDS")
@click.option("--max-parallel", default=None, metavar="N")
@click.option("--wait-ready/--no-wait-ready", default=None)
@click.option("--flux", "hook_name_suffix", is_flag=True, default=None,
              help="Name the hook Job after the plan hash (Flux applies Jobs as plain objects).")
@guarded
def render(path: str, values: tuple[str, ...], config: str | None, out_dir: str | None, fmt: str,
           **overrides: Any) -> None:
    """Render an app (directory, file, or - for stdin) with template hashes and hooks."""
    from raygitops.output import json_list, write_out_dir, yaml_stream
    from raygitops.pipeline import render_app

    result = render_app(path, cli_values=list(values), config=config, overrides=overrides)
    for warning in result.warnings:
        click.echo(f"raygitops: warning: {warning}", err=True)
    if out_dir is not None:
        write_out_dir(result.objects, out_dir, result.default_namespace)
        return
    text = json_list(result.objects) if fmt == "json" else yaml_stream(result.objects)
    sys.stdout.write(text)


@click.command()
def version() -> None:
    """Print the raygitops version (the same as --version)."""
    click.echo(f"raygitops, version {__version__}")


@click.command("hash")
@click.argument("path", metavar="FILE|-")
@click.option("--format", "-o", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--values", "-f", "values", multiple=True, help="Values file for *.j2 templates.")
@guarded
def hash_command(path: str, fmt: str, values: tuple[str, ...]) -> None:
    """Print the template hashes of each RayCluster group."""
    from raygitops.pipeline import render_app

    result = render_app(path, cli_values=list(values))
    if fmt == "json":
        data = {c.key: {"strategy": c.plan.strategy, **c.plan.hashes.to_json()} for c in result.clusters}
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return
    rows = [("CLUSTER", "GROUP", "HASH", "STRATEGY")]
    for c in result.clusters:
        for group, value in c.plan.hashes.groups().items():
            rows.append((c.key, group, value, c.plan.strategy))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        sys.stdout.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")
