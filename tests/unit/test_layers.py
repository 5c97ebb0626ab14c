"""The package's layers and their one-way arrows (docs/design.md "Layers").

Every import of every module of ``plugin/raygitops`` (module level, inside functions, under
``TYPE_CHECKING``) is read with :mod:`ast` and checked against :data:`LAYERS`: a module may
import its own unit and the units of the layers below it, never a unit beside it or above
it. Imports of modules outside ``raygitops`` are not checked here, except that only the
Kubernetes layer may import a Kubernetes client library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "plugin" / "raygitops"

# Top first. A unit may import units of lower layers and itself; units of one layer are
# independent of each other (the preview and status never import the hook).
LAYERS: list[tuple[str, ...]] = [
    ("commands",),  # raygitops.cli.main, every *.command / *_command module, __main__
    ("cli",),  # what commands share: options, the error boundary, Helm's terminal
    ("presync", "preview", "status"),  # the faces
    ("render", "kube"),  # manifests from documents; the API server
    ("sources",),  # reading input
    ("model",),  # the pure model
    ("base",),  # raygitops (its version), raygitops.errors and raygitops.clock
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
CLIENT_LIBRARIES = ("urllib3", "kubernetes")


def unit_of(module: str) -> str:
    """The unit a dotted module name of the package belongs to."""
    parts = module.split(".")
    if module in ("raygitops.__main__", "raygitops.cli.main") or parts[-1] == "command" \
            or parts[-1].endswith("_command"):
        return "commands"
    if len(parts) == 1 or parts[1] in ("errors", "clock"):
        return "base"
    if parts[1] not in RANK:
        raise AssertionError(f"{module}: a module outside every layer (add its package to LAYERS)")
    return parts[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in ``source``; ``from raygitops.x import y`` is
    ``raygitops.x.y`` when that is a module of the package, else ``raygitops.x``."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                out.append((node.lineno, candidate if _is_module(candidate) else base))
    return out


def _is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """What ``module`` (with ``source``) imports against the layers."""
    mine = unit_of(module)
    out = []
    for line, target in imported(source, module, is_package):
        top = target.split(".")[0]
        if top in CLIENT_LIBRARIES and mine != "kube":
            out.append(f"{module}:{line} imports {target}: only the Kubernetes layer (raygitops.kube) talks to "
                       "the API server")
        if top != "raygitops":
            continue
        theirs = unit_of(target)
        if theirs != mine and RANK[theirs] <= RANK[mine]:
            where = "beside" if RANK[theirs] == RANK[mine] else "above"
            out.append(f"{module}:{line} imports {target}: {theirs} is {where} {mine}")
    return out


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_sits_in_a_layer() -> None:
    assert modules()
    for path in modules():
        unit_of(module_name(path))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_only_downward(path: Path) -> None:
    assert violations(module_name(path), path.read_text(), path.name == "__init__.py") == []


@pytest.mark.parametrize(("module", "source", "why"), [
    ("raygitops.preview.impact", "from raygitops.presync import run", "presync is beside preview"),
    ("raygitops.status.assess", "from raygitops.presync.cycle import Cycle", "presync is beside status"),
    ("raygitops.model.verdict", "def f():\n    from raygitops.render.renderer import Render", "render is above model"),
    ("raygitops.model.hashing", "if TYPE_CHECKING:\n    from raygitops.sources.yamlio import Document",
     "sources is above model"),
    ("raygitops.render.renderer", "from raygitops.kube import client", "kube is beside render"),
    ("raygitops.presync.run", "from raygitops.cli.failures import guarded", "cli is above presync"),
    ("raygitops.cli.options", "from raygitops.render import command", "commands is above cli"),
    ("raygitops.sources.files", "from raygitops.render.output import OUT_MARKER", "render is above sources"),
    ("raygitops.status.live", "import urllib3", "only the Kubernetes layer"),
    ("raygitops.model.pods", "from . import verdict\nfrom ..presync import run", "presync is above model"),
])
def test_the_check_catches_an_upward_import(module: str, source: str, why: str) -> None:
    found = violations(module, source)
    assert found and all(why.split(" is ")[0] in v or why in v for v in found), found


def test_downward_and_own_unit_imports_pass() -> None:
    assert violations("raygitops.presync.cycle", "from raygitops.kube.client import ApiError\n"
                      "from raygitops.model import verdict\nfrom raygitops.presync import drain") == []
    assert violations("raygitops.render.command", "from raygitops.cli.failures import guarded\n"
                      "from raygitops.render.pipeline import start_render") == []
