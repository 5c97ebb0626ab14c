"""Documents → manifests: hash every RayCluster, check opt-in, build plans, append hooks.

Pure: takes parsed documents and settings, returns the rendered objects and what it learnt
about each RayCluster (the preview reuses that).  Mutates the documents' objects in place.
Documents are taken one at a time (:class:`Render`), so a caller that writes each object
out as it comes never holds the whole app.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from raygitops.model import configrefs, crdschema, jobs, native, objectfields, operators, podrules, preflight, strategy, validation
from raygitops.errors import RaygitopsError, printable
from raygitops.model.hashing import GroupHashes, HashRules, SpecParts, hash_spec, split_spec, stamp_group
from raygitops.model.names import HASHES_ANNOTATION
from raygitops.render.appwarnings import AppWarnings
from raygitops.render.hookresources import LABELS as HOOK_LABELS
from raygitops.render.hookresources import hook_resources
from raygitops.model.k8snames import object_problem
from raygitops.model.objmeta import annotations, labels, set_annotation
from raygitops.model.plan import ClusterPlan, HookSettings, PackedCluster, Plan
from raygitops.model.scope import namespaced
from raygitops.model.sizes import size_problem
from raygitops.sources.settings import HOOK_IMAGE_ENV, Settings, unserved_image
from raygitops.sources.yamlio import Document, Unparsed, may_spell
from raygitops.model import names


@dataclass
class RenderedCluster:
    """A RayCluster after render, with what the hook and the preview need about it."""

    namespace: str | None  # None: left to Helm (the release namespace)
    name: str
    plan: ClusterPlan
    spec: dict[str, Any]
    source: str
    untracked: list[str] = field(default_factory=list)  # "Kind/name" its pods read, not hashed (configrefs)
    # the content of the ConfigMaps and Secrets its pods read, by (kind, name) (configrefs)
    config: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass
class RenderResult:
    """Rendered objects (app documents first, in order; hooks last) and the clusters."""

    default_namespace: str | None = "default"  # None: left to Helm
    objects: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[RenderedCluster] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    # Where each app object came from ("path:line"), parallel to the first len(sources) objects.
    sources: list[str] = field(default_factory=list)
    settings: Settings | None = None  # what it was rendered with (diff reads `preview:`)
    # "path:line: message", each message once with the RayClusters it was found in (for stderr)
    warnings: list[str] = field(default_factory=list)


def is_raycluster(obj: dict[str, Any]) -> bool:
    api = obj.get("apiVersion")
    return obj.get("kind") == "RayCluster" and isinstance(api, str) and api.startswith("ray.io/")


def _write_hashes(spec: dict[str, Any], hashes: GroupHashes) -> None:
    """Stamp each group template: KubeRay copies template annotations onto its pods."""
    stamp_group(spec["headGroupSpec"], hashes.head)
    for group in spec.get("workerGroupSpecs") or []:
        stamp_group(group, hashes.workers[group["groupName"]])


def _stamp_config(obj: dict[str, Any], spec: dict[str, Any], configs: ConfigIndex | None, namespace: str | None
                  ) -> tuple[dict[str, dict[str, str]], list[configrefs.GroupConfig], dict[tuple[str, str], dict[str, Any]]]:
    """Stamp each group template with its config hashes (or remove stale ones); the hashes
    by kind and group key, each group's config (tracked and untracked references), and the
    ConfigMaps and Secrets of its namespace (none when ``configs`` is None: not tracked)."""
    track = annotations(obj).get(names.TRACK_ANNOTATION, "true")
    if not isinstance(track, str):
        raise strategy.annotation_error(names.TRACK_ANNOTATION, f"is {type(track).__name__} "
                                        f"{printable(repr(track))[:40]}, not a string (quote it: 'false')")
    if track not in ("true", "false"):
        raise strategy.annotation_error(names.TRACK_ANNOTATION, f"{printable(repr(track))[:60]} is not true or false")
    groups = [("head", spec["headGroupSpec"])] + [(f"worker:{g['groupName']}", g)
                                                  for g in spec.get("workerGroupSpecs") or []]
    refs = [configrefs.references(group.get("template")) for _, group in groups]
    objects = {} if configs is None or track == "false" else configs.objects(
        namespace, [ref for group_refs in refs for ref in group_refs])
    hashes: dict[str, dict[str, str]] = {kind: {} for kind in configrefs.HASH_ANNOTATIONS}
    found = []
    for (key, group), group_refs in zip(groups, refs):
        config = configrefs.group_config(group_refs, objects)
        found.append(config if track == "true" else configrefs.GroupConfig())
        meta = (group.get("template") or {}).get("metadata")
        for kind, annotation in configrefs.HASH_ANNOTATIONS.items():
            if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
                meta["annotations"].pop(annotation, None)
            if kind in config.hashes:
                stamp_group(group, config.hashes[kind], annotation)
                hashes[kind][key] = config.hashes[kind]
    return hashes, found, objects


def _check_object(doc: Document) -> tuple[str, str, str]:
    obj = doc.obj
    if not isinstance(obj, dict):
        raise RaygitopsError(
            f"document is a {type(obj).__name__}, not a Kubernetes object", doc.path, doc.line
        )
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api, str) or not api or not isinstance(kind, str) or not kind:
        raise RaygitopsError("document has no apiVersion and kind", doc.path, doc.line)
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        raise RaygitopsError("metadata is not a mapping", doc.path, doc.line)
    name = meta.get("name") or meta.get("generateName")
    if not isinstance(name, str) or not name:
        raise RaygitopsError(f"{kind} has no metadata.name", doc.path, doc.line)
    namespace = meta.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise RaygitopsError("metadata.namespace is not a string", doc.path, doc.line)
    return api_group(api), kind, name


def api_group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def refusal(problems: list[tuple[str, str]]) -> RaygitopsError | None:
    """One error of ``(field path, message)`` problems, each at its own field's line; None
    when there are none."""
    if not problems:
        return None
    (field, message), *rest = problems
    return RaygitopsError(message, field=field, also=[RaygitopsError(m, field=f) for f, m in rest])


# the field path a problem of k8snames.object_problem starts with, after its kind
# ("metadata.labels key ...", "spec.workerGroupSpecs[0].template.metadata.annotations['a/b'] ...")
_PROBLEM_FIELD = re.compile(r"[A-Za-z]\w*(?:\.\w+|\[[0-9]+\]|\['[^'\s]+'\])*")


def _check_accepted(group: str, kind: str, obj: dict[str, Any]) -> None:
    """Refuse what the API server would refuse (checked after render added its annotations),
    at the line of the field it names."""
    problem = object_problem(group, kind, obj)
    if problem:
        field = _PROBLEM_FIELD.match(problem.removeprefix(f"{kind} "))
        # a key in brackets (['raygitops.dev/x']) is a key of the mapping, as the locator reads it
        path = re.sub(r"\['([^']+)'\]", r".\1", field.group()) if field else None
        raise RaygitopsError(problem, field=path)
    problem = size_problem(group, kind, obj)
    if problem:
        raise RaygitopsError(problem)


def _is_own_hook_object(obj: Any) -> bool:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return isinstance(labels, dict) and all(labels.get(k) == v for k, v in HOOK_LABELS.items())


def _check_operator_knows_upgrade_strategy(version: str | None) -> None:
    """A kept ``spec.upgradeStrategy`` for an operator older than 1.6 would be dropped by its
    CRD (pruned, or refused under strict field validation): the user's intent would vanish."""
    if version is not None and not native.knows_upgrade_strategy(version):
        raise RaygitopsError(
            f"spec.upgradeStrategy: KubeRay {version} does not know this field (added in "
            f"{native.FIRST_VERSION}); its CRD drops it, so the operator would never recreate. "
            "Drop keepUpgradeStrategy (raygitops then carries the strategy in the "
            f"{names.STRATEGY_ANNOTATION} annotation) or correct kuberayVersion", field="spec.upgradeStrategy")


