"""Read an app: its manifest files, values and templates, into parsed documents.

The app directory is the trust boundary: nothing outside it is read (symlinks included), and
files are taken in a fixed order (sorted relative paths) so output is deterministic.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from raygitops.errors import RaygitopsError, printable
from raygitops.model.names import OUT_MARKER
from raygitops.sources.settings import CONFIG_NAMES, Settings, argocd_parameters
from raygitops.sources.yamlio import Document, Unparsed, decode, documents_holding, load_documents, unparsed_holding

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
TEMPLATE_SUFFIX = ".j2"
MAX_FILE_BYTES = 32 * 1024 * 1024


def _display(app_dir: Path, shown_as: str, path: Path) -> str:
    rel = path.relative_to(app_dir).as_posix()
    return printable(rel if shown_as in ("", ".") else f"{shown_as.rstrip('/')}/{rel}")


def _display_setting(shown_as: str, value: str) -> str:
    """How a path named in the app config is shown (it may be absolute or climb out)."""
    if os.path.isabs(value) or shown_as in ("", "."):
        return printable(value)
    return printable(f"{shown_as.rstrip('/')}/{value}")


def _resolve(path: Path, display: str) -> Path:
    try:
        return path.resolve()
    except RuntimeError:  # a symlink loop (Python < 3.13)
        raise RaygitopsError("symlink loop", display) from None
    except OSError as err:  # ELOOP (Python >= 3.13), ENAMETOOLONG, ...
        raise RaygitopsError(f"cannot resolve path: {err.strerror}", display) from None


def _inside(root: Path, path: Path, display: str) -> Path:
    resolved = _resolve(path, display)
    try:
        resolved.relative_to(root)
    except ValueError:
        raise RaygitopsError("path leads outside the app directory", display) from None
    return resolved


def _too_large(display: str) -> RaygitopsError:
    return RaygitopsError(f"file larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB", display)


def check_app_file(root: Path, path: Path, display: str) -> Path:
    """``path`` resolved, if it is a regular file inside ``root`` no larger than the bound."""
    resolved = _inside(root, path, display)
    if not resolved.is_file():
        raise RaygitopsError("not a regular file", display)
    if resolved.stat().st_size > MAX_FILE_BYTES:
        raise _too_large(display)
    return resolved


def read_text(root: Path, path: Path, display: str) -> str:
    """Read and decode one file inside ``root`` (size-bounded)."""
    return decode(check_app_file(root, path, display).read_bytes(), display)


def read_stdin(stream: Any, display: str) -> bytes:
    """All of a byte stream, bounded like a file (a runaway pipe must not eat the memory)."""
    data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(display)
    return data


def is_values_file(rel: str) -> bool:
    """Values files are never manifests: ``values*.yaml`` anywhere, or under ``values/``."""
    parts = rel.split("/")
    return parts[0] == "values" or fnmatch.fnmatch(parts[-1], "values*.y*ml")


def _walk(app_dir: Path, shown_as: str) -> Iterator[tuple[Path, list[str]]]:
    """Each directory of the app (symlinked ones followed while they stay inside it, each
    real directory once) and its file names; hidden entries and directories ``render --out``
    wrote (they hold its marker) left out: render never reads its own output (the Flux
    layout keeps ``rendered/`` beside the app).  A symlinked directory that leads outside the
    app is an error, as a symlinked file is."""
    root = _resolve(app_dir, shown_as)
    seen = {root}
    for dirpath, dirnames, filenames in os.walk(app_dir, followlinks=True):
        kept = []
        # real directories first: a link to one of them is the one left out
        for d in sorted(dirnames, key=lambda d: ((Path(dirpath) / d).is_symlink(), d)):
            path = Path(dirpath) / d
            if d.startswith(".") or (path / OUT_MARKER).is_file():
                continue
            real = _inside(root, path, _display(app_dir, shown_as, path)) if path.is_symlink() else path.resolve()
            if real not in seen:
                seen.add(real)
                kept.append(d)
        dirnames[:] = kept
        yield Path(dirpath), filenames


def app_files(app_dir: Path, skip: Iterable[Path], exclude: list[str], shown_as: str = ""
              ) -> tuple[list[Path], list[Path]]:
    """Manifest and template files under ``app_dir``, sorted (:func:`_walk`); and the values
    files among them that nothing reads (``skip``: the values files the app uses)."""
    skipped = {_resolve(p, str(p)) for p in skip}
    found: list[Path] = []
    unread: list[Path] = []
    for dirpath, filenames in _walk(app_dir, shown_as):
        for name in filenames:
            if name.startswith(".") or name in CONFIG_NAMES:
                continue
            if not (name.endswith(MANIFEST_SUFFIXES) or name.endswith(TEMPLATE_SUFFIX)):
                continue
            path = dirpath / name
            rel = path.relative_to(app_dir).as_posix()
            if any(fnmatch.fnmatch(rel, pattern) for pattern in exclude):
                continue
            if not path.is_symlink() and path.resolve() in skipped:
                continue
            (unread if is_values_file(rel) else found).append(path)
    order = lambda p: p.relative_to(app_dir).as_posix()  # noqa: E731
    return sorted(found, key=order), sorted(unread, key=order)


def objects_in_values_files(root: Path, app_dir: Path, shown_as: str, files: list[Path]) -> list[str]:
    """``path:line: ...`` for each Kubernetes object (apiVersion and kind) in a values file
    nothing reads: values files are never manifests, so it would be dropped without a word
    (with Argo CD's prune, a RayCluster moved there is deleted)."""
    found = []
    for path in files:
        display = _display(app_dir, shown_as, path)
        if path.name.endswith(TEMPLATE_SUFFIX):
            continue
        try:
            text = read_text(root, path, display)
            if "apiVersion" not in text or "kind" not in text:
                continue
            documents = list(load_documents(text, display, lists=True))
        except RaygitopsError:  # not a manifest, not ours to judge
            continue
        for doc in documents:
            obj = doc.obj
            if isinstance(obj, dict) and isinstance(obj.get("apiVersion"), str) and isinstance(obj.get("kind"), str):
                name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
                found.append(f"{display}:{doc.line}: {printable(obj['kind'])} {printable(str(name))[:100]} is not "
                             "rendered: files named values*.yaml or under values/ are never manifests (rename "
                             "the file, or add it to exclude)")
    return found


def deep_merge(base: dict, extra: dict) -> dict:
    """``extra`` over ``base``: mappings merged key by key, anything else replaced (values
    files; and ``raygitops status``'s live spec after a sync applies Git's)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _set_dotted(values: dict, dotted: str, value: str) -> dict:
    head, _, rest = dotted.partition(".")
    if not rest:
        return {**values, head: value}
    child = values.get(head)
    return {**values, head: _set_dotted(child if isinstance(child, dict) else {}, rest, value)}


def load_values(
    files: list[tuple[Path, str]], overrides: Mapping[str, str], root: Path | None
) -> dict[str, Any]:
    """Merge values files in order (later wins, mappings merged deeply), then overrides."""
    values: dict[str, Any] = {}
    for path, display in files:
        if root is not None:
            text = read_text(root, path, display)
        else:
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise _too_large(display)
                text = decode(path.read_bytes(), display)
            except OSError as err:
                raise RaygitopsError(f"cannot read values file: {err.strerror}", display) from None
        for doc in load_documents(text, display):
            if not isinstance(doc.obj, dict):
                raise RaygitopsError("values file is not a mapping", display, doc.line)
            values = deep_merge(values, doc.obj)
    for dotted, value in overrides.items():
        values = _set_dotted(values, dotted, value)
    return values


def template_context(values: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """What a template sees: the values at top level and under ``values``; Argo CD's
    build environment under ``argocd`` (app_name, app_namespace, revision, …), ``env``
    (ARGOCD_ENV_* without the prefix) and ``params`` (ARGOCD_APP_PARAMETERS by name)."""
    argocd = {
        key[len("ARGOCD_"):].lower(): value
        for key, value in env.items()
        if key.startswith("ARGOCD_APP_") and key != "ARGOCD_APP_PARAMETERS"
    }
    for key in ("KUBE_VERSION", "KUBE_API_VERSIONS"):
        if key in env:
            argocd[key.lower()] = env[key]
    params = {
        p["name"]: p.get("string", p.get("array", p.get("map")))
        for p in argocd_parameters(env)
        if isinstance(p.get("name"), str)
    }
    env_vars = {k[len("ARGOCD_ENV_"):]: v for k, v in env.items() if k.startswith("ARGOCD_ENV_")}
    return {**values, "values": values, "argocd": argocd, "env": env_vars, "params": params}


class AppDocuments:
    """The documents of an app directory, in file order, parsed one file at a time as they
    are iterated: a render holds one file's documents, not the app's.  Iterating again reads
    the files again."""

    def __init__(self, root: Path, app_dir: Path, shown_as: str, files: list[Path],
                 context: Callable[[], dict[str, Any]]) -> None:
        self._root, self._app_dir, self._shown_as, self._files = root, app_dir, shown_as, files
        self._context = context
        self._renderer: Any = None
        self.warnings: list[str] = []  # "path:line: message": what of the app is not rendered

    def __iter__(self) -> Iterator[Document]:
        for path in self._files:
            yield from load_documents(*self._read(path), lists=True)

    def holding(self, words: tuple[str, ...]) -> Iterator[Document]:
        """Only the documents in which a scalar may be one of ``words``, the others not
        parsed (:func:`raygitops.sources.yamlio.documents_holding`)."""
        for path in self._files:
            yield from documents_holding(*self._read(path), words)

    def unparsed_holding(self, words: tuple[str, ...]) -> Iterator[Unparsed]:
        """The same, not parsed yet: each file read (and templated) once more, and only the
        text of those documents kept (:func:`raygitops.sources.yamlio.unparsed_holding`)."""
        for path in self._files:
            yield from unparsed_holding(*self._read(path), words)

    def _read(self, path: Path) -> tuple[str, str]:
        """The text of one file, templated if it is a template, and how it is shown."""
        display = _display(self._app_dir, self._shown_as, path)
        text = read_text(self._root, path, display)
        if path.name.endswith(TEMPLATE_SUFFIX):
            if self._renderer is None:
                from raygitops.sources.templating import TemplateRenderer

                self._renderer = TemplateRenderer(self._root, self._context())
            text = self._renderer.render(path, display)
        return text, display


def read_app(
    app_dir: Path, shown_as: str, settings: Settings, env: Mapping[str, str],
    cli_values: list[str],
) -> AppDocuments:
    """Every document of an app directory, templates rendered, in file order."""
    root = app_dir.resolve()
    values_files = [
        (_inside(root, app_dir / v, _display_setting(shown_as, v)), _display_setting(shown_as, v))
        for v in settings.values_files
    ]
    for v in cli_values:  # given on the command line by the user: trusted, any path
        values_files.append((Path(v), v))
    files, unread = app_files(app_dir, [p for p, _ in values_files], settings.exclude, shown_as)
    # Read now, templates or not: a values file that is missing or broken is an error even
    # where no template would read it (a typo in --values must not pass silently).
    values = load_values(values_files, settings.value_overrides, None)
    documents = AppDocuments(root, app_dir, shown_as, files, lambda: template_context(values, env))
    documents.warnings = objects_in_values_files(root, app_dir, shown_as, unread)
    return documents
