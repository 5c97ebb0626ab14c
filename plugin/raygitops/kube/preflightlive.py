"""What the preflight reads live (:mod:`raygitops.model.preflight` judges it): the objects
the new pods need, by name, and the nodes; reads only. The hook's ``preflight`` step
(:mod:`raygitops.presync.preflight`) and ``raygitops status`` gather alike."""

from __future__ import annotations

from typing import Any, Callable

from raygitops.kube.client import ApiError
from raygitops.model import preflight as model

FORBIDDEN = (401, 403)


def _cannot(err: ApiError, what: str) -> str:
    return f"no right to {what} ({err.status} {err.reason or 'Forbidden'}; see the hook's RBAC)"


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
        group, version, resource = model.RESOURCES[kind]
        api = f"apis/{group}/{version}" if group else f"api/{version}"
        try:
            live.objects[kind, name] = kube.exists(api, resource, name, namespace if kind in model.NAMESPACED else None)
        except ApiError as err:
            if err.status not in FORBIDDEN:
                raise
            live.objects[kind, name] = _cannot(err, f"get {resource}")
    if needs.nodes and any(g.replicas > 0 for g in needs.groups):
        _nodes(kube, pods, live)
    return live