# schema errors listed at once for one RayCluster (the rest are counted)
MAX_SCHEMA_ERRORS = 20


def _check_schema(spec: dict[str, Any], kuberay_version: str | None, doc: Document) -> list[str]:
    """What the API server would prune or refuse is an error here, each at its own line (an
    unknown field only a warning when the target's own CRD is not known); the warnings."""
    found = crdschema.check_spec(spec, kuberay_version)
    if found.errors:
        shown = found.errors[:MAX_SCHEMA_ERRORS]
        errors = [RaygitopsError(problem, line=line) for problem, line in zip(shown, doc.lines_of(shown))]
        if len(found.errors) > len(shown):
            errors.append(RaygitopsError(f"and {len(found.errors) - len(shown)} more schema errors in this RayCluster",
                                         line=doc.line))
        raise RaygitopsError(errors[0].message, line=errors[0].line, also=errors[1:])
    return found.warnings


def _check_operator_accepts(obj: dict[str, Any], kuberay_version: str | None, kind: str = "RayCluster") -> None:
    """What the target operator's own validation refuses (it then builds no pods and stops
    reconciling the cluster) is an error here, naming its rule and line; for a RayJob or a
    RayService, of the cluster spec it embeds."""
    port = validation.port_for(kuberay_version)
    spec = obj.get("spec")
    where = "spec"
    if kind != "RayCluster":
        spec = spec.get(strategy.EMBEDDED_SPEC[kind]) if isinstance(spec, dict) else None
        where = f"spec.{strategy.EMBEDDED_SPEC[kind]}"
    refused = port and isinstance(spec, dict) and validation.refusal(spec, annotations(obj), labels(obj), port, kind)
    if refused:
        raise RaygitopsError(str(refused), field=f"{where}.{refused.where}" if refused.where else where)


