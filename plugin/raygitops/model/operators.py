"""What each KubeRay operator line does that raygitops relies on or works around (pure).

Measured on the real operators by ``tests/e2e/test_kuberay_versions.py`` (v1.1.1, v1.2.2,
v1.3.2, v1.4.2, v1.5.0, v1.6.2; the run writes docs/kuberay-versions.md) and read in their code:

- ``spec.suspend`` on RayCluster arrived in KubeRay 1.1 (ray-project/kuberay #1711): before it
  the recreate cycle has nothing to suspend, so raygitops cannot serve that operator;
- the conditions ``RayClusterSuspending`` / ``RayClusterSuspended`` come with the feature gate
  ``RayClusterStatusConditions``, on by default from 1.3: before, the operator deletes the pods
  on every reconcile while ``suspend`` is true and takes a suspend and a resume in one
  reconcile each (nothing to prompt: :mod:`raygitops.presync.prompt` reads the conditions
  live and does without them);
- ``spec.upgradeStrategy`` (native Recreate) and the head pod's ``ray.io/kuberay-version`` and
  ``ray.io/upgrade-strategy-recreate-hash`` arrived in 1.6 (:mod:`raygitops.model.native`);
- from 1.6 a RayService applies a ``suspend`` toggle of its cluster spec to the running
  cluster (:mod:`raygitops.model.workloads`);
- every supported line labels its pods ``ray.io/node-type`` (head/worker) and ``ray.io/group``
  (``headgroup`` for the head), and leaves the pods of a worker group removed from the spec
  running (kuberay #1739);
- every supported line (1.1 to 1.7) writes ``status.observedGeneration`` only together with a
  status change of another kind (``utils/consistency.go``, ``InconsistentRayClusterStatus``;
  1.1/1.2 inline in ``raycluster_controller.go``): state, reason, the worker counts (ready from
  1.5, available, desired, min, max), endpoints, head, conditions (1.3+). So it is proof that the
  operator's cache holds a spec (:func:`unobserved`), never a prompt one: a template change alone
  changes no status, and the proof comes with the next change the pods bring (a removed group's
  counts at once, replacement pods when they become Ready, the suspend conditions from 1.3).

Which fields each line's RayCluster CRD has is :mod:`raygitops.model.crdschema`'s (the shipped
schemas); this module holds the behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raygitops.model import convert, crdschema, native
from raygitops.model.convert import version_tuple

FIRST_SUPPORTED = "1.1"  # spec.suspend on RayCluster
SUSPEND_CONDITIONS_FROM = "1.3"  # RayClusterStatusConditions on by default
NATIVE_RECREATE_FROM = native.FIRST_VERSION  # spec.upgradeStrategy, head pods stamped with version and hash
SERVICE_SUSPEND_IN_PLACE_FROM = "1.6"  # RayService: shouldUpdateCluster applies a suspend toggle in place (kuberay #4686)


@dataclass(frozen=True)
class Operator:
    """The behaviour of one KubeRay operator version."""

    version: str
    suspend_conditions: bool  # reports RayClusterSuspending / RayClusterSuspended
    native_recreate: bool  # spec.upgradeStrategy.type: Recreate
    stamps_head_pod: bool  # ray.io/kuberay-version and the native hash on every head pod it creates
    node_type_label: bool = True  # ray.io/node-type on its pods
    removed_group_pods_kept: bool = True  # a removed worker group's pods keep running
    service_suspend_in_place: bool = False  # a RayService's suspend toggle reaches its running cluster


def _at_least(version: str, first: str) -> bool:
    return version_tuple(version)[:2] >= version_tuple(first)[:2]


def unsupported(version: str) -> str | None:
    """Why raygitops cannot serve KubeRay ``version`` (as
    :func:`raygitops.model.convert.kuberay_version` returns it), or None."""
    if _at_least(version, FIRST_SUPPORTED):
        return None
    return (f"KubeRay {version} has no RayCluster spec.suspend (added in {FIRST_SUPPORTED}), which the "
            f"recreate cycle needs: raygitops serves KubeRay {FIRST_SUPPORTED} and later")


# The KubeRay lines raygitops knows: those it ships a RayCluster schema (and pod rules) of.
KNOWN = tuple(sorted(crdschema.SCHEMAS, key=version_tuple))
# The escape for an operator newer than every known line: ``1.9+newest-rules`` is KubeRay 1.9,
# checked with the rules of the newest known line (render says so on every run).
NEWEST_RULES = "+newest-rules"


def supported_version(value: Any) -> str:
    """The ``kuberayVersion`` setting's converter: a KubeRay version raygitops serves
    (:func:`raygitops.model.convert.kuberay_version`) of a line it knows, or one newer than
    them all spelt with :data:`NEWEST_RULES`; raises ValueError saying why not and the fix.

    An unquoted ``1.6`` (a YAML number) is taken as the version it spells, but for ``1.1``,
    which YAML also makes of ``1.10``."""
    if isinstance(value, float):
        text = repr(value)
        if text == "1.1":
            raise ValueError(f"the number {text} may be 1.1 or 1.10 (YAML reads both as {text}): quote it")
        value = text
    newer = isinstance(value, str) and value.strip().endswith(NEWEST_RULES)
    version = convert.kuberay_version(value.strip()[:-len(NEWEST_RULES)] if newer else value)
    why = unsupported(version)
    if why:
        raise ValueError(why)
    minor, newest = ".".join(version.split(".")[:2]), KNOWN[-1]
    if newer and version_tuple(minor) <= version_tuple(newest):
        raise ValueError(f"KubeRay {version} is a line raygitops knows: drop {NEWEST_RULES}")
    if not newer and minor not in KNOWN:
        raise ValueError(f"KubeRay {version} is not a version raygitops knows ({KNOWN[0]} to {newest}): correct it, "
                         f"or, for an operator newer than {newest}, write \"{version}{NEWEST_RULES}\" to check "
                         f"with KubeRay {newest}'s rules")
    return version


def rules_note(version: str | None) -> str | None:
    """What a render for KubeRay ``version`` must say because raygitops does not know that
    line (taken with :data:`NEWEST_RULES`): which rules it checks with; None otherwise."""
    if version is None or version_tuple(version)[:2] <= version_tuple(KNOWN[-1]):
        return None
    return (f"kuberayVersion {version}{NEWEST_RULES}: raygitops knows KubeRay {KNOWN[0]} to {KNOWN[-1]}; "
            f"checked with KubeRay {KNOWN[-1]}'s rules (CRD schema, operator validation, pod rules)")


def operator(version: str) -> Operator:
    """The behaviour of a supported KubeRay ``version``; a newer one than raygitops knows is
    taken to behave as the newest it knows."""
    native = _at_least(version, NATIVE_RECREATE_FROM)
    return Operator(version=version, suspend_conditions=_at_least(version, SUSPEND_CONDITIONS_FROM),
                    native_recreate=native, stamps_head_pod=native,
                    service_suspend_in_place=_at_least(version, SERVICE_SUSPEND_IN_PLACE_FROM))


def upgrade_notes(base: str | None, head: str | None) -> list[str]:
    """What changing the operator from KubeRay ``base`` to ``head`` (``kuberayVersion`` of a
    diff's two sides) does by itself, for ``raygitops diff``; nothing when either is unknown.
    First, for a ``head`` newer than every line raygitops knows, which rules checked it."""
    rules = rules_note(head)
    if base is None or head is None or version_tuple(base)[:2] == version_tuple(head)[:2]:
        return [rules] if rules else []
    older, newer = sorted((base, head), key=version_tuple)
    notes = [*([rules] if rules else []),
             f"kuberayVersion {base} → {head}: the operator {'upgrade' if newer == head else 'downgrade'} "
             "replaces no pod by itself, and the PreSync hook compares template hashes, not operator versions "
             "(docs/kuberay-versions.md)"]
    if newer == head and not operator(older).native_recreate and operator(newer).native_recreate:
        notes.append(f"KubeRay {head}'s own Recreate (spec.upgradeStrategy) acts only on head pods it creates: "
                     f"clusters whose pods KubeRay {base} made are not armed until their pods are replaced once "
                     "(docs/kuberay-1.6.md)")
    if newer == base:
        notes.append(f"KubeRay {head}'s CRD drops the fields added after it: render checks against its schema")
    return notes


def unobserved(live: dict[str, Any] | None, generation: int | None) -> str | None:
    """Why the operator has not yet reconciled the RayCluster from a spec at least as new as
    ``generation``, or None when it has (``status.observedGeneration``; its reconciles of one
    cluster never overlap and its cache only moves forward, so every pod it creates from then
    on is made from that spec or a newer one). ``generation`` None: nothing to wait for."""
    status = (live or {}).get("status")
    seen = status.get("observedGeneration") if isinstance(status, dict) else None
    if generation is None or (isinstance(seen, int) and seen >= generation):
        return None
    return (f"the operator has not yet observed generation {generation} "
            f"(status.observedGeneration {seen if isinstance(seen, int) else 'unset'})")


# What the hook says when the live RayCluster CRD dropped its spec.suspend write: an operator
# older than FIRST_SUPPORTED, which it then refuses before anything is deleted.
SUSPEND_DROPPED = ("spec.suspend was dropped by the API server: this cluster's RayCluster CRD does not have it "
                   f"(KubeRay older than {FIRST_SUPPORTED}), so it cannot be suspended; raygitops serves KubeRay "
                   f"{FIRST_SUPPORTED} and later, nothing was deleted")


def suspend_dropped(answer: dict | None) -> bool:
    """Whether the API server's answer to a ``spec.suspend: true`` write lacks the field (the
    CRD pruned it) rather than holding another value (someone set it back)."""
    spec = (answer or {}).get("spec")
    return isinstance(spec, dict) and "suspend" not in spec
