"""An app that is a Helm chart or a kustomization: the stream ``helm template`` or
``kustomize build`` makes of it, for render to render.

The kind is found as Argo CD finds it (``util/app/discovery``): a kustomization file in the
app directory makes it a kustomize app, else a ``Chart.yaml`` a Helm chart, else its files
are manifests and templates.  The tool runs as a subprocess (an argv list, never a shell)
with a clean environment (an empty home: no plugins, repositories or credentials of the
machine), bounded time and output, and no way to fetch anything:

- ``helm template`` reads the chart directory, its ``charts/`` for dependencies, and the
  values files the app names (inside the app; the ``values`` parameter becomes one more
  file, never Helm's ``--set`` syntax); Helm never downloads for ``template`` of a local
  chart, and a dependency missing from ``charts/`` is Helm's error;
- ``kustomize build`` runs with its root-only load restrictor and without Helm, plugins or
  exec functions; before it runs, every kustomization it would read is read here: a remote
  resource (a URL, a Git reference) is refused, and so is any path leading outside the tree
  render may read.

That tree is the app directory; under Argo CD's plugin (``ARGOCD_APP_SOURCE_PATH`` is the
tail of the working directory) it is the repository checkout Argo CD handed over, so an
overlay may use ``../base`` as with Argo CD's own kustomize.  A symlink leading outside it is
refused (Helm follows symlinks in a chart).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from raygitops.errors import RaygitopsError, printable
from raygitops.sources.files import MAX_FILE_BYTES, load_values, read_text
from raygitops.sources.settings import Settings
from raygitops.sources.yamlio import Document, decode, documents_holding, load_documents

HELM, KUSTOMIZE = "helm", "kustomize"
CHART_FILE = "Chart.yaml"
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")  # Argo CD's, in its order
# wall-clock seconds a tool may take: Argo CD gives the whole generate 60 s
TOOL_SECONDS = 45
# files and directories walked for symlinks before a tool runs (a bound, not a feature)
MAX_WALKED = 100_000
_SOURCE = re.compile(r"^# Source: (.+)$", re.MULTILINE)
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|git::|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=|//",
                     re.IGNORECASE)


def app_kind(app_dir: Path) -> tuple[str, Path] | None:
    """(HELM or KUSTOMIZE, the file that says so) for a chart or kustomization app, else None.
    Both present: kustomize, as Argo CD decides."""
    for name in KUSTOMIZATION_FILES:
        if (app_dir / name).is_file():
            return KUSTOMIZE, app_dir / name
    if (app_dir / CHART_FILE).is_file():
        return HELM, app_dir / CHART_FILE
    return None


# ----------------------------------------------------------------------------- what may be read


@dataclass(frozen=True)
class Boundary:
    """The tree render may read, and how an error names it."""

    root: Path
    name: str  # "the app directory" or "the repository Argo CD checked out"
    hint: str = ""  # the way that works instead, added to the error

    def inside(self, path: Path, display: str, what: str = "path") -> Path:
        """``path`` resolved (symlinks followed), if it stays inside; else the error."""
        try:
            resolved = path.resolve()
            resolved.relative_to(self.root)
        except (OSError, RuntimeError, ValueError):
            raise RaygitopsError(f"{what} leads outside {self.name}{self.hint}", display) from None
        return resolved


def boundary(app_dir: Path, env: Mapping[str, str], outside_hint: str = "") -> Boundary:
    """The tree render may read: the app directory (an error leaving it ends with
    ``outside_hint``), or under Argo CD's plugin the checkout Argo CD handed over (the
    working directory minus ``ARGOCD_APP_SOURCE_PATH``)."""
    app = app_dir.resolve()
    source_path = (env.get("ARGOCD_APP_SOURCE_PATH") or "").strip("/")
    cwd = Path.cwd().resolve()
    if source_path and source_path != "." and app == cwd:
        parts = Path(source_path).parts
        if ".." not in parts and cwd.parts[-len(parts):] == parts:
            return Boundary(Path(*cwd.parts[:-len(parts)]), "the repository Argo CD checked out")
    return Boundary(app, "the app directory", outside_hint)


def _check_symlinks(bound: Boundary, top: Path, display: str) -> None:
    """No symlink under ``top`` leads outside ``bound`` (Helm loads a chart's files through them)."""
    walked = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [*dirnames, *filenames]:
            walked += 1
            if walked > MAX_WALKED:
                raise RaygitopsError(f"more than {MAX_WALKED} files and directories", display)
            path = Path(dirpath) / name
            if path.is_symlink():
                bound.inside(path, f"{display}/{path.relative_to(top).as_posix()}", "symlink")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# kustomization fields naming other kustomizations or files (kustomize's types.Kustomization)
_RESOURCE_FIELDS = ("resources", "bases", "components")
_FILE_FIELDS = ("crds", "configurations", "patchesStrategicMerge", "generators", "transformers", "validators")


def _kustomization_paths(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, path) of every path a kustomization names, resources first."""
    for key in _RESOURCE_FIELDS:
        for value in _strings(doc.get(key)):
            yield key, value
    for key in _FILE_FIELDS:
        for value in _strings(doc.get(key)):
            if "\n" not in value:  # an inline patch or plugin configuration is YAML, not a path
                yield key, value
    for key in ("patches", "patchesJson6902", "replacements"):
        for item in doc.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                yield key, item["path"]
    for key in ("configMapGenerator", "secretGenerator"):
        for item in doc.get(key) or []:
            if isinstance(item, dict):
                for value in [*_strings(item.get("files")), *_strings(item.get("envs")), *_strings(item.get("env"))]:
                    yield key, value.split("=", 1)[-1]  # "key=path" names a key
    if isinstance(doc.get("openapi"), dict) and isinstance(doc["openapi"].get("path"), str):
        yield "openapi", doc["openapi"]["path"]
    if doc.get("helmCharts") or doc.get("helmChartInflationGenerator"):
        yield "helmCharts", "//"  # kustomize would pull a chart: refused as remote


def check_kustomization(bound: Boundary, directory: Path, display: str, seen: set[Path] | None = None) -> None:
    """Refuse what ``kustomize build directory`` would fetch (remote resources, Helm charts)
    or read outside ``bound``, reading every kustomization it would read."""
    seen = set() if seen is None else seen
    real = bound.inside(directory, display)
    if real in seen:
        return
    seen.add(real)
    found = next((real / n for n in KUSTOMIZATION_FILES if (real / n).is_file()), None)
    if found is None:
        return  # kustomize says what is missing
    where = f"{display}/{found.name}"
    text = read_text(bound.root, found, where)
    for doc in load_documents(text, where):
        if not isinstance(doc.obj, dict):
            continue
        for key, value in _kustomization_paths(doc.obj):
            if _REMOTE.search(value):
                raise RaygitopsError(f"{key}: {printable(value)[:200]}: a remote resource (kustomize would fetch "
                                     f"it): render reads {bound.name} only", where, doc.line)
            target = real / value
            shown = f"{display}/{value}"
            if not os.path.lexists(target):
                if key in _RESOURCE_FIELDS:  # kustomize would take a missing path for a URL
                    raise RaygitopsError(f"{key}: {printable(value)[:200]}: no such file or directory",
                                         where, doc.line)
                continue
            resolved = bound.inside(target, shown)
            if resolved.is_dir():
                check_kustomization(bound, resolved, shown, seen)


# ----------------------------------------------------------------------------- running a tool


def _limits() -> None:  # in the child, before exec: its output files cannot outgrow the bound
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES + 1, MAX_FILE_BYTES + 1))


def run_tool(argv: list[str], cwd: Path, home: Path, env: Mapping[str, str], display: str) -> str:
    """Run ``argv`` (no shell) with only ``env``, bounded in time and output; its stdout."""
    name = Path(argv[0]).name
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env={"HOME": str(home), "PATH": "/usr/bin:/bin", **env},
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                    preexec_fn=_limits)
        except OSError as error:
            raise RaygitopsError(f"cannot run {name}: {error.strerror}", display) from None
        try:
            code = proc.wait(TOOL_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RaygitopsError(f"{name} took longer than {TOOL_SECONDS} s", display) from None
        out.seek(0)
        data = out.read(MAX_FILE_BYTES + 1)
        if code == -signal.SIGXFSZ or len(data) > MAX_FILE_BYTES:
            raise RaygitopsError(f"{name} wrote more than {MAX_FILE_BYTES // (1024 * 1024)} MiB", display)
        if code != 0:
            err.seek(0)
            lines = [line.strip() for line in err.read(64 * 1024).decode("utf-8", "replace").splitlines()
                     if line.strip() and not line.lower().startswith(("warning", "# "))]
            said = next((line for line in lines if line.startswith(("Error:", "error:"))),
                        lines[-1] if lines else f"exit {code}")
            raise RaygitopsError(f"{' '.join(argv[:2]).replace(argv[0], name)} failed: {printable(said)[:500]}",
                                 display)
        return decode(data, display)


def _tool(name: str, marker: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RaygitopsError(f"a {'Helm chart' if name == HELM else 'kustomization'} app, but {name} is not "
                             f"installed (the raygitops image carries it; elsewhere: {name} "
                             f"{'template' if name == HELM else 'build'} ... | raygitops render -)", marker)
    return found


# ----------------------------------------------------------------------------- the two tools


@dataclass(frozen=True)
class SourcedDocuments:
    """The documents of a tool's output, each part shown as the file it came from."""

    parts: tuple[tuple[str, str], ...]  # (text, path shown)

    def __iter__(self) -> Iterator[Document]:
        for text, path in self.parts:
            yield from load_documents(text, path, lists=True)

    def holding(self, words: tuple[str, ...]) -> Iterator[Document]:
        for text, path in self.parts:
            yield from documents_holding(text, path, words)


def _helm_parts(text: str, chart_name: str, display: str) -> tuple[tuple[str, str], ...]:
    """``helm template``'s stream cut at its ``# Source: <chart>/templates/x.yaml`` comments,
    each part shown as ``<app>/templates/x.yaml (rendered)``, its lines counted from the
    first line Helm rendered of that template."""
    marks = list(_SOURCE.finditer(text))
    head = text[:marks[0].start()] if marks else text
    parts = [(head, f"{display} (helm template)")] if head.strip().strip("-").strip() else []
    for mark, end in zip(marks, [m.start() for m in marks[1:]] + [len(text)]):
        source = mark.group(1).strip()
        source = source[len(chart_name) + 1:] if source.startswith(chart_name + "/") else source
        parts.append((text[mark.end() + 1:end], f"{display}/{source} (rendered)"))
    return tuple(parts)


def helm_documents(app_dir: Path, display: str, settings: Settings, env: Mapping[str, str],
                   namespace: str | None, cli_values: list[str]) -> SourcedDocuments:
    bound = boundary(app_dir, env)
    chart = app_dir.resolve()
    marker = f"{display}/{CHART_FILE}"
    _check_symlinks(bound, chart, display)
    helm = _tool(HELM, marker)
    # values files inside the app, as for templates (the class of Argo CD's CVE-2022-24348)
    app = Boundary(chart, "the app directory")
    values = [app.inside(app_dir / v, f"{display}/{v}") for v in settings.values_files]
    with tempfile.TemporaryDirectory(prefix="raygitops-helm-") as home:
        argv = [helm, "template", _release(env, chart), str(chart), "--include-crds"]
        if namespace:
            argv += ["--namespace", namespace]
        if env.get("KUBE_VERSION"):
            argv += ["--kube-version", env["KUBE_VERSION"]]
        argv += [a for v in (env.get("KUBE_API_VERSIONS") or "").split(",") if v.strip() for a in ("--api-versions", v.strip())]
        for path in [*values, *(Path(v).resolve() for v in cli_values)]:
            argv += ["--values", str(path)]
        if settings.value_overrides:  # the `values` parameter: one more values file, no --set parsing
            import yaml

            overrides = Path(home) / "overrides.yaml"
            overrides.write_text(yaml.safe_dump(load_values([], settings.value_overrides, None)))
            argv += ["--values", str(overrides)]
        homes = {f"HELM_{k}": str(Path(home) / k.lower()) for k in ("CACHE_HOME", "CONFIG_HOME", "DATA_HOME")}
        text = run_tool(argv, chart, Path(home), {
            **homes, "HELM_PLUGINS": str(Path(home) / "plugins"), "KUBECONFIG": os.devnull,
            "HELM_REPOSITORY_CONFIG": os.devnull, "HELM_REGISTRY_CONFIG": os.devnull}, marker)
    return SourcedDocuments(_helm_parts(text, _chart_name(chart, marker), display))


def _release(env: Mapping[str, str], chart: Path) -> str:
    """Argo CD's release name: the Application's name; outside Argo CD the directory's."""
    return env.get("ARGOCD_APP_NAME") or chart.name


def _chart_name(chart: Path, marker: str) -> str:
    for doc in load_documents(read_text(chart, chart / CHART_FILE, marker), marker):
        if isinstance(doc.obj, dict) and isinstance(doc.obj.get("name"), str):
            return doc.obj["name"]
    return chart.name


def kustomize_documents(app_dir: Path, display: str, settings: Settings, env: Mapping[str, str],
                        cli_values: list[str]) -> SourcedDocuments:
    kustomization = app_kind(app_dir)[1]  # type: ignore[index]
    marker = f"{display}/{kustomization.name}"
    if settings.values_files or settings.value_overrides or cli_values:
        raise RaygitopsError("values are for templates and Helm charts: a kustomization takes none (set them in "
                             "the kustomization)", marker)
    # Only Argo CD's checkout bounds what an overlay reads beyond its directory: elsewhere the
    # user builds it (a base beside the overlay is kustomize's usual layout).
    pipe = f" (outside Argo CD, build the overlay first: kustomize build {display} | raygitops render -)"
    check_kustomization(boundary(app_dir, env, pipe), app_dir, display)
    kustomize = _tool(KUSTOMIZE, marker)
    with tempfile.TemporaryDirectory(prefix="raygitops-kustomize-") as home:
        text = run_tool([kustomize, "build", str(app_dir.resolve()), "--load-restrictor", "LoadRestrictionsRootOnly"],
                        app_dir.resolve(), Path(home),
                        {"XDG_CONFIG_HOME": home, "KUSTOMIZE_PLUGIN_HOME": str(Path(home) / "plugins")}, marker)
    return SourcedDocuments(((text, f"{display} (kustomize build)"),))
