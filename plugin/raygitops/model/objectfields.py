"""The fields a KubeRay object may have at its top level and in its ``metadata`` (pure).

Every KubeRay CRD (RayCluster, RayJob, RayService, RayCronJob) declares exactly
``apiVersion``, ``kind``, ``metadata``, ``spec`` and ``status`` at the top, and the API server
reads ``metadata`` as an ObjectMeta: under strict field validation (kubectl's default since
1.27, Argo CD's server-side apply) anything else is refused, and otherwise pruned without a
word.  A slip here changes what the hook does: ``annotations:`` written beside ``metadata``
(one indent off) leaves the cluster not opted in; ``raygitops.dev/upgrade-strategy:`` written
straight under ``metadata`` too.  Each unknown field is an error at its own line, with the
place it most likely belongs.
"""

from __future__ import annotations

from typing import Any

from raygitops.errors import closest, printable

TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")
# ObjectMeta's fields (k8s.io/apimachinery/pkg/apis/meta/v1, JSON names)
OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
               "annotations", "ownerReferences", "finalizers", "managedFields")


_UNDER_METADATA = "under metadata: indent it one level more"
_BESIDE_METADATA = "at the top level, beside metadata: indent it one level less"


def _shown(key: Any) -> str:
    text = printable(str(key))
    return text if len(text) <= 80 else text[:77] + "..."


def _where(key: Any, known: tuple[str, ...], elsewhere: tuple[str, ...], elsewhere_name: str, move: str) -> str:
    """Where an unknown ``key`` most likely belongs, in words (empty when nothing is close)."""
    if not isinstance(key, str):
        return ""
    if key in elsewhere:
        return f" (it belongs {move})"
    close = closest(key, known, cutoff=0.75)
    if close:
        return f" (did you mean {close}?)"
    moved = closest(key, elsewhere, cutoff=0.75)
    if moved:
        return f" (did you mean {elsewhere_name}{moved}, {move}?)"
    return ""


def unknown_fields(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """Each field of a KubeRay object the API server would refuse at its top level or in its
    ``metadata``: ``(field path, message)``, in the order written."""
    found = []
    for key in obj:
        if key not in TOP_LEVEL:
            found.append((str(key), f"unknown field {_shown(key)} at the top level of a {obj.get('kind')} "
                                    f"(it has only {', '.join(TOP_LEVEL)}){_where(key, TOP_LEVEL, OBJECT_META, 'metadata.', _UNDER_METADATA)}"))
    meta = obj.get("metadata")
    for key in meta if isinstance(meta, dict) else ():
        if key in OBJECT_META:
            continue
        if isinstance(key, str) and "/" in key:  # a label's or an annotation's key
            hint = " (an annotation? write it under metadata.annotations)"
        else:
            hint = _where(key, OBJECT_META, TOP_LEVEL, "", _BESIDE_METADATA)
        found.append((f"metadata.{key}", f"unknown field metadata.{_shown(key)}: the API server refuses it "
                                         f"(metadata holds {', '.join(OBJECT_META[:3])}, labels, annotations, ...){hint}"))
    return found
