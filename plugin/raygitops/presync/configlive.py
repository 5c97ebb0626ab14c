"""Make the desired ConfigMaps live before new pods start (the config-hash half of issue #22).

The hook runs before the sync applies anything, so a pod the operator creates after the
hook's spec write would read the OLD content of a ConfigMap that changed in the same commit.
Right before that write (the resume of the full cycle, the first write of a replacement) the
hook writes the content render put in the plan (``data``/``binaryData`` only; labels and the
rest stay the sync's) to each ConfigMap the cluster's pods read: created when absent, patched
with the resourceVersion it read when different, left alone when equal. The sync applies the
same content again right after.
"""

from __future__ import annotations

from typing import Any

from raygitops.configrefs import content
from raygitops.plan import ClusterPlan
from raygitops.presync.kubeapi import Conflict
from raygitops.presync.patches import merge_diff

MAX_CONFLICTS = 10


def make_live(kube: Any, namespace: str, plan: ClusterPlan, contents: dict[str, dict[str, Any]]) -> list[str]:
    """Write each ConfigMap of ``plan.config_maps`` whose live content differs; the names written."""
    written = []
    for name in plan.config_maps:
        want = contents.get(name)
        if want is None:
            continue  # a plan without the content (hand-made): nothing to write
        for _ in range(MAX_CONFLICTS):
            live = kube.get_configmap(namespace, name)
            try:
                if live is None:
                    kube.create_configmap(namespace, {"apiVersion": "v1", "kind": "ConfigMap",
                                                      "metadata": {"name": name}, **want})
                elif content(live) != want:
                    patch = merge_diff(content(live), want)  # a section no longer wanted becomes null
                    kube.patch_configmap(namespace, name, {"metadata": {"resourceVersion":
                                                                        live["metadata"]["resourceVersion"]},
                                                           **patch})
                else:
                    break
                written.append(name)
                break
            except Conflict:
                continue  # changed (or created) meanwhile: read it again
    return written
