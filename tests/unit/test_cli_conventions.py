"""CLI conventions: every option has help text, shown whole; every RAYGITOPS_* variable the
product reads is documented (``raygitops --help`` and docs/reference.md); a command whose module
cannot be imported is an error when run, never a missing command; every command that prints
takes ``-o/--output`` as kubectl and helm do; no option writes where the user did not ask;
shell completion offers the values of the options that have a fixed set."""

from __future__ import annotations

import inspect
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
    """-f is the input path (kubectl's -f/--filename), -n the namespace, -o the output format
    (kubectl's and helm's -o/--output); no command gives a short flag another meaning (values
    are --values only)."""
    meaning = {"-f": "--filename", "-n": "--namespace", "-o": "--output"}
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
    assert json.loads(_cli("version", "--output", "json").stdout) == {"version": __version__}
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


# ----------------------------------------------------------------------------- -o/--output, and writing only where asked

# The one command that prints without a format of its own: its SHELL argument is the format.
NO_OUTPUT_FORMAT = {"completion"}
# The commands -o/--output reached before this release under --format (presync's
# --log-format stays: the hook Jobs of other versions pass it).
FORMERLY_FORMAT = {"render", "hash", "diff", "status", "version"}


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def test_every_printing_command_takes_output() -> None:
    """kubectl's and helm's -o/--output FORMAT on every command that prints; the old
    --format stays for one release, hidden from --help."""
    for name, command in commands().items():
        outputs = [p for p in _options(command) if "--output" in p.opts]
        if name in NO_OUTPUT_FORMAT:
            assert not outputs, name
            continue
        assert len(outputs) == 1 and "-o" in outputs[0].opts and isinstance(outputs[0].type, click.Choice), name
        old = [p for p in _options(command) if "--format" in p.opts]
        if name in FORMERLY_FORMAT:
            assert len(old) == 1 and old[0].hidden and old[0].type.choices == outputs[0].type.choices, name
        else:
            assert not old, name


APP = REPO / "examples" / "plain"


def _invocations(tmp_path: Path) -> dict[str, list[str]]:
    """A call of each command that gets as far as it can here (no cluster: status and presync
    stop at the missing kubeconfig, after every option was read)."""
    plans = tmp_path / "plans"
    assert CliRunner().invoke(cli_main.main, ["render", str(APP), "--plan-out", str(plans)]).exit_code == 0
    (plan,) = plans.glob("*.json")
    nowhere = str(tmp_path / "no-kubeconfig")
    return {"render": [str(APP)], "hash": [str(APP / "raycluster.yaml")],
            "diff": ["--base", str(APP), "--head", str(APP), "."],
            "status": [str(APP), "--kubeconfig", nowhere],
            "presync": ["--plan", str(plan), "--dry-run", "--kubeconfig", nowhere],
            "version": [], "completion": ["bash"]}


