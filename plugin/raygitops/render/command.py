"""``raygitops render``: an app to manifests with template hashes and the PreSync hook (CLI
only; the work is in :mod:`raygitops.render.pipeline` and :mod:`raygitops.render.output`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from raygitops.cli import helmplugin
from raygitops.cli.failures import guarded
from raygitops.cli.options import OutputDir, app_path, kuberay_version_option, output_option, renamed, \
    running_jobs_option, values_option
from raygitops.errors import RaygitopsError
from raygitops.model.plan import HookSettings

if TYPE_CHECKING:
    from raygitops.render.renderer import RenderResult


@click.command()
@app_path(default=".", metavar="PATH|-")
@values_option()
@click.option("--config", type=str, default=None, help="App config file (default: PATH/raygitops.yaml).")
@output_option(["yaml", "json"], "yaml", "Print a YAML stream, or one JSON v1/List.")
@click.option("--output-dir", "out_dir", type=OutputDir(), default=None, metavar="DIR",
              help="Write one YAML file per object into DIR (<namespace>/<kind>-<name>.yaml) instead of "
                   "printing them (as helm template does).")
@renamed("--out", "--output-dir", "out_dir", type=OutputDir(), metavar="DIR")
@click.option("--template", "template_stdin", is_flag=True,
              help="Template stdin with Jinja2 like a *.j2 file (values from --values); off: a helm or "
                   "kustomize stream may hold {{ }} of its own.")
@click.option("--plan-out", "plan_dir", type=OutputDir(), default=None, metavar="DIR",
              help="Also write each namespace's hook plan to DIR/<namespace>.json (for `raygitops presync --plan`).")
@click.option("--namespace", "-n", default=None, help="Namespace of every namespaced object that names none.")
@click.option("--hook-image", default=None, help="Image of the PreSync hook Job.")
@click.option("--keep-upgrade-strategy/--move-upgrade-strategy", default=None,
              help="Keep spec.upgradeStrategy (KubeRay >= 1.6) instead of moving it to the annotation.")
@kuberay_version_option("The KubeRay operator the app runs on (e.g. 1.6.2): refuse what it would drop.")
# Numbers arrive as text and are checked with every other source's values (raygitops.sources.settings),
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
@running_jobs_option("Hook: running Ray jobs, for clusters whose annotation does not say: wait (default), fail "
                     "or proceed.")
@click.option("--running-jobs-wait-seconds", default=None, metavar="SECONDS",
              help="Hook: the longest wait for running Ray jobs (default: as long as its timeout allows).")
@click.option("--preflight/--no-preflight", default=None,
              help="Hook: check that the new pods can come up before it takes a cluster down (yes).")
@click.option("--preflight-unknown", default=None, metavar="POLICY",
              help="Hook: a preflight check it cannot make (RBAC, no node visible): fail (default) or proceed.")
@click.option("--app-name", default=None, metavar="NAME",
              help="The app the hook objects are for, named after it so apps sharing a namespace never collide "
                   "(default: $ARGOCD_APP_NAME; give the Helm release or the Flux Kustomization).")
@click.option("--flux", "hook_name_suffix", is_flag=True, default=None,
              help="Name the hook Job after the plan hash (Flux and Helm 3 apply Jobs as plain objects).")
@click.option("--helm", is_flag=True, default=None,
              help="Helm's post-renderer: Helm hooks instead of Argo CD's, and objects that name no "
                   "namespace left to Helm (the release namespace).")
@guarded
def render(path: str, values: tuple[str, ...], config: str | None, out_dir: str | None, fmt: str,
           template_stdin: bool, plan_dir: str | None, **overrides: Any) -> None:
    """Render an app (directory, file, or - for stdin) with template hashes and hooks."""
    from raygitops.render.output import json_list, write_out_dir, write_yaml_stream
    from raygitops.render.pipeline import start_render

    if overrides.get("helm") and out_dir is not None:
        raise click.UsageError("--helm renders Helm's post-renderer stream: it does not go with --output-dir")
    if out_dir is not None and fmt != "yaml":
        raise click.UsageError(f"--output-dir writes YAML files: -o {fmt} prints instead (give one of them)")
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
    from raygitops.render.output import write_plans

    for warning in result.warnings:
        click.echo(f"raygitops: warning: {warning}", err=True)
        if helmplugin.under_helm_plugin():
            helmplugin.to_terminal(f"raygitops: warning: {warning}")
    if helmplugin.under_helm_plugin():
        helmplugin.clear_error()
    if plan_dir is not None:
        write_plans(result.plans, plan_dir)
