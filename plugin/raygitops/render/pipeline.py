"""One entry point from an app (directory, file or stdin) to a RenderResult.

render, hash and diff all go through here, so the three agree on what an app renders to.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from raygitops.errors import RaygitopsError
from raygitops.render.renderer import Render, RenderResult
from raygitops.sources.settings import (
    Settings,
    apply_environment,
    apply_overrides,
    apply_parameters,
    argocd_parameters,
    default_namespace,
    find_config,
    load_config,
)
from raygitops.sources.files import (
    TEMPLATE_SUFFIX,
    check_app_file,
    load_values,
    read_app,
    read_stdin,
    read_text,
    template_context,
)
from raygitops.sources.yamlio import Document, TextDocuments, decode

STDIN = "-"


def resolve_settings(
    path: str, config: str | None, env: Mapping[str, str], overrides: Mapping[str, Any]
) -> Settings:
    """Defaults < environment < app config file < Argo CD parameters < CLI flags."""
    settings = Settings()
    apply_environment(settings, env)
    config_path: Path | None = Path(config) if config else None
    # A single file belongs to the app of its directory: the same settings as rendering it
    # (render and hash agree on the namespace, the strategy setting, ...).
    app_dir = Path(path) if path != STDIN and Path(path).is_dir() else (
        Path(path).parent if path != STDIN and Path(path).is_file() else None)
    if config_path is None and app_dir is not None:
        config_path = find_config(app_dir)
        if config_path is not None:
            # The app's own config file is untrusted like every file of the app: it must
            # not lead outside it (a symlink to a secret would echo its keys in errors).
            check_app_file(app_dir.resolve(), config_path, str(config_path))
    if config_path is not None:
        if not config_path.is_file():
            raise RaygitopsError("config file not found", str(config_path))
        load_config(settings, config_path, str(config_path))
    apply_parameters(settings, argocd_parameters(env))
    apply_overrides(settings, overrides)
    return settings


def read_documents(
    path: str, settings: Settings, env: Mapping[str, str], cli_values: list[str],
    stdin: Any = None, template_stdin: bool = False,
) -> Iterable[Document]:
    """The documents of a directory (its files; or what ``helm template`` or ``kustomize
    build`` makes of a chart or a kustomization: :mod:`raygitops.sources.generators`), one
    file, or stdin (``-``), parsed as they are iterated (each iteration parses again:
    render's :class:`~raygitops.render.renderer.ConfigIndex` may look ahead).  A single ``*.j2`` file is templated as in a directory (the values of
    ``--values``), and stdin when asked (``--template``: a helm or kustomize stream may hold
    ``{{ }}`` of its own); values files given are read, and refused when missing or broken,
    whatever the input."""
    if path == STDIN:
        values = load_values([(Path(v), v) for v in cli_values], settings.value_overrides, None)
        text = decode(read_stdin(stdin or sys.stdin.buffer, "<stdin>"), "<stdin>")
        if template_stdin:
            from raygitops.sources.templating import TemplateRenderer

            # includes resolve inside the working directory, as they would inside an app
            text = TemplateRenderer(Path.cwd().resolve(), template_context(values, env)).render_text(text, "<stdin>")
        return TextDocuments(text, "<stdin>")
    target = Path(path)
    if target.is_dir():
        from raygitops.sources import generators

        kind = generators.app_kind(target)
        if kind is not None and kind[0] == generators.HELM:
            return generators.helm_documents(target, path, settings, env, default_namespace(settings, env), cli_values)
        if kind is not None:
            return generators.kustomize_documents(target, path, settings, env, cli_values)
        return read_app(target, path, settings, env, cli_values)
    if target.is_file():
        values = load_values([(Path(v), v) for v in cli_values], settings.value_overrides, None)
        root = target.resolve().parent
        text = read_text(root, target, path)
        if target.name.endswith(TEMPLATE_SUFFIX):
            from raygitops.sources.templating import TemplateRenderer

            text = TemplateRenderer(root, template_context(values, env)).render(target, path)
        return TextDocuments(text, path)
    raise RaygitopsError("no such file or directory", path)


def start_render(
    path: str,
    *,
    cli_values: list[str] | None = None,
    config: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    stdin: Any = None,
    template_stdin: bool = False,
    keep: bool = True,
) -> Render:
    """An app's render, ready to yield its objects (:class:`raygitops.render.renderer.Render`; with
    ``keep=False`` the result keeps none of them: the caller writes each as it comes)."""
    env = os.environ if env is None else env
    settings = resolve_settings(path, config, env, overrides or {})
    documents = read_documents(path, settings, env, list(cli_values or []), stdin, template_stdin)
    return Render(documents, settings, default_namespace(settings, env), keep=keep)


def render_app(path: str, **options: Any) -> RenderResult:
    """Render an app the way ``raygitops render`` does, every object kept in the result
    (options: those of :func:`start_render` but ``keep``)."""
    return start_render(path, **options).collect()
