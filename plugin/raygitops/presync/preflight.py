"""The cycle's ``preflight`` step: before the suspend (or, under ReplaceGroups, the first
deletion), look up live what the new pods need and let :mod:`raygitops.model.preflight`
judge it (docs/presync.md, "Preflight"). This module only reads and words.

It runs with our lock held in phase ``locked``, after the jobs step; a failed check raises
:class:`PreflightFailed`, after which the lock is dropped and nothing else was touched.
``raygitops status`` gathers alike (:func:`gather`), changing nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from raygitops.kube.client import ApiError
from raygitops.model import preflight as model
from raygitops.model.configrefs import CONFIGMAP, SECRET
from raygitops.presync import events
from raygitops.presync.context import Context, State, Untouched

# kind -> (API path, resource, namespaced)
RESOURCES = {
    CONFIGMAP: ("api/v1", "configmaps", True),
    SECRET: ("api/v1", "secrets", True),
    model.PVC: ("api/v1", "persistentvolumeclaims", True),
    model.SERVICE_ACCOUNT: ("api/v1", "serviceaccounts", True),
    model.PRIORITY_CLASS: ("apis/scheduling.k8s.io/v1", "priorityclasses", False),
    model.RUNTIME_CLASS: ("apis/node.k8s.io/v1", "runtimeclasses", False),
}
FORBIDDEN = (401, 403)
SHOWN_FAILURES = 3  # in the one-line outcome; the log has every one


class PreflightFailed(Untouched):
    """A preflight check failed (or could not be made, under policy fail): not touched."""


def _cannot(err: ApiError, what: str) -> str:
    return f"the hook may not {what} ({err.status} {err.reason or 'Forbidden'}; see the hook's RBAC)"


def _nodes(kube: Any, pods: Callable[[], list[dict[str, Any]]], live: model.Live) -> None:
    """Every node; when the hook may not list them, the nodes of the cluster's own pods (one
    GET each; ``pods`` lists them, asked only then)."""
    try:
        live.nodes = kube.list_nodes()
        return
    except ApiError as err:
        if err.status not in FORBIDDEN:
            raise
        listing = _cannot(err, "list nodes")
    names = sorted({(p.get("spec") or {}).get("nodeName") for p in pods()} - {None, ""})
    if not names:
        live.nodes_why = f"{listing}, and no pod of the cluster runs on a node"
        return
    found = []
    for name in names:
        try:
            node = kube.get_node(name)
        except ApiError as err:
            if err.status not in FORBIDDEN:
                raise
            live.nodes_why = f"{listing} nor get node {name}"
            return
        if node is not None:
            found.append(node)
    live.nodes, live.only_pod_nodes = found, True


def gather(kube: Any, namespace: str, needs: model.Needs, pods: Callable[[], list[dict[str, Any]]]) -> model.Live:
    """What the hook finds live of ``needs`` (reads only)."""
    live = model.Live()
    for kind, name in needs.objects:
        api, resource, namespaced = RESOURCES[kind]
        try:
            live.objects[kind, name] = kube.exists(api, resource, name, namespace if namespaced else None)
        except ApiError as err:
            if err.status not in FORBIDDEN:
                raise
            live.objects[kind, name] = _cannot(err, f"get {resource}")
    if needs.nodes and any(g.replicas > 0 for g in needs.groups):
        _nodes(kube, pods, live)
    return live


def summary(failures: list[model.Failure]) -> str:
    """The failures as one line: the first few, and how many more."""
    more = f" (and {len(failures) - SHOWN_FAILURES} more)" if len(failures) > SHOWN_FAILURES else ""
    return "; ".join(f.line() for f in failures[:SHOWN_FAILURES]) + more


def check(c: Context, s: State) -> None:
    """Look, judge, and fail closed on what the policy does not let pass."""
    policy = c.plan.preflight_policy
    if not policy.enabled:
        c.log.info(c.key, "preflight", "preflight off for this cluster: not checked")
        s.preflight_cleared = True
        return
    needs = c.plan.preflight_needs(tuple(f"worker:{g}" for g in s.groups) if s.replace else None)
    failures = model.check(needs, gather(c.kube, c.ns, needs, c.pods))
    stopping = model.blocking(failures, policy)
    for failure in failures:
        if failure not in stopping:
            c.log.warn(c.key, "preflight", f"not checked, going on (preflight-unknown: proceed): {failure.line()}")
    if stopping:
        message = f"preflight failed, not touched: {summary(stopping)}"
        for failure in stopping:
            c.log.error(c.key, "preflight", failure.line(), node=failure.node)
        c.event(s, events.PREFLIGHT_FAILED, message)
        raise PreflightFailed(message)
    c.log.info(c.key, "preflight", f"passed: checked {needs.describe()}")
    s.preflight_cleared = True
