"""The fidelity matrix (docs/kuberay-1.6.md): one change per RayCluster, under each regime.

Shared by ``tests/unit/test_native.py`` (``raygitops diff`` predicts exactly the documented
table) and ``tests/e2e/test_fidelity.py`` (the real operators do what diff predicted, cell by
cell).  A cell is the class ``raygitops diff`` gives the cluster; the e2e test maps each to
what it must observe (``OBSERVED``).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

DOC = Path(__file__).resolve().parents[1] / "docs" / "kuberay-1.6.md"
STRATEGY_ANNOTATION = "raygitops.dev/upgrade-strategy"

# diff's class -> who replaces the pods, as the e2e test observes it
# ("hook-groups": the hook replaced worker groups' pods and the head pod was kept)
OBSERVED = {"recreate": "hook", "replace": "hook-groups", "native-recreate": "operator", "stale": "kept",
            "in-place": "kept"}


@dataclass(frozen=True)
class Regime:
    title: str  # the column heading in the docs table
    operator: str  # "1.5" or "1.6": which control plane runs it
    keep: bool  # keepUpgradeStrategy
    annotation: str | None  # raygitops.dev/upgrade-strategy
    field: str | None  # spec.upgradeStrategy.type

    def config(self, namespace: str) -> dict[str, Any]:
        """The app's raygitops.yaml."""
        return {"namespace": namespace, "keepUpgradeStrategy": self.keep, "kuberayVersion": self.operator,
                "hook": {"runningJobs": "proceed"}}  # kwok's heads run no Ray: no job to ask for

    def apply(self, doc: dict[str, Any]) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        if self.annotation:
            doc["metadata"].setdefault("annotations", {})[STRATEGY_ANNOTATION] = self.annotation
        if self.field:
            doc["spec"]["upgradeStrategy"] = {"type": self.field}
        return doc


REGIMES = {
    "raygitops-1.5": Regime("raygitops on 1.5", "1.5", False, "Recreate", None),
    "raygitops-1.6": Regime("raygitops on 1.6", "1.6", False, "Recreate", None),
    "both-1.6": Regime("raygitops + native on 1.6", "1.6", True, None, "Recreate"),
    "native-1.6": Regime("native only on 1.6", "1.6", True, "None", "Recreate"),
    "nothing-1.6": Regime("nothing on 1.6", "1.6", False, None, None),
    "replacegroups-1.5": Regime("ReplaceGroups on 1.5", "1.5", False, "ReplaceGroups", None),
    "replacegroups-1.6": Regime("ReplaceGroups on 1.6", "1.6", False, "ReplaceGroups", None),
}


def _container(image: str) -> dict[str, Any]:
    return {"name": "ray", "image": image, "ports": [{"containerPort": 6379, "name": "gcs"}],
            "env": [{"name": "RAY_LOG_LEVEL", "value": "info"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}


def base_cluster(name: str) -> dict[str, Any]:
    """Head + two worker groups of one pod each; no strategy (the regime adds it)."""
    def group(name: str) -> dict[str, Any]:
        return {"groupName": name, "replicas": 1, "minReplicas": 0, "maxReplicas": 3, "rayStartParams": {},
                "template": {"spec": {"containers": [_container("rayproject/ray:2.41.0")]}}}

    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.41.0",
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                              "template": {"spec": {"containers": [_container("rayproject/ray:2.41.0")]}}},
            "workerGroupSpecs": [group("small"), group("spare")],
        },
    }


def _head(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["headGroupSpec"]


def _small(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["workerGroupSpecs"][0]


def _image(doc: dict[str, Any]) -> None:
    for g in (_head(doc), *doc["spec"]["workerGroupSpecs"]):
        g["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.42.0"


def _env(doc: dict[str, Any]) -> None:
    _small(doc)["template"]["spec"]["containers"][0]["env"].append({"name": "EXTRA", "value": "1"})


def _notation(doc: dict[str, Any]) -> None:
    _small(doc)["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "0.1"


def _tolerations(doc: dict[str, Any]) -> None:
    _small(doc)["template"]["spec"]["tolerations"] = [
        {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _scheduling_gates(doc: dict[str, Any]) -> None:
    _small(doc)["template"]["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]


def _pod_labels(doc: dict[str, Any]) -> None:
    _small(doc)["template"].setdefault("metadata", {})["labels"] = {"team": "ml"}


def _pod_annotations(doc: dict[str, Any]) -> None:
    _head(doc)["template"].setdefault("metadata", {})["annotations"] = {"example.com/owner": "ml"}


def _ray_start_params(doc: dict[str, Any]) -> None:
    _head(doc)["rayStartParams"]["num-cpus"] = "0"


def _replicas(doc: dict[str, Any]) -> None:
    _small(doc)["replicas"] = 2


def _new_group(doc: dict[str, Any]) -> None:
    extra = copy.deepcopy(_small(doc))
    extra["groupName"] = "extra"
    doc["spec"]["workerGroupSpecs"].append(extra)


def _removed_group(doc: dict[str, Any]) -> None:
    doc["spec"]["workerGroupSpecs"].pop()


def _service_type(doc: dict[str, Any]) -> None:
    _head(doc)["serviceType"] = "NodePort"


def _head_service_annotations(doc: dict[str, Any]) -> None:
    doc["spec"]["headServiceAnnotations"] = {"example.com/lb": "internal"}


# row title -> (cluster name, the change)
MUTATIONS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "image": ("m-image", _image),
    "env var": ("m-env", _env),
    "a quantity written another way (`100m` → `0.1`)": ("m-notation", _notation),
    "tolerations": ("m-tolerations", _tolerations),
    "schedulingGates": ("m-gates", _scheduling_gates),
    "pod-template labels": ("m-labels", _pod_labels),
    "pod-template annotations": ("m-annotations", _pod_annotations),
    "rayStartParams": ("m-startparams", _ray_start_params),
    "worker replicas": ("m-replicas", _replicas),
    "a new worker group": ("m-newgroup", _new_group),
    "a removed worker group": ("m-removedgroup", _removed_group),
    "head serviceType": ("m-servicetype", _service_type),
    "headServiceAnnotations": ("m-svcannotations", _head_service_annotations),
}


def sides(regime: Regime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(base, head) manifests of a regime: one cluster per mutation."""
    base, head = [], []
    for name, change in MUTATIONS.values():
        doc = regime.apply(base_cluster(name))
        base.append(doc)
        changed = copy.deepcopy(doc)
        change(changed)
        head.append(changed)
    return base, head


def pods_of(doc: dict[str, Any]) -> int:
    return 1 + sum(g["replicas"] for g in doc["spec"]["workerGroupSpecs"])


_ROW = re.compile(r"^\|(.+)\|\s*$")


def documented() -> dict[tuple[str, str], str]:
    """(mutation title, regime key) -> class, from the table in docs/kuberay-1.6.md (the
    table between the ``fidelity-table`` markers; a cell is "`class`" plus words)."""
    text = DOC.read_text()
    table = text.split("<!-- fidelity-table -->")[1]
    rows = [r for r in table.strip().splitlines() if _ROW.match(r)]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    titles = {r.title: key for key, r in REGIMES.items()}
    columns = [titles[h] for h in header[1:]]
    out = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        for key, cell in zip(columns, cells[1:], strict=True):
            out[(cells[0], key)] = re.search(r"`([a-z-]+)`", cell).group(1)
    return out
