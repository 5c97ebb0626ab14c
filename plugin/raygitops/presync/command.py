"""``raygitops presync``: the CLI of the PreSync hook (flags only; the work is in ``run``).

Exit codes: 0 nothing to do or every cycle done; 1 a cluster failed or was deferred, the run
was stopped by SIGTERM/SIGINT, or a user error (bad plan, no credentials, API unreachable; one
line on stderr); 2 internal error.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING

import click

from raygitops.model import convert
from raygitops.cli.failures import guarded
from raygitops.cli.options import output_option
from raygitops.errors import RaygitopsError
from raygitops.model.plan import with_secrets
from raygitops.presync.planfiles import load_plan, load_secrets
from raygitops.model.names import FAILURE_ANNOTATION

if TYPE_CHECKING:
    from raygitops.kube.client import Kube
    from raygitops.presync.logs import Log

FAILURE_MAX_CHARS = 1000


@click.command()
@click.option("--plan", "-f", "--filename", "plan_paths", multiple=True, required=True, metavar="FILE",
              help="Plan file (plan.json, or plan.json.gz beside it). Repeat for several namespaces.")
@click.option("--secrets", "secrets_paths", multiple=True, metavar="FILE",
              help="Secrets file (secrets.json of the hook's Secret): the content of the Secrets a plan "
                   "names. Required when a plan names Secrets.")
@click.option("--kubeconfig", default=None, help="Kubeconfig file (default: in-cluster credentials in a pod, "
              "else $KUBECONFIG / ~/.kube/config).")
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option("--dry-run", is_flag=True, help="Report what would happen; change nothing.")
@click.option("--timeout", type=click.IntRange(*convert.TIMEOUT_SECONDS), default=None, help="Seconds for the whole run [plan].")
@click.option("--drain-grace", type=click.IntRange(*convert.DRAIN_GRACE_SECONDS), default=None,
              help="Seconds to wait for the operator to delete the pods before deleting them directly [plan].")
@click.option("--max-parallel", type=click.IntRange(*convert.MAX_PARALLEL), default=None, help="Clusters recreated at once [plan].")
@click.option("--wait-ready/--no-wait-ready", default=None, help="Wait until the new pods are ready [plan].")
@output_option(["text", "json"], "text", "The report on stdout and the log lines on stderr as text, or as JSON "
               "(the hook Job's; --log-format is its name there).", old=None, also=["--log-format"])
@click.option("--lease-seconds", type=click.IntRange(min=1), default=60, show_default=True,
              help="Lease of the recreate lock: a lock not renewed for this long is taken over.")
@click.option("--namespace", "-n", default=None,
              help="Namespace of a plan that names none (rendered with --helm). Default: the hook pod's own.")
@click.option("--job", default=None, metavar="NAME",
              help="This hook's own Job (in the plan's namespace): a failed run writes its reason on it "
                   f"({FAILURE_ANNOTATION}), where Argo CD's health check shows it.")
@guarded
def presync(plan_paths: tuple[str, ...], secrets_paths: tuple[str, ...], kubeconfig: str | None,
            context: str | None, dry_run: bool, timeout: int | None, drain_grace: int | None,
            max_parallel: int | None, wait_ready: bool | None, fmt: str, lease_seconds: int,
            namespace: str | None, job: str | None) -> None:
    """PreSync hook: recreate the pods of drifted, opted-in RayClusters."""
    from raygitops.kube.credentials import load_credentials, own_namespace
    from raygitops.kube.client import ApiError, Kube
    from raygitops.presync.logs import RUN, Log
    from raygitops.presync.run import RunOptions, run

    plans = with_secrets([load_plan(p) for p in plan_paths], [(p, *load_secrets(p)) for p in secrets_paths])
    if any(p.namespace is None for p in plans):
        source, value = ("--namespace", namespace) if namespace is not None else ("the pod's namespace", own_namespace())
        try:
            here = convert.namespace(value)
        except ValueError as err:
            raise RaygitopsError(f"{source}: {err}") from None
        plans = [p if p.namespace else dataclasses.replace(p, namespace=here) for p in plans]
    namespaces = [p.namespace for p in plans]
    if len(set(namespaces)) != len(namespaces):
        raise RaygitopsError(f"two plans for one namespace: {', '.join(namespaces)}")
    if job is not None and len(plans) != 1:
        raise RaygitopsError("--job names the Job of one plan's namespace: give one --plan")
    settings = plans[0].settings
    opts = RunOptions(
        timeout=timeout if timeout is not None else settings.timeout_seconds,
        drain_grace=drain_grace if drain_grace is not None else settings.drain_grace_seconds,
        max_parallel=max_parallel if max_parallel is not None else settings.max_parallel,
        wait_ready=wait_ready if wait_ready is not None else settings.wait_ready,
        dry_run=dry_run,
        lease_seconds=lease_seconds,
    )
    log = Log(fmt)
    log.info(RUN, "start", f"raygitops presync{' (dry run)' if dry_run else ''}: "
             f"{sum(len(p.clusters) for p in plans)} clusters in {', '.join(namespaces)}",
             timeout=opts.timeout, drainGrace=opts.drain_grace, maxParallel=opts.max_parallel,
             waitReady=opts.wait_ready)
    kube = Kube(load_credentials(kubeconfig, context), pool_size=opts.max_parallel * 2 + 4, deadline=opts.deadline)
    stop_on_signals(opts.stop)
    try:
        report = run(kube, plans, opts, log)
    except ApiError as err:
        raise RaygitopsError(f"Kubernetes API: {err}") from None
    if opts.stop.is_set():
        report.interrupted = True
    log.emit("error" if report.failed else "info", RUN, "summary", report.line())
    if report.failed and job is not None and not dry_run:
        record_failure(kube, namespaces[0], job, report.failure_reason(), log)
    if fmt == "json":
        sys.stdout.write(json.dumps(report.to_json(), sort_keys=True) + "\n")
    else:
        sys.stdout.write(f"raygitops presync: {report.line()}\n")
    sys.stdout.flush()
    sys.exit(1 if report.failed else 0)


def record_failure(kube: "Kube", namespace: str, job: str, reason: str, log: "Log") -> None:
    """Write the run's one-line failure reason on its own Job, before the pod exits (so before
    the Job turns Failed): Argo CD's health check for raygitops' Job (argocd/health/job.lua)
    shows it as the hook's message. Best effort: the exit status alone fails the sync."""
    from raygitops.kube.client import ApiError
    from raygitops.presync.logs import RUN

    text = reason if len(reason) <= FAILURE_MAX_CHARS else reason[:FAILURE_MAX_CHARS - 3] + "..."
    try:
        kube.annotate_job(namespace, job, {FAILURE_ANNOTATION: text})
    except ApiError as err:
        log.warn(RUN, "summary", f"could not write the failure reason on Job {namespace}/{job}: {err}")


def stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM (Argo CD ending the sync, the Job's deadline, a node drain) and SIGINT ask the
    run to stop: no new step starts, every cluster this run suspended is resumed, the locks
    are released, and the exit status is 1 (the pod's terminationGracePeriodSeconds leaves
    room for it).  The handler only sets the event: it may run while a thread holds the
    log's lock."""

    def handler(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