def _render_cluster(doc: Document, namespace: str | None, settings: Settings, rules: HashRules,
                    configs: ConfigIndex) -> tuple[RenderedCluster, list[str]]:
    """The rendered cluster and the warnings about it."""
    obj = doc.obj
    if "name" not in obj["metadata"]:
        raise RaygitopsError("RayCluster needs metadata.name (generateName cannot be tracked)")
    spec = obj.get("spec")
    parts: SpecParts = split_spec(spec)  # validates the spec first
    chosen = strategy.cluster_strategy(obj, keep=settings.keep_upgrade_strategy)
    if not settings.keep_upgrade_strategy:
        strategy.move_strategy_to_annotation(obj, chosen)
    elif "upgradeStrategy" in spec:
        _check_operator_knows_upgrade_strategy(settings.kuberay_version)
    warnings = []
    if settings.validate_schema:
        warnings = _check_schema(spec, settings.kuberay_version, doc)
        _check_operator_accepts(obj, settings.kuberay_version)
    native_kept = strategy.native_recreate(obj)
    # A spec that keeps KubeRay's own Recreate keeps scheme h1 and is not config-hashed: the
    # operator hashes the template annotations, so a new stamp would restart the pods once
    # after an upgrade of raygitops (model/hashing.py).
    rules = rules.as_legacy() if native_kept else rules
    read = podrules.pod_annotations(annotations(obj))
    hashes = hash_spec(parts, rules, read)
    _write_hashes(spec, hashes)
    config, found, objects = _stamp_config(obj, spec, None if native_kept else configs, namespace)
    # The plan carries the stamped templates: the hook's resume patch writes them, and pods
    # created right after it must already carry their hash.
    parts = split_spec(spec)
    set_annotation(obj, HASHES_ANNOTATION, hashes.annotation())
    name = obj["metadata"]["name"]
    dashboard = jobs.Dashboard(jobs.head_service(name, spec), jobs.dashboard_port(spec))
    cluster = ClusterPlan(
        name=name,
        strategy=chosen,
        hashes=hashes,
        spec=parts,
        suspend=spec.get("suspend") is True,
        owner=strategy.cluster_owner(obj),
        native=native_kept,
        rules=rules,
        pod_annotations=read,
        max_unavailable=strategy.max_unavailable(obj, chosen),
        max_unavailable_by_group=strategy.max_unavailable_by_group(obj, chosen, parts.workers),
        config=config[configrefs.CONFIGMAP],
        config_maps=tuple(configrefs.tracked_names(found, configrefs.CONFIGMAP)),
        secret_config=config[configrefs.SECRET],
        secrets=tuple(configrefs.tracked_names(found, configrefs.SECRET)),
        jobs_policy=strategy.jobs_policy(obj, chosen, jobs.Policy(settings.running_jobs,
                                                                   settings.running_jobs_wait_seconds)),
        dashboard=None if dashboard == jobs.Dashboard(f"{name}-head-svc") else dashboard,
        preflight_policy=strategy.preflight_policy(obj, chosen, preflight.Policy(
            settings.preflight, settings.preflight_unknown, cluster_reads=namespace is not None)),
    )
    if cluster.asks is not None and dashboard.port is None and settings.validate_schema:
        raise RaygitopsError(f"RayCluster {name}: {jobs.no_dashboard(dashboard).detail}: the hook cannot ask its "
                             f"head for running jobs, so with policy {cluster.jobs_policy.action} every recreate "
                             "would fail while the head is Ready", field=jobs.HEAD_PORTS)
    return RenderedCluster(namespace, cluster.name, cluster, spec, f"{doc.path}:{doc.line}",
                           sorted({u for c in found for u in c.untracked}),
                           {ref: configrefs.content(objects[ref]) for c in found for ref in c.tracked}), warnings


