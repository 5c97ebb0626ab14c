"""``raygitops status``: Git against the live cluster (CLI only; the work is in the siblings).

Exit codes: 0 every RayCluster in sync; 3 at least one is not (drifted, stale, failed, in
progress, suspended, absent...); 1 a user error (the app does not render, no credentials, API
unreachable) with one line on stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from raygitops.cli.failures import guarded
from raygitops.cli.options import app_path, kuberay_version_option, output_option, values_option
from raygitops.errors import RaygitopsError

EXIT_NOT_IN_SYNC = 3


@click.command()
@app_path(default=".", metavar="APP")
@values_option()
@click.option("--kubeconfig", default=None, help="Kubeconfig file (default: $KUBECONFIG / ~/.kube/config).")
@click.option("--context", default=None, help="Kubeconfig context.")
@output_option(["text", "markdown", "json"], "text", "Print the report as text, markdown or JSON.")
@click.option("--namespace", "-n", default=None, help="As for render: namespace of objects that name none.")
@click.option("--keep-upgrade-strategy/--move-upgrade-strategy", default=None, help="As for render.")
@kuberay_version_option("As for render.")
@guarded
def status(path: str, values: tuple[str, ...], kubeconfig: str | None, context: str | None, fmt: str,
           **overrides: Any) -> None:
    """Compare the app at APP (as render renders it) with the live cluster, per RayCluster."""
    from raygitops.render.pipeline import render_app
    from raygitops.kube.credentials import load_credentials
    from raygitops.kube.client import ApiError, Kube
    from raygitops.status import report
    from raygitops.status.live import statuses

    result = render_app(path, cli_values=list(values), overrides=overrides)
    kube = Kube(load_credentials(kubeconfig, context))
    try:
        found = statuses(kube, result)
    except ApiError as err:
        raise RaygitopsError(f"Kubernetes API: {err}") from None
    formatter = {"text": report.text, "markdown": report.markdown, "json": report.as_json}[fmt]
    sys.stdout.write(formatter(path, found))
    sys.stdout.flush()
    if any(s.state != "in-sync" for s in found):
        sys.exit(EXIT_NOT_IN_SYNC)
