"""Golden tests of ``raygitops diff`` in its three formats.

The base/head pair lives in ``fixtures/preview/{base,head}`` (one RayCluster per impact class);
the expected outputs in ``golden/preview/``.  Regenerate after an intended change with
``RAYGITOPS_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_preview_golden.py`` and review
the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from raygitops import __version__
from raygitops.cli.main import main

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "preview"
GOLDEN = HERE / "golden" / "preview"
UPDATE = bool(os.environ.get("RAYGITOPS_UPDATE_GOLDEN"))
FORMATS = {"markdown": "diff.md", "json": "diff.json", "text": "diff.txt"}


def run_diff(monkeypatch: pytest.MonkeyPatch, *args: str) -> "object":
    monkeypatch.chdir(FIXTURES)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return CliRunner().invoke(main, ["diff", "--base", "base", "--head", "head", *args])


def stable(text: str) -> str:
    return text.replace(f"raygitops {__version__}", "raygitops VERSION")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_golden(monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    result = run_diff(monkeypatch, "--output", fmt)
    assert result.exit_code == 0, result.output
    got = stable(result.stdout)
    golden = GOLDEN / FORMATS[fmt]
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got, encoding="utf-8")
    assert golden.is_file(), f"missing {golden}: run with RAYGITOPS_UPDATE_GOLDEN=1"
    assert got == golden.read_text(encoding="utf-8")


def test_golden_covers_every_class(monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.loads(run_diff(monkeypatch, "--output", "json").stdout)
    classes = {c["name"]: c["class"] for c in data["clusters"]}
    assert classes == {
        "training": "recreate", "autoscaled": "recreate", "serving": "stale",
        "batch": "stale", "scaled": "in-place", "paused": "in-place", "fresh": "create",
        "legacy": "delete", "steady": "unchanged", "grown": "in-place", "switched": "in-place",
    }
    assert data["schemaVersion"] == 1
    assert data["verdict"] == "recreate"


def test_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_diff(monkeypatch, "--exit-code").exit_code == 3
    assert run_diff(monkeypatch).exit_code == 0
    monkeypatch.chdir(FIXTURES)
    same = CliRunner().invoke(main, ["diff", "--base", "head", "--head", "head", "--exit-code"])
    assert same.exit_code == 0, same.output
    assert "No changes" in same.stdout


def test_text_colour_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = run_diff(monkeypatch, "--output", "text").stdout
    assert "\x1b[" not in plain  # CliRunner's stdout is not a tty
    coloured = run_diff(monkeypatch, "--output", "text", "--color").stdout
    assert "\x1b[" in coloured
    assert click_unstyle(coloured) == plain


def test_no_color_env_wins_over_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    from raygitops.preview.command import use_color

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Tty(), None) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty(), None) is False
    assert use_color(Tty(), True) is True


def click_unstyle(text: str) -> str:
    import click

    return click.unstyle(text)


def test_secrets_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    for fmt in FORMATS:
        out = run_diff(monkeypatch, "--output", fmt).stdout
        for secret in ("old-token-value", "new-token-value", "hunter2", "correct-horse"):
            assert secret not in out, (fmt, secret)
        assert "••••" in out


def test_a_long_value_is_shown_whole_below_its_change_in_a_fence_it_cannot_close() -> None:
    """A mapping or list too long for a line was cut JSON; it is YAML below the change, in a
    markdown fence longer than any backtick run of the manifest's own text."""
    from raygitops.preview.report_markdown import _fenced
    from raygitops.preview.wording import BELOW, block, value

    env = [{"name": "SCRIPT", "value": "echo ```done``` " + "x" * 80}]
    assert value(env) == BELOW and block(env) == f"- name: SCRIPT\n  value: echo ```done``` {'x' * 80}"
    assert _fenced(block(env), "yaml").startswith("````yaml\n") and _fenced(block(env), "yaml").endswith("\n````")
    assert value({"a": 1}) == '{"a":1}' and block({"a": 1}) is None
    assert value("y" * 100) == "\"" + "y" * 78 + "…"  # a long scalar stays on its line, cut