def test_no_option_writes_where_the_user_did_not_ask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every option that takes a value, given a format name (`render --out json` wrote a
    directory json/ and printed nothing), run in an empty directory: the directory stays
    empty.  A directory is written only when named as one (./json)."""
    calls = _invocations(tmp_path)
    assert set(calls) == set(commands())
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    tried = 0
    for name, command in commands().items():
        for option in _options(command):
            if option.is_flag or option.count:
                continue
            flag = max(option.opts, key=len)
            for value in ("json", "yaml"):
                result = CliRunner().invoke(cli_main.main, [name, *calls[name], flag, value])
                tried += 1
                assert not list(cwd.iterdir()), (name, flag, value, result.exit_code, result.output)
    assert tried > 40, tried


@pytest.mark.parametrize("args", [["--output-dir", "json"], ["--out", "json"], ["--output-dir", "yaml"],
                                  ["--plan-out", "json"]])
def test_a_format_given_as_a_directory_is_a_usage_error(args: list[str], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli_main.main, ["render", str(APP), *args])
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert f"use -o {args[1]}" in res.stderr and f"./{args[1]}" in res.stderr, res.stderr
    assert not list(tmp_path.iterdir())


def test_a_directory_named_like_a_format_is_written_when_named_as_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli_main.main, ["render", str(APP), "--output-dir", "./json"])
    assert res.exit_code == 0 and res.stdout == "", res.output
    # _cluster: the hook's ClusterRole and binding (the preflight's reads)
    assert sorted(p.name for p in (tmp_path / "json").iterdir()) == [".raygitops-out", "_cluster", "ray"]


def test_render_output_json_prints_json() -> None:
    """`render --output json` was "No such option" with a hint of --out (which then wrote a
    directory): it is kubectl's and helm's -o."""
    res = CliRunner().invoke(cli_main.main, ["render", str(APP), "--output", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["kind"] == "List", res.output
    assert res.stdout == CliRunner().invoke(cli_main.main, ["render", str(APP), "-o", "json"]).stdout


def test_output_dir_prints_nothing_and_refuses_a_printed_format(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli_main.main, ["render", str(APP), "--output-dir", str(tmp_path / "out"), "-o", "json"])
    assert res.exit_code == 2 and "-o json prints" in res.stderr and not (tmp_path / "out").exists(), res.output


DEPRECATED = {
    "version": (["--format", "json"], ["-o", "json"]),
    "hash": ([str(APP / "raycluster.yaml"), "--format", "json"], [str(APP / "raycluster.yaml"), "-o", "json"]),
    "render-format": ([str(APP), "--format", "json"], [str(APP), "-o", "json"]),
    "diff": (["--base", str(APP), "--head", str(APP), ".", "--format", "markdown"],
             ["--base", str(APP), "--head", str(APP), ".", "-o", "markdown"]),
}


@pytest.mark.parametrize("case", sorted(DEPRECATED))
def test_old_spellings_work_for_one_release_with_one_line(case: str) -> None:
    """--format (now -o/--output) gives the same output, and one deprecation line on stderr."""
    old, new = DEPRECATED[case]
    name = case.split("-")[0]
    was, now = (CliRunner().invoke(cli_main.main, [name, *args]) for args in (old, new))
    assert was.exit_code == now.exit_code == 0 and was.stdout == now.stdout, was.output
    extra = was.stderr.replace(now.stderr, "", 1) if was.stderr.endswith(now.stderr) else was.stderr
    assert extra == "raygitops: warning: --format is deprecated and goes in the next release: use -o/--output\n", \
        was.stderr


def test_out_is_output_dir_for_one_release(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli_main.main, ["render", str(APP), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0 and (tmp_path / "out" / ".raygitops-out").is_file(), res.output
    assert "raygitops: warning: --out is deprecated and goes in the next release: use --output-dir\n" in res.stderr
    both = CliRunner().invoke(cli_main.main, ["render", str(APP), "--out", str(tmp_path / "a"),
                                              "--output-dir", str(tmp_path / "b")])
    assert both.exit_code == 2 and "give --output-dir only" in both.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_presync_log_format_is_output() -> None:
    """The hook Job passes --log-format (a Job rendered by one version may run another's
    image): the same option as -o/--output, not deprecated."""
    (option,) = [p for p in _options(commands()["presync"]) if "--output" in p.opts]
    assert {"-o", "--output", "--log-format"} <= set(option.opts)


# ----------------------------------------------------------------------------- help and completion, whole


def _flat(text: str) -> str:
    """Help text as words: click wraps lines (at hyphens too), it must not cut them."""
    return " ".join(re.sub(r"-\n\s*", "-", text).split())


def test_root_help_shows_each_command_description_whole() -> None:
    shown = _flat(CliRunner().invoke(cli_main.main, ["--help"], terminal_width=80).output)
    for name, command in commands().items():
        first = _flat(inspect.cleandoc(command.help or "").partition("\n\n")[0])
        assert f"{name} {first}" in shown, (name, first)


def test_every_option_help_is_shown_whole() -> None:
    for name, command in commands().items():
        shown = _flat(CliRunner().invoke(cli_main.main, [name, "--help"], terminal_width=80).output)
        for option in _options(command):
            if not option.hidden:
                assert _flat(option.help or "") in shown, (name, option.opts)


def _complete(*words: str, shell: str = "bash") -> list[str]:
    """Click's completion protocol, as the shell's script drives it: the words so far, the
    index of the one completed.  bash's answer is one "type,value" line per candidate (the
    values are returned); zsh's three lines, type, value and description (returned as they are)."""
    line = " ".join(words)
    res = subprocess.run([sys.executable, "-m", "raygitops"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "_RAYGITOPS_COMPLETE": f"{shell}_complete", "COMP_WORDS": line,
                              "COMP_CWORD": str(len(words) - 1)})
    assert res.returncode == 0, res.stderr
    if shell == "zsh":
        return res.stdout.splitlines()
    return [row.partition(",")[2] for row in res.stdout.splitlines()]


def test_completion_describes_commands_whole() -> None:
    """zsh and fish show a description beside each command: click cuts it at 45 characters."""
    rows = _complete("raygitops", "", shell="zsh")
    described = dict(zip(rows[1::3], rows[2::3]))
    for name, command in commands().items():
        assert described[name] == _flat(inspect.cleandoc(command.help or "").partition("\n\n")[0]), name


def test_completion_offers_option_values() -> None:
    from raygitops.model import crdschema, jobs

    assert _complete("raygitops", "render", "--running-jobs", "") == list(jobs.POLICIES)
    assert _complete("raygitops", "render", "--running-jobs", "f") == ["fail"]
    for command in ("render", "diff", "status"):
        assert _complete("raygitops", command, "--kuberay-version", "") == list(crdschema.SCHEMAS), command
    assert _complete("raygitops", "render", "-o", "") == ["yaml", "json"]
    assert _complete("raygitops", "diff", "--output", "") == ["markdown", "json", "text"]
    assert _complete("raygitops", "status", "-o", "m") == ["markdown"]
    # the old spelling is hidden: not offered
    assert "--format" not in _complete("raygitops", "render", "--")
