"""CLI conventions: every option has help text, every RAYGITOPS_* variable the product reads
is documented (``raygitops --help`` and docs/reference.md), and a command whose module cannot be
imported is an error when run, never a missing command."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from raygitops.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]


def commands() -> dict[str, click.Command]:
    ctx = click.Context(cli_main.main)
    return {name: cli_main.main.get_command(ctx, name) for name in cli_main.main.list_commands(ctx)}


def test_every_option_has_help() -> None:
    missing = [f"{name} {'/'.join(p.opts)}" for name, command in commands().items() for p in command.params
               if isinstance(p, click.Option) and not p.help]
    assert not missing, missing


def test_every_environment_variable_is_documented() -> None:
    read = set()
    for source in (REPO / "plugin" / "raygitops").rglob("*.py"):
        read |= set(re.findall(r"\bRAYGITOPS_[A-Z_]+", source.read_text()))
    assert read == set(cli_main.ENVIRONMENT), read ^ set(cli_main.ENVIRONMENT)
    shown = CliRunner().invoke(cli_main.main, ["--help"]).output
    reference = (REPO / "docs" / "reference.md").read_text()
    for name in read:
        assert name in shown and f"`{name}`" in reference, name


def test_a_command_that_cannot_import_is_an_error_not_a_missing_command(tmp_path: Path) -> None:
    # a shadowing package whose import fails stands in for a broken install
    broken = tmp_path / "kubernetes"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    code = ("import sys; from raygitops.cli.main import COMMANDS; COMMANDS['probe'] = 'raygitops.probe_missing:x'; "
            "from raygitops.cli.main import main; main()")
    res = subprocess.run([sys.executable, "-c", code, "probe", "--anything"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("raygitops: raygitops probe cannot start: ModuleNotFoundError") \
        and res.stderr.count("\n") == 1, res.stderr
    listed = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "probe" in listed.stdout and "unavailable" in listed.stdout


def test_short_flags_mean_one_thing_in_every_command() -> None:
    """-f is the input path (kubectl's -f/--filename), -n the namespace, -o the format; no
    command gives a short flag another meaning (values are --values only)."""
    meaning = {"-f": "--filename", "-n": "--namespace", "-o": "--format"}
    for name, command in commands().items():
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            for short, long in meaning.items():
                if short in param.opts:
                    assert long in param.opts or (name, param.name) == ("presync", "plan_paths"), (name, param.opts)
            if param.name == "values":
                assert param.opts == ["--values"], (name, param.opts)


def test_filename_flag_is_the_path_argument(tmp_path: Path) -> None:
    app = REPO / "examples" / "plain"
    runner = CliRunner()
    for command in (["render"], ["hash"]):
        by_argument = runner.invoke(cli_main.main, [*command, str(app)])
        for flag in ("-f", "--filename"):
            by_flag = runner.invoke(cli_main.main, [*command, flag, str(app)])
            assert by_flag.exit_code == 0 and by_flag.output == by_argument.output, (command, flag, by_flag.output)
    both = runner.invoke(cli_main.main, ["render", str(app), "-f", str(app)])
    assert both.exit_code == 2 and "one PATH|- only" in both.output
    neither = runner.invoke(cli_main.main, ["hash"])
    assert neither.exit_code == 2 and "missing FILE|-" in neither.output
    diff = runner.invoke(cli_main.main, ["diff", "--base", str(app), "--head", str(app), "-f", ".", "-o", "json"])
    assert diff.exit_code == 0 and '"clusters"' in diff.output, diff.output
    # values are --values: -f never reads a values file
    values = tmp_path / "values.yaml"
    values.write_text("image: x\n")
    as_values = runner.invoke(cli_main.main, ["render", str(app), "-f", str(values)])
    assert as_values.exit_code == 2


# ----------------------------------------------------------------------------- kubectl / helm habits


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raygitops", *args], capture_output=True, text=True, timeout=60)


def test_a_bare_call_prints_the_help_and_exits_0() -> None:
    """As kubectl and helm: no sub-command is a request for help, not a usage error."""
    res = _cli()
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout == _cli("--help").stdout and "Commands:" in res.stdout


def test_version_as_json() -> None:
    from raygitops import __version__

    assert json.loads(_cli("version", "-o", "json").stdout) == {"version": __version__}
    assert json.loads(_cli("version", "--format", "json").stdout) == {"version": __version__}
    assert _cli("version").stdout == f"raygitops, version {__version__}\n"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_the_shell_runs(shell: str, tmp_path: Path) -> None:
    """`raygitops completion SHELL` prints the script; bash sources it and completes the
    sub-commands (the script asks `raygitops` itself, so it is on PATH here)."""
    res = _cli("completion", shell)
    assert res.returncode == 0 and "_RAYGITOPS_COMPLETE" in res.stdout, res.stderr
    if shell != "bash" or not shutil.which("bash"):
        return
    script = tmp_path / "completion.bash"
    script.write_text(res.stdout)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "raygitops").write_text(f"#!/bin/sh\nexec {sys.executable} -m raygitops \"$@\"\n")
    (bin_dir / "raygitops").chmod(0o755)
    probe = (f"source {script}; COMP_WORDS=(raygitops re); COMP_CWORD=1; _raygitops_completion raygitops; "
             "printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert out.stdout.split() == ["render"], out.stdout + out.stderr


def test_hash_of_a_file_without_a_raycluster_is_an_error(tmp_path: Path) -> None:
    """An empty table read as "nothing to recreate"; kubectl says "No resources found"."""
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    for fmt in ("table", "json"):
        res = _cli("hash", str(path), "-o", fmt)
        assert (res.returncode, res.stdout, res.stderr) == (1, "", f"raygitops: {path}: no RayCluster found\n")
