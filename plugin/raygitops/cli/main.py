"""The ``raygitops`` command line.

Sub-commands load lazily: ``render`` must not pay for (or even import) the Kubernetes client
the hook needs.  Every user error is one ``path:line: message`` line on stderr and exit 1;
stdout carries only the result, and only once it is complete.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click
from click.shell_completion import CompletionItem

from raygitops import __version__
from raygitops.cli.failures import fail
from raygitops.cli.options import output_option
from raygitops.errors import RaygitopsError

# name -> "module:attribute" of a click command, imported only when invoked or listed.
COMMANDS = {
    "render": "raygitops.render.command:render",
    "hash": "raygitops.render.hash_command:hash_command",
    "diff": "raygitops.preview.command:diff",
    "presync": "raygitops.presync.command:presync",
    "status": "raygitops.status.command:status",
    "version": "raygitops.cli.main:version",
    "completion": "raygitops.cli.main:completion",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    @staticmethod
    def description(command: click.Command) -> str:
        """A command's first sentence, whole: click cuts it to the terminal's width in the
        help and to 45 characters in zsh's and fish's completion."""
        return command.get_short_help_str(limit=sys.maxsize)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, self.description(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        items = super().shell_complete(ctx, incomplete)
        commands = {item.value: self.get_command(ctx, item.value) for item in items if item.value in COMMANDS}
        return [CompletionItem(item.value, type=item.type, help=self.description(commands[item.value]))
                if commands.get(item.value) is not None else item for item in items]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except ImportError as err:  # a broken install: say so, never "No such command"
            return _unavailable(name, err)


def _unavailable(name: str, err: ImportError) -> click.Command:
    """A command whose module cannot be imported: running it is the one-line error."""
    reason = f"raygitops {name} cannot start: {type(err).__name__}: {err} (reinstall raygitops with its dependencies)"

    def run(**_: Any) -> None:
        fail(RaygitopsError(reason))

    return click.Command(name, callback=run, help=f"(unavailable: {err})", context_settings={
        "ignore_unknown_options": True, "allow_extra_args": True})


# Every RAYGITOPS_* variable the product reads (README "Environment"; a unit test keeps the
# list complete), shown by `raygitops --help`.
ENVIRONMENT = {
    "RAYGITOPS_DEBUG": "set: an error raises with its traceback instead of the one-line message",
    "RAYGITOPS_HOOK_IMAGE": "render: the hook Job's image when hook.image is not set (default raygitops:<version>)",
    "RAYGITOPS_TEMPLATE_SECONDS": "CPU seconds a Jinja2 template may take (default 30)",
    "RAYGITOPS_TEMPLATE_MEMORY_MB": "memory a Jinja2 template may use (default 1024)",
    "RAYGITOPS_TEST_PAUSE_AT": "tests only: the hook sleeps at this recreate step (docs/presync.md)",
    "RAYGITOPS_TEST_PAUSE_SECONDS": "tests only: how long (default 120)",
}


@click.group(cls=LazyGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="\b\nEnvironment:\n" + "\n".join(f"  {k:30} {v}" for k, v in ENVIRONMENT.items())
             + "\n\n\b\nShell completion, e.g. for bash:\n"
             + "  source <(raygitops completion bash)")
@click.version_option(__version__, prog_name="raygitops")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Make GitOps changes to KubeRay RayClusters reach their pods."""
    if ctx.invoked_subcommand is None:  # a bare `raygitops`: the help, exit 0 (as kubectl and helm)
        click.echo(ctx.get_help())


@click.command()
@output_option(["text", "json"], "text", "Print a line of text, or a JSON object.")
def version(fmt: str) -> None:
    """Print the raygitops version (the same as --version)."""
    if fmt == "json":
        click.echo(json.dumps({"version": __version__}))
    else:
        click.echo(f"raygitops, version {__version__}")


SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (bash: `source <(raygitops completion bash)`)."""
    from click.shell_completion import get_completion_class

    complete = get_completion_class(shell)(main, {}, "raygitops", "_RAYGITOPS_COMPLETE")
    click.echo(complete.source())