CONFIG_KINDS = (configrefs.CONFIGMAP, configrefs.SECRET)


def _config_kind(obj: Any) -> str | None:
    """ConfigMap or Secret if ``obj`` is a named one, else None."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict) and obj.get("apiVersion") == "v1" and isinstance(meta.get("name"), str) \
            and obj.get("kind") in CONFIG_KINDS:
        return obj["kind"]
    return None


# names looked for in the documents kept unparsed, before the rest of them is parsed at once
MAX_NAMES_SEARCHED = 16


class ConfigIndex:
    """The app's ConfigMaps and Secrets by namespace and ``(kind, name)``, learnt as the
    documents go past.  A RayCluster may read one that comes later in the app, or that is
    not in it: the first such reference reads the app once more (so render never needs every
    document in memory at once), keeping the text of the documents that may be a ConfigMap or
    Secret (:func:`raygitops.sources.yamlio.unparsed_holding`); a name not found yet then
    parses those of them whose text may hold it, each at most once.  A reference to a
    ConfigMap the app does not have costs that one read, not a parse of every ConfigMap.
    Documents not read from text are all parsed at the first such reference."""

    def __init__(self, documents: Iterable[Document], default_namespace: str | None) -> None:
        self._documents = documents
        self._default_namespace = default_namespace
        self._found: dict[str | None, dict[tuple[str, str], dict[str, Any]]] = {}
        self._complete = False
        self._unparsed: list[Unparsed] | None = None  # read at the first reference not found
        self._searched: set[str] = set()  # names their text was searched for

    def add(self, doc: Document) -> None:
        """Take ``doc`` if it is a ConfigMap or a Secret (a broken Secret is an error)."""
        obj = doc.obj
        kind = _config_kind(obj)
        if kind is not None:
            meta = obj["metadata"]
            problem = configrefs.secret_problem(obj) if kind == configrefs.SECRET else None
            if problem:
                raise RaygitopsError(f"Secret {printable(meta['name'])[:100]}: {printable(problem)}", doc.path, doc.line)
            namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else self._default_namespace
            self._found.setdefault(namespace, {})[kind, meta["name"]] = obj

    def objects(self, namespace: str | None, wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """The ConfigMaps and Secrets of ``namespace``, with each of ``wanted`` the app has."""
        if not self._complete:
            found = self._found.get(namespace, {})
            names = {name for kind, name in wanted if (kind, name) not in found} - self._searched
            if names:
                self._look_ahead(names)
        return self._found.get(namespace, {})

    def _look_ahead(self, names: set[str]) -> None:
        """Take every ConfigMap and Secret of the app named one of ``names``."""
        if self._unparsed is None:
            unparsed = getattr(self._documents, "unparsed_holding", None)
            if unparsed is None:
                self._take(self._documents)
                self._complete = True
                return
            self._unparsed = list(unparsed(CONFIG_KINDS))
        self._searched |= names
        # past so many names, the rest at once: each search reads every text kept
        words = tuple(names) if len(self._searched) <= MAX_NAMES_SEARCHED else None
        kept = []
        for part in self._unparsed:
            if words is not None and not may_spell(part.text, words):
                kept.append(part)
                continue
            try:
                documents = part.documents()
            except RaygitopsError:  # a part that does not parse alone: every text parsed whole
                self._take(self._documents.holding(CONFIG_KINDS))  # type: ignore[attr-defined]
                kept = []
                break
            self._take(documents)
        self._unparsed = kept
        self._complete = not kept

    def _take(self, documents: Iterable[Document]) -> None:
        for doc in documents:
            if not _is_own_hook_object(doc.obj):
                self.add(doc)

    def payload(self, namespace: str | None, kind: str, name: str) -> dict[str, Any]:
        return configrefs.payload(self._found[namespace][kind, name])


class Render:
    """One render, document by document.  :meth:`objects` yields each app object as soon as
    its document is rendered, then the hook objects; :attr:`result` is whole once they are
    all taken.  With ``keep=False`` the result holds neither the objects nor the clusters
    (only the plans and warnings): ``raygitops render`` streams an app this way, dumping each
    object as it comes, so it holds one file's documents at a time.  Raises RaygitopsError
    located at the offending document."""

    def __init__(self, documents: Iterable[Document], settings: Settings, default_namespace: str | None,
                 keep: bool = True) -> None:
        self.result = RenderResult(default_namespace=default_namespace, settings=settings)
        self._documents, self._settings, self._keep = documents, settings, keep
        self._configs = ConfigIndex(documents, default_namespace)
        self._rules = HashRules(tuple(settings.hash_ignore)).for_kuberay(settings.kuberay_version)
        self._seen: dict[tuple[str, str, str, str], str] = {}
        self._plans: list[tuple[str | None, PackedCluster]] = []  # (namespace, plan) of every cluster
        self._warnings = AppWarnings()  # each message once, with its count (result.warnings at the end)

    def objects(self) -> Iterator[dict[str, Any]]:
        empty = True
        for doc in self._documents:
            empty = False
            # raygitops' own hook objects in the input (a rendered stream rendered again) are
            # made anew below: render is idempotent
            if not _is_own_hook_object(doc.obj):
                self._configs.add(doc)
                yield self._render(doc)
        if empty:
            raise RaygitopsError("the app has no documents: refusing to render an empty stream "
                                 "(Argo CD would prune every resource)")
        # what reading the app left out and says so (an object in a values file, ...), then
        # render's own, each once
        note = operators.rules_note(self._settings.kuberay_version)
        self.result.warnings = [*([note] if note else []), *getattr(self._documents, "warnings", []),
                                *self._warnings.lines()]
        yield from self._hooks()

    def collect(self) -> RenderResult:
        """The result with every object in it."""
        self.result.objects = list(self.objects())
        return self.result

    def _render(self, doc: Document) -> dict[str, Any]:
        group, kind, name = _check_object(doc)
        obj = doc.obj
        namespace = obj.get("metadata", {}).get("namespace") or self.result.default_namespace
        identity = (group, kind, namespace, name)
        where = f"{doc.path}:{doc.line}"
        if identity in self._seen and "generateName" not in obj.get("metadata", {}):
            raise RaygitopsError(
                f"{kind} {namespace + '/' if namespace else ''}{name} is defined twice (first at {self._seen[identity]})",
                doc.path, doc.line,
            )
        self._seen[identity] = where
        # Every namespaced object lands where the duplicate check, the hook's plan and Role,
        # and --output-dir take it to be, as kustomize's `namespace:` sets it (Argo CD would
        # otherwise put a namespace-less one in its destination, whatever raygitops.yaml
        # says); for Helm it stays where Helm puts it, and so does the hook.
        if namespace and namespaced(obj) and not obj["metadata"].get("namespace"):
            obj["metadata"]["namespace"] = namespace
        try:
            strategy.check_no_hook_annotations(obj)
            if self._settings.validate_schema:  # off for a diff's base: what runs today, whatever it holds
                refused = refusal([*(objectfields.unknown_fields(obj) if group == "ray.io" else ()),
                                   *(strategy.annotation_problems(obj) if is_raycluster(obj) else ())])
                if refused:
                    raise refused
            if is_raycluster(obj):
                cluster, warnings = _render_cluster(doc, namespace, self._settings, self._rules, self._configs)
                for warning in warnings:
                    self._warnings.add(printable(where), warning)
                self._plans.append((namespace, cluster.plan.packed()))
                if self._keep:
                    self.result.clusters.append(cluster)
            elif group == "ray.io" and kind in strategy.EMBEDDED_SPEC:
                strategy.check_embedded_opt_in(obj)
                if self._settings.validate_schema:
                    _check_operator_accepts(obj, self._settings.kuberay_version, kind)
            _check_accepted(group, kind, obj)
        except RaygitopsError as err:
            raise doc.locate_error(err) from None
        if self._keep:
            self.result.sources.append(where)
        return obj

    def _hooks(self) -> Iterator[dict[str, Any]]:
        settings = self._settings
        hook = HookSettings(
            drain_grace_seconds=settings.drain_grace_seconds,
            timeout_seconds=settings.timeout_seconds,
            max_parallel=settings.max_parallel,
            wait_ready=settings.wait_ready,
        )
        # A namespace gets the hook when a cluster opts in, or asks for the operator's own
        # Recreate: the hook then recreates nothing there but checks it will work (the arming
        # trap, a CRD that drops the field) and says so.
        namespaces = sorted({ns for ns, c in self._plans if strategy.opted_in(c.strategy) or c.native},
                            key=lambda ns: ns or "")
        if namespaces and unserved_image(settings.hook_image):
            self.result.warnings.append(
                f"hook image {settings.hook_image}: no registry serves it, so the hook Job's pod cannot pull it "
                "(it waits in ImagePullBackOff until its deadline): set hook.image (the hook-image parameter, "
                f"--hook-image or {HOOK_IMAGE_ENV}) to the raygitops image you pushed")
        if None in namespaces and len(namespaces) > 1:
            # Helm would put both hooks in the release namespace if it is one of the named ones,
            # and the second plan would replace the first.
            raise RaygitopsError(
                "--helm: some RayClusters name a namespace and some leave it to Helm "
                f"({', '.join(c.name for ns, c in self._plans if ns is None)}): "
                "their hook objects could collide in the release namespace; give --namespace")
        if None in namespaces and any(c.preflights for _, c in self._plans):
            self.result.warnings.append(
                "--helm without a namespace: the hook gets no ClusterRole (a ClusterRoleBinding must name the "
                "namespace of its ServiceAccount), so its preflight does not check nodes, PriorityClasses nor "
                "RuntimeClasses; give --namespace for the full preflight (docs/presync.md#preflight)")
        for ns in namespaces:
            clusters = [c for cluster_ns, c in self._plans if cluster_ns == ns]
            plan = Plan(
                namespace=ns,
                clusters=clusters,
                settings=hook,
                app=settings.app_name,
                hash_ignore=tuple(settings.hash_ignore),
                pod_rules=self._rules.pods,
                config_maps={name: self._configs.payload(ns, configrefs.CONFIGMAP, name)
                             for c in clusters for name in c.config_maps},
                secrets={name: self._configs.payload(ns, configrefs.SECRET, name)
                         for c in clusters for name in c.secrets},
            )
            self.result.plans.append(plan)
            for hook_object in hook_resources(plan, settings):
                _check_accepted(api_group(hook_object["apiVersion"]), hook_object["kind"], hook_object)
                yield hook_object


def render_documents(documents: Iterable[Document], settings: Settings, default_namespace: str | None) -> RenderResult:
    """Render parsed documents, every object kept in the result (:class:`Render`)."""
    return Render(documents, settings, default_namespace).collect()
