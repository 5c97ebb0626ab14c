"""The ``raygitops`` command line.

Sub-commands load lazily: ``render`` must not pay for (or even import) the Kubernetes client
the hook needs.  Every user error is one ``path:line: message`` line on stderr and exit 1;
stdout carries only the result, and only once it is complete.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from raygitops import __version__, helmplugin
from raygitops.clierrors import fail, guarded
from raygitops.cliopts import app_path, values_option
from raygitops.errors import RaygitopsError
from raygitops.plan import HookSettings

if TYPE_CHECKING:
    from raygitops.render import RenderResult

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
        return sorted(COMMANDS)

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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="\b\nEnvironment:\n" + "\n".join(f"  {k:30} {v}" for k, v in ENVIRONMENT.items())
             + "\n\n\b\nShell completion (click's), e.g. for bash:\n"
             + "  eval \"$(_RAYGITOPS_COMPLETE=bash_source raygitops)\"")
@click.version_option(__version__, prog_name="raygitops")
def main() -> None:
    """Make GitOps changes to KubeRay RayClusters reach their pods."""


@click.command()
@app_path(default=".", metavar="PATH|-")
@values_option()
@click.option("--config", type=str, default=None, help="App config file (default: PATH/raygitops.yaml).")
@click.option("--out", "out_dir", default=None, help="Write one file per object into DIR instead of stdout.")
@click.option("--format", "-o", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="A YAML stream, or one JSON v1/List.")
@click.option("--template", "template_stdin", is_flag=True,
              help="Template stdin with Jinja2 like a *.j2 file (values from --values); off: a helm or "
                   "kustomize stream may hold {{ }} of its own.")
@click.option("--plan-out", "plan_dir", default=None, metavar="DIR",
              help="Also write each namespace's hook plan to DIR/<namespace>.json (for `raygitops presync --plan`).")
@click.option("--namespace", "-n", default=None, help="Namespace of objects that name none.")
@click.option("--hook-image", default=None, help="Image of the PreSync hook Job.")
@click.option("--keep-upgrade-strategy/--move-upgrade-strategy", default=None,
              help="Keep spec.upgradeStrategy (KubeRay >= 1.6) instead of moving it to the annotation.")
@click.option("--kuberay-version", default=None, metavar="VERSION",
              help="The KubeRay operator the app runs on (e.g. 1.6.2): refuse what it would drop.")
# Numbers arrive as text and are checked with every other source's values (raygitops.settings),
# so a bad one is the product's one-line error naming the flag, not a usage error.
@click.option("--drain-grace", "drain_grace_seconds", default=None, metavar="SECONDS",
              help="Hook: seconds for the operator to delete the pods before the hook deletes them "
                   f"({HookSettings.drain_grace_seconds}).")
@click.option("--timeout", "timeout_seconds", default=None, metavar="SECONDS",
              help=f"Hook: seconds before it gives up on a cluster ({HookSettings.timeout_seconds}).")
@click.option("--max-parallel", default=None, metavar="N",
              help=f"Hook: clusters recreated at once ({HookSettings.max_parallel}).")
@click.option("--wait-ready/--no-wait-ready", default=None,
              help=f"Hook: wait until the new pods are ready ({'yes' if HookSettings.wait_ready else 'no'}).")
@click.option("--flux", "hook_name_suffix", is_flag=True, default=None,
              help="Name the hook Job after the plan hash (Flux and Helm 3 apply Jobs as plain objects).")
@click.option("--helm", is_flag=True, default=None,
              help="Helm's post-renderer: Helm hooks instead of Argo CD's, and objects that name no "
                   "namespace left to Helm (the release namespace).")
@guarded
def render(path: str, values: tuple[str, ...], config: str | None, out_dir: str | None, fmt: str,
           template_stdin: bool, plan_dir: str | None, **overrides: Any) -> None:
    """Render an app (directory, file, or - for stdin) with template hashes and hooks."""
    from raygitops.output import json_list, write_out_dir, write_yaml_stream
    from raygitops.pipeline import start_render

    if overrides.get("helm") and out_dir is not None:
        raise RaygitopsError("--helm renders Helm's post-renderer stream: it does not go with --out")
    if template_stdin and path != "-":
        raise RaygitopsError("--template is for stdin (-): files ending in .j2 are templated already")
    # The YAML stream is dumped object by object as the app is read (one file's documents in
    # memory at a time); the other outputs need every object first.
    streamed = out_dir is None and fmt != "json"
    render = start_render(path, cli_values=list(values), config=config, overrides=overrides,
                          template_stdin=template_stdin, keep=not streamed)
    if streamed:
        write_yaml_stream(render.objects(), sys.stdout, before=lambda: _rendered(render.result, plan_dir))
        return
    result = render.collect()
    _rendered(result, plan_dir)
    if out_dir is not None:
        write_out_dir(result.objects, out_dir, result.default_namespace)
    else:
        sys.stdout.write(json_list(result.objects))


def _rendered(result: RenderResult, plan_dir: str | None) -> None:
    """A render succeeded: its warnings to stderr (and Helm's terminal), its plans to
    ``--plan-out``; the objects are written next."""
    from raygitops.output import write_plans

    for warning in result.warnings:
        click.echo(f"raygitops: warning: {warning}", err=True)
        if helmplugin.under_helm_plugin():
            helmplugin.to_terminal(f"raygitops: warning: {warning}")
    if helmplugin.under_helm_plugin():
        helmplugin.clear_error()
    if plan_dir is not None:
        write_plans(result.plans, plan_dir)


@click.command()
def version() -> None:
    """Print the raygitops version (the same as --version)."""
    click.echo(f"raygitops, version {__version__}")


@click.command("hash")
@app_path(default=None, metavar="FILE|-")
@click.option("--format", "-o", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="A table, or JSON keyed by namespace/name.")
@values_option()
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
