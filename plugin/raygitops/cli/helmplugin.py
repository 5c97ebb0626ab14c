"""Running as Helm 4's post-renderer plugin (``helm-plugin/plugin.yaml``): what Helm drops.

Helm 4 runs a ``postrenderer/v1`` plugin with the user's environment plus ``HELM_PLUGIN_NAME``
and ``HELM_PLUGIN_DIR``, and discards its stderr: a failed render shows only
``plugin "raygitops" exited with error``.  So under Helm the one-line error (and a render's
warnings) also go where the user can read them: the terminal Helm runs in, when it has one,
and, for errors, a file in the user's cache that the next run replaces (and a successful
run removes), which a CI job can print.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

ERROR_FILE = "helm-render-error.txt"


def under_helm_plugin(env: Mapping[str, str] = os.environ) -> bool:
    return bool(env.get("HELM_PLUGIN_NAME"))


def error_file(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/raygitops/helm-render-error.txt`` (``~/.cache`` by default)."""
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "raygitops" / ERROR_FILE


def to_terminal(line: str) -> None:
    """Write ``line`` to the controlling terminal, if there is one (none in CI: nothing)."""
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(line + "\n")
    except OSError:
        pass


def report_error(line: str, env: Mapping[str, str] = os.environ) -> None:
    """The error where Helm's user sees it: the terminal (naming the file) and the file."""
    path = error_file(env)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line + "\n", encoding="utf-8")
        to_terminal(f"{line} (Helm drops a post-renderer's messages: kept in {path})")
    except OSError:
        to_terminal(line)


def clear_error(env: Mapping[str, str] = os.environ) -> None:
    """A successful render: no earlier error left to be mistaken for this run's."""
    try:
        error_file(env).unlink(missing_ok=True)
    except OSError:
        pass
