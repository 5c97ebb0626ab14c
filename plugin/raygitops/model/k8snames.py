"""What the API server (and KubeRay) would refuse in a name, label, annotation or image (pure).

The rules mirror ``k8s.io/apimachinery/pkg/util/validation`` (DNS-1123 label and subdomain,
DNS-1035 label, qualified names, label values), ``apimachinery/pkg/api/validation``
(``ValidateObjectMeta``: per-kind name rules, annotation keys and their 256 KiB total) and
KubeRay's ``ValidateRayClusterMetadata`` / RayJob / RayService checks
(``ray-operator/controllers/ray/utils/validation.go``, the same in 1.5 and 1.6).  The image
grammar is the one container runtimes parse (``distribution/reference``).  docs/validation.md
lists every rule and its source.

Each check returns ``None`` for a valid value, else the reason, phrased to follow the value.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from raygitops.errors import printable

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
ANNOTATIONS_MAX_BYTES = 256 * 1024
IMAGE_NAME_MAX = 255
# KubeRay derives Service and pod names from a RayCluster's name (MaxRayClusterNameLength);
# RayJob and RayService names get a 6-character suffix for the RayCluster they create.
RAYCLUSTER_NAME_MAX = 53
RAYJOB_NAME_MAX = RAYCLUSTER_NAME_MAX - 6
# The Job controller labels its pods with the Job name; CronJob appends an 11-character suffix.
JOB_NAME_MAX = LABEL_VALUE_MAX
CRONJOB_NAME_MAX = DNS1035_LABEL_MAX - 11

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_DNS1035_LABEL = re.compile(r"[a-z](?:[-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    re.ASCII,
)

LABEL_RULE = "lower-case letters, digits and '-', starting and ending with a letter or digit"
SUBDOMAIN_RULE = "lower-case letters, digits, '-' and '.', each dot-separated part starting and ending " \
                 "with a letter or digit"
DNS1035_RULE = "lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"
QUALIFIED_RULE = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"

Check = Callable[[str], "str | None"]


def shown(value: Any) -> str:
    """A value quoted for a one-line message, control characters escaped and length bounded."""
    if not isinstance(value, str):
        return printable(repr(value))[:80]
    text = printable(value)
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _pattern(value: str, pattern: re.Pattern[str], limit: int, what: str, rule: str) -> str | None:
    if not value:
        return f"is empty (a {what} is required)"
    if len(value) > limit:
        return f"is {len(value)} characters long: a {what} has at most {limit}"
    if not pattern.fullmatch(value):
        return f"is not a {what} ({rule})"
    return None


def dns1123_label(value: str, limit: int = DNS1123_LABEL_MAX) -> str | None:
    return _pattern(value, _DNS1123_LABEL, limit, "DNS-1123 label", LABEL_RULE)


def dns1123_subdomain(value: str, limit: int = DNS1123_SUBDOMAIN_MAX) -> str | None:
    return _pattern(value, _DNS1123_SUBDOMAIN, limit, "DNS-1123 subdomain", SUBDOMAIN_RULE)


def dns1035_label(value: str, limit: int = DNS1035_LABEL_MAX) -> str | None:
    return _pattern(value, _DNS1035_LABEL, limit, "DNS-1035 label", DNS1035_RULE)


def path_segment(value: str) -> str | None:
    """RBAC and flow-control objects: any name usable as one URL path segment."""
    if not value:
        return "is empty (a name is required)"
    if value in (".", ".."):
        return "cannot be '.' or '..'"
    if "/" in value or "%" in value:
        return "may not contain '/' or '%'"
    return None


def qualified_name(value: str) -> str | None:
    """A label key or (lower-cased) annotation key: ``[prefix/]name``."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return "has an empty prefix before '/'"
        if "/" in prefix:
            return "has more than one '/'"
        problem = dns1123_subdomain(prefix)
        if problem:
            return f"has a prefix that {problem}"
    return _pattern(name, _QUALIFIED_NAME, QUALIFIED_NAME_MAX, "qualified name", QUALIFIED_RULE)


def label_value(value: str) -> str | None:
    return None if value == "" else _pattern(
        value, _QUALIFIED_NAME, LABEL_VALUE_MAX, "label value", QUALIFIED_RULE + ", or empty"
    )


def image_reference(value: str) -> str | None:
    """``[registry[:port]/]repository[:tag][@digest]`` as container runtimes parse it."""
    match = _IMAGE.fullmatch(value)
    if not value or match is None:
        return ("is not an image reference ([registry[:port]/]repository[:tag][@digest], "
                "the repository in lower case)")
    if len(match["name"]) > IMAGE_NAME_MAX:
        return f"has a repository name longer than {IMAGE_NAME_MAX} characters"
    return None


def _bounded(check: Callable[[str, int], "str | None"], limit: int) -> Check:
    return lambda value: check(value, limit)


