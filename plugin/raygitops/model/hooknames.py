"""The names of an app's hook objects (pure): per app wherever the app is known.

Every app that deploys into a namespace gets hook objects of its own there: ServiceAccount,
Role, RoleBinding and Job ``raygitops-presync-<slug>-<hash>``, plan ConfigMap
``raygitops-plan-<slug>-<hash>`` and Secret ``raygitops-plan-secrets-<slug>-<hash>``.  The
app is its identity where the tool that deploys it says it: Argo CD's ``ARGOCD_APP_NAME``
(unique within the Argo CD instance; ``<namespace>_<name>`` for an Application outside
Argo CD's own namespace), else ``raygitops render --app-name`` (a Helm release, a Flux
Kustomization: neither tells a post-renderer or a pre-rendered repository its name).

``<slug>`` is the app name made a DNS-1123 label (lower case; anything else a ``-``), cut
to :data:`SLUG_MAX` characters, for people; ``<hash>`` is the first 8 hex digits of the
SHA-256 of the app name as given, for machines: two apps never share a name (unless they
collide in 32 bits in one namespace), however alike their slugs.  The Job's name, 52
characters at most, leaves room for the 11 of ``--flux``'s plan hash within the Job name
limit (63: the Job controller labels its pods with it); the longest, the Secret's, has 57.

Without a known app the fixed names of raygitops before per-app names stay
(:data:`LEGACY`): one app per namespace.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from raygitops.model import k8snames

PRESYNC = "raygitops-presync"
PLAN = "raygitops-plan"
PLAN_SECRETS = "raygitops-plan-secrets"
HASH_CHARS = 8
# --flux appends "-<10 hex digits>" to the Job's name (model.plan.Plan.digest)
FLUX_SUFFIX_CHARS = 11
# raygitops-presync-<slug>-<hash>-<plan hash>: 18 + 25 + 9 + 11 = 63, the Job name limit
SLUG_MAX = k8snames.JOB_NAME_MAX - len(PRESYNC) - 1 - (1 + HASH_CHARS) - FLUX_SUFFIX_CHARS
# An app name as Argo CD, Helm or Flux spell one: DNS subdomains, Argo CD's "<ns>_<name>",
# a "<namespace>/<name>" someone may write for a Flux Kustomization.
APP_NAME_MAX = 320
_APP_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?")
_NOT_LABEL = re.compile(r"[^a-z0-9]+")


def app_name(value: object) -> str:
    """The app name as given (a converter: ``ValueError`` with the reason)."""
    if not isinstance(value, str) or not _APP_NAME.fullmatch(value) or len(value) > APP_NAME_MAX:
        raise ValueError(f"{k8snames.shown(value)} is not an app name (letters, digits, '.', '_', '/' and '-', "
                         f"starting and ending with a letter or digit, at most {APP_NAME_MAX} characters)")
    return value


def app_key(app: str) -> str:
    """``<slug>-<hash>``: the app as its hook objects' names and ``raygitops.dev/app`` label
    say it (a label value: at most 34 characters)."""
    digest = hashlib.sha256(app.encode()).hexdigest()[:HASH_CHARS]
    slug = _NOT_LABEL.sub("-", app.lower())[:SLUG_MAX].strip("-")
    return f"{slug}-{digest}" if slug else digest


@dataclass(frozen=True)
class HookNames:
    """The names of one app's hook objects in a namespace."""

    presync: str  # ServiceAccount, Role, RoleBinding, and the Job (--flux: "-<plan hash>" after it)
    plan: str  # the plan ConfigMap
    plan_secrets: str  # the Secret beside it
    app_key: str | None = None  # the value of label raygitops.dev/app; None: no app known

    @property
    def legacy(self) -> bool:
        return self.app_key is None


LEGACY = HookNames(PRESYNC, PLAN, PLAN_SECRETS)


def hook_names(app: str | None) -> HookNames:
    """The names for ``app``'s hook objects; :data:`LEGACY` when no app is known."""
    if app is None:
        return LEGACY
    key = app_key(app)
    return HookNames(f"{PRESYNC}-{key}", f"{PLAN}-{key}", f"{PLAN_SECRETS}-{key}", key)


# The fixed-name hook objects (API group, resource, name): a hook with per-app names removes
# the ones of its own app (presync.legacy), the Secret first and the ConfigMap last (the
# Secret is never read: whether it is the app's, the ConfigMap the same render made says).
LEGACY_OBJECTS: tuple[tuple[str, str, str], ...] = (
    ("", "secrets", LEGACY.plan_secrets),
    ("batch", "jobs", LEGACY.presync),
    ("rbac.authorization.k8s.io", "rolebindings", LEGACY.presync),
    ("rbac.authorization.k8s.io", "roles", LEGACY.presync),
    ("", "serviceaccounts", LEGACY.presync),
    ("", "configmaps", LEGACY.plan),
)
