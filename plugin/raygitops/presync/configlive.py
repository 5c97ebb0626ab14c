"""Make the desired ConfigMaps and Secrets live before new pods start (the config-hash half
of issue #22).

The hook runs before the sync applies anything, so a pod the operator creates after the
hook's spec write would read the OLD content of a ConfigMap or Secret that changed in the
same commit. Right before that write (the resume of the full cycle, the first write of a
replacement) the hook writes the content render gave it (a ConfigMap's ``data``/
``binaryData`` from the plan, a Secret's ``data`` from the hook's own Secret; labels and the
rest stay the sync's) to each object the cluster's pods read: created when absent (a Secret
with its type), patched with the resourceVersion it read when different, left alone when
equal. The sync applies the same content again right after. Nothing here logs a value.
"""

from __future__ import annotations

from typing import Any

from raygitops.model.configrefs import RESOURCES, SECRET, content
from raygitops.model.plan import ClusterPlan
from raygitops.kube.client import ApiError, Conflict
from raygitops.presync.patches import merge_diff

MAX_CONFLICTS = 10


def wanted(plan: ClusterPlan, contents: dict[str, dict[str, dict[str, Any]]]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(kind, name, payload)`` of each object the cluster's pods read, from ``contents``
    (kind -> name -> payload). A ConfigMap the plan names without content (a hand-made plan)
    is skipped; a Secret never is: the CLI refused the run (plan.with_secrets)."""
    out = []
    for kind, names in plan.config_names().items():
        for name in names:
            if name in contents.get(kind, {}):
                out.append((kind, name, contents[kind][name]))
            elif kind == SECRET:
                raise ValueError(f"no content for Secret {name}")
    return out


def make_live(kube: Any, namespace: str, plan: ClusterPlan,
              contents: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Write each object of :func:`wanted` whose live content differs; ``Kind/name`` written."""
    written = []
    for kind, name, want in wanted(plan, contents):
        resource, body = RESOURCES[kind], content({"kind": kind, **want})
        for _ in range(MAX_CONFLICTS):
            live = kube.get_core(resource, namespace, name)
            try:
                if live is None:
                    kube.create_core(resource, namespace, {"apiVersion": "v1", "kind": kind,
                                                           "metadata": {"name": name}, **want})
                elif content(live) != body:
                    patch = merge_diff(content(live), body)  # a key or section no longer wanted becomes null
                    kube.patch_core(resource, namespace, name,
                                    {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]}, **patch})
                else:
                    break
                written.append(f"{kind}/{name}")
                break
            except Conflict:
                continue  # changed (or created) meanwhile: read it again
        else:  # fail closed: new pods must not start with the old content
            raise ApiError(409, "Conflict", f"{kind} {name} kept changing: gave up after {MAX_CONFLICTS} "
                           "write conflicts", "PATCH", RESOURCES[kind])
    return written