# (API group, kind) -> the rule for metadata.name; every other kind: DNS-1123 subdomain
# (core and custom resources alike: the apiextensions server applies it to every CR).
NAME_RULES: dict[tuple[str, str], Check] = {
    ("", "Namespace"): dns1123_label,
    ("", "Service"): dns1035_label,
    ("batch", "Job"): _bounded(dns1123_subdomain, JOB_NAME_MAX),
    ("batch", "CronJob"): _bounded(dns1123_subdomain, CRONJOB_NAME_MAX),
    ("ray.io", "RayCluster"): _bounded(dns1035_label, RAYCLUSTER_NAME_MAX),
    ("ray.io", "RayJob"): _bounded(dns1035_label, RAYJOB_NAME_MAX),
    ("ray.io", "RayService"): _bounded(dns1035_label, RAYJOB_NAME_MAX),
    **{("rbac.authorization.k8s.io", kind): path_segment
       for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")},
    **{("flowcontrol.apiserver.k8s.io", kind): path_segment
       for kind in ("FlowSchema", "PriorityLevelConfiguration")},
}


def name_problem(group: str, kind: str, name: str, generate: bool = False) -> str | None:
    """Why ``name`` cannot name a ``kind`` of ``group``; ``generate``: it is a generateName
    prefix (a trailing '-' is fine, the server appends a suffix)."""
    check = NAME_RULES.get((group, kind), dns1123_subdomain)
    if generate and len(name) > 1 and name.endswith("-"):
        name = name[:-1] + "a"
    return check(name)


def _string_map(value: Any, field: str) -> tuple[dict[str, str] | None, str | None]:
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return None, f"{field} is not a mapping"
    for key, item in value.items():
        if not isinstance(key, str):
            return None, f"{field} key {shown(key)} is not a string"
        if not isinstance(item, str):
            return None, f"{field}[{shown(key)}] is {type(item).__name__} {shown(item)}, not a string (quote it)"
    return value, None


def labels_problem(labels: Any, field: str = "metadata.labels") -> str | None:
    checked, problem = _string_map(labels, field)
    if checked is None:
        return problem
    for key, value in checked.items():
        problem = qualified_name(key)
        if problem:
            return f"{field} key {shown(key)} {problem}"
        problem = label_value(value)
        if problem:
            return f"{field}[{shown(key)}] value {shown(value)} {problem}"
    return None


def annotations_problem(annotations: Any, field: str = "metadata.annotations") -> str | None:
    checked, problem = _string_map(annotations, field)
    if checked is None:
        return problem
    total = 0
    for key, value in checked.items():
        problem = qualified_name(key.lower())
        if problem:
            return f"{field} key {shown(key)} {problem}"
        total += len(key.encode()) + len(value.encode())
    if total > ANNOTATIONS_MAX_BYTES:
        return f"{field} total {total} bytes: the API server allows at most {ANNOTATIONS_MAX_BYTES} (256 KiB)"
    return None


def metadata_problem(group: str, kind: str, meta: dict[str, Any]) -> str | None:
    """The first thing the API server would refuse in an object's metadata, or None."""
    for key, generate in (("name", False), ("generateName", True)):
        value = meta.get(key)
        if isinstance(value, str):
            problem = name_problem(group, kind, value, generate)
            if problem:
                return f"metadata.{key} {shown(value)} {problem}"
    namespace = meta.get("namespace")
    if namespace is not None:
        problem = dns1123_label(namespace) if isinstance(namespace, str) else "is not a string"
        if problem:
            return f"metadata.namespace {shown(namespace)} {problem}"
    return _owner_references_problem(meta.get("ownerReferences")) or _labels_and_annotations(meta, "metadata")


def _owner_references_problem(refs: Any) -> str | None:
    """The API server takes ``ownerReferences`` only as a list of mappings (and raygitops
    reads each one's ``kind`` to tell a RayJob's or RayService's cluster from a standalone one)."""
    if refs is None:
        return None
    if not isinstance(refs, list):
        return f"metadata.ownerReferences is {type(refs).__name__} {shown(refs)}, not a list"
    for index, ref in enumerate(refs):
        if not isinstance(ref, dict):
            return f"metadata.ownerReferences[{index}] is {type(ref).__name__} {shown(ref)}, not a mapping"
    return None


def _labels_and_annotations(meta: dict[str, Any], where: str) -> str | None:
    return (labels_problem(meta.get("labels"), f"{where}.labels")
            or annotations_problem(meta.get("annotations"), f"{where}.annotations"))


def _ray_pod_templates(spec: Any, where: str) -> list[tuple[str, Any]]:
    """The group pod templates of a RayCluster spec, each with its field path."""
    if not isinstance(spec, dict):
        return []
    found = []
    head = spec.get("headGroupSpec")
    if isinstance(head, dict):
        found.append((f"{where}.headGroupSpec.template", head.get("template")))
    workers = spec.get("workerGroupSpecs")
    for index, group in enumerate(workers if isinstance(workers, list) else []):
        if isinstance(group, dict):
            found.append((f"{where}.workerGroupSpecs[{index}].template", group.get("template")))
    return found


# Where KubeRay kinds hold a RayCluster spec, whose pod template metadata KubeRay copies onto
# the pods it creates: the API server refuses those pods, far from the manifest.  A RayCronJob
# (KubeRay 1.7) holds a RayJob spec as its jobTemplate, and that one the cluster's.
RAY_CLUSTER_SPECS = {"RayCluster": "spec", "RayJob": "spec.rayClusterSpec", "RayService": "spec.rayClusterConfig",
                     "RayCronJob": "spec.jobTemplate.rayClusterSpec"}


def object_problem(group: str, kind: str, obj: dict[str, Any]) -> str | None:
    """The first thing the API server (or KubeRay, for the pods it makes) would refuse in an
    object with a checked ``metadata`` mapping, prefixed with the kind; None when valid."""
    problem = metadata_problem(group, kind, obj["metadata"])
    if problem is None and group == "ray.io" and kind in RAY_CLUSTER_SPECS:
        spec: Any = obj
        for key in RAY_CLUSTER_SPECS[kind].split("."):
            spec = spec.get(key) if isinstance(spec, dict) else None
        for where, template in _ray_pod_templates(spec, RAY_CLUSTER_SPECS[kind]):
            if isinstance(template, dict) and isinstance(template.get("metadata"), dict):
                problem = problem or _labels_and_annotations(template["metadata"], f"{where}.metadata")
    return None if problem is None else f"{kind} {problem}"
