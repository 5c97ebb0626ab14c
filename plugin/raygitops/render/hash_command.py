"""``raygitops hash``: the template hash of each group of each RayCluster (CLI only)."""

from __future__ import annotations

import json
import sys

import click

from raygitops.cli.failures import guarded
from raygitops.cli.options import app_path, output_option, values_option
from raygitops.errors import RaygitopsError


@click.command("hash")
@app_path(default=None, metavar="FILE|-")
@output_option(["table", "json"], "table", "Print a table, or JSON keyed by namespace/name.")
@values_option()
@guarded
def hash_command(path: str, fmt: str, values: tuple[str, ...]) -> None:
    """Print the template hashes of each RayCluster group."""
    from raygitops.render.pipeline import render_app

    result = render_app(path, cli_values=list(values))
    if not result.clusters:  # an empty table would read as "nothing to hash here, all fine"
        raise RaygitopsError("no RayCluster found", path)
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
