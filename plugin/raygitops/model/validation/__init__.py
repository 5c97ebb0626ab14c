"""KubeRay's own RayCluster validation, per operator version (pure): what the operator refuses
although the CRD schema accepts it (docs/validation.md "What the operator refuses").

The operator runs these checks in its reconciler; a cluster that fails one is stored by the
API server, then refused by the operator (Warning Event ``InvalidRayClusterSpec``), which
builds no pods for it and stops reconciling it.  Render and ``raygitops diff`` run the checks
of the target version (``kuberayVersion``; the newest known when unset) and make a refusal a
one-line error naming the rule, the version and the line of the operator's code.

One module per ported version (:mod:`.v1_1` (1.1 and 1.2: none), :mod:`.v1_3`, :mod:`.v1_4`,
:mod:`.v1_5`, :mod:`.v1_6`) lists the checks (:mod:`.checks`) in the order that tag's
``validation.go`` runs them, each with its line; a target between two uses the older one, a
newer one the newest (1.7: 1.6's, not read in 1.7's code: only its CRDs are at hand), and one
older than the oldest none.
``tests/e2e/test_pod_oracle.py`` checks refusals against the real operators.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence, Union

from raygitops.model.convert import version_tuple
from raygitops.model.names import ORIGIN_LABEL
from raygitops.model.validation import checks
from raygitops.model.validation.checks import Cluster

FILE = "ray-operator/controllers/ray/utils/validation.go"


class Check:
    """One check: the upstream function it belongs to and the line of its error."""

    __slots__ = ("function", "line", "rule")

    def __init__(self, function: str, line: int, rule: Callable[..., "str | None"]) -> None:
        self.function, self.line, self.rule = function, line, rule


class Head:
    """Checks of the head group, named "Head" in the operator's messages."""

    __slots__ = ("checks",)

    def __init__(self, checks: tuple[Check, ...]) -> None:
        self.checks = checks


class EachWorker(Head):
    """Checks run group by group, in the order of ``workerGroupSpecs``."""


Step = Union[Check, Head, EachWorker]


def group_checks(resources: int, labels_in_params: int, label_syntax: int) -> tuple[Check, ...]:
    """``validateRayGroupResources`` and ``validateRayGroupLabels`` (run for the head and each
    worker group alike), at their lines of a tag."""
    return (Check("validateRayGroupResources", resources, checks.group_resources),
            Check("validateRayGroupLabels", labels_in_params, checks.group_labels_in_params),
            Check("validateRayGroupLabels", label_syntax, checks.group_label_syntax))


class Port:
    """The validation of one operator tag."""

    __slots__ = ("tag", "gates", "steps")

    def __init__(self, tag: str, gates: frozenset[str], steps: Sequence[Step]) -> None:
        self.tag = tag  # "v1.6.2"
        self.gates = gates  # feature gates on by default
        self.steps = steps


class Refusal:
    """The operator's refusal of a cluster: its version, rule, line and message, and the part
    of the cluster spec it is about (``where``: ``headGroupSpec``, ``workerGroupSpecs[1]``, or
    empty for the spec as a whole), where an error shows it."""

    __slots__ = ("tag", "function", "line", "message", "kind", "where")

    def __init__(self, tag: str, function: str, line: int, message: str, kind: str = "RayCluster",
                 where: str = "") -> None:
        self.tag, self.function, self.line, self.message = tag, function, line, message
        self.kind = kind  # a RayJob's or RayService's cluster spec is checked alike
        self.where = where

    def cite(self) -> str:
        """Where the rule stands: ``(ValidateRayClusterSpec, <file>:<line> at v1.6.2)``."""
        return f"({self.function}, {FILE}:{self.line} at {self.tag})"

    def __str__(self) -> str:
        return f"KubeRay {self.tag} refuses this {self.kind}: {self.message} {self.cite()}"


def _ports() -> list[Port]:
    from raygitops.model.validation import v1_1, v1_3, v1_4, v1_5, v1_6  # noqa: PLC0415 - the modules name their Port

    return [v1_1.PORT, v1_3.PORT, v1_4.PORT, v1_5.PORT, v1_6.PORT]


@functools.lru_cache(maxsize=32)
def port_for(kuberay_version: str | None) -> Port | None:
    """The port of a KubeRay version (None: the newest); None when older than every port."""
    ports = _ports()
    if kuberay_version is None:
        return ports[-1]
    wanted = version_tuple(kuberay_version)[:2]
    older = [p for p in ports if version_tuple(p.tag.lstrip("v"))[:2] <= wanted]
    return older[-1] if older else None


def refusal(spec: dict[str, Any], annotations: dict[str, Any], labels: dict[str, Any],
            port: Port, kind: str = "RayCluster") -> Refusal | None:
    """The first check of ``port`` the RayCluster spec fails, as the operator would report it
    (``kind``: a RayJob or RayService whose embedded cluster spec it is: ValidateRayJobSpec and
    ValidateRayServiceSpec run ValidateRayClusterSpec on it with the owner's annotations, and
    the cluster they make carries ``ray.io/originated-from-crd``)."""
    if kind != "RayCluster":
        labels = {**labels, ORIGIN_LABEL: kind}
    cluster = Cluster(spec, annotations, labels, port.gates)

    def refused(check: Check, message: str, where: str = "") -> Refusal:
        return Refusal(port.tag, check.function, check.line, message, kind, where)

    groups = spec.get("workerGroupSpecs") if isinstance(spec.get("workerGroupSpecs"), list) else []
    for step in port.steps:  # one pass, the first failing check wins (render checks every cluster)
        if isinstance(step, EachWorker):
            for group in cluster.workers:
                name = checks._name(group)
                for check in step.checks:
                    message = check.rule(cluster, group, name)
                    if message is not None:
                        index = next(i for i, g in enumerate(groups) if g is group)
                        return refused(check, message, f"workerGroupSpecs[{index}]")
        elif isinstance(step, Head):
            for check in step.checks:
                message = check.rule(cluster, cluster.head, "Head")
                if message is not None:
                    return refused(check, message, "headGroupSpec")
        else:
            message = step.rule(cluster)
            if message is not None:
                return refused(step, message)
    return None

