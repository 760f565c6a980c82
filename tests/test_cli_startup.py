"""The CLI starts like a native tool (issue 17): the top level imports no heavy library, a
command imports only its own area, errors of every kind are one line, and the command table
agrees with the commands it loads. Start-up times themselves are in docs/benchmarks.md."""

import json
import os
import subprocess
import sys

import pytest

from conftest import CLI, run_cli

HEAVY = ("pandas", "matplotlib", "scipy", "numpy", "igraph", "networkx", "sqlite3")


def imported_by(*args: str) -> set[str]:
    """Top-level modules a `coreplane ARGS` process imported (from -X importtime)."""
    proc = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_help_imports_no_heavy_library_and_no_area():
    mods = imported_by("--help")
    assert not mods & set(HEAVY), mods & set(HEAVY)
    assert "typer" not in mods and "rich" not in mods


def test_a_plain_run_is_handed_to_the_launcher_before_any_library():
    mods = imported_by("run", "--delegate", "all", "--", "true")
    assert "coreplane" in mods
    assert not mods & {"typer", "click", "rich", "pathlib", *HEAVY}, mods & {"typer", "click", "rich", *HEAVY}


@pytest.mark.parametrize("command", [["run", "--json"], ["profile"]])
def test_run_with_a_summary_and_profile_import_no_heavy_library(command):
    mods = imported_by(*command, "--", "true")
    assert "coreplane" in mods and "typer" in mods
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_every_run_option_is_either_handed_over_or_needs_the_full_command():
    from coreplane.cli import load
    from coreplane.run.direct import NO_CELL, PASSED

    full_command_only = {"--cell", "--map", "--json", "--json-out", "--help",
                         "--mcp", "--provision", "--max", "--arbiter-state-dir"}  # many-core process: issue 14
    for param in load("run").params:
        names = set(param.opts) | set(param.secondary_opts)
        assert names & (set(PASSED) | {NO_CELL} | full_command_only), names
        for name in names & set(PASSED):
            assert PASSED[name] == (not param.is_flag), name  # same arity on both paths


def test_command_table_agrees_with_the_commands():
    from coreplane.cli import COMMANDS, load

    for name, entry in COMMANDS.items():
        command = load(name)
        assert command.get_short_help_str(limit=300) == entry.help, name


@pytest.mark.parametrize("args,where,message", [
    (["cell", "create", "mycell"], "cell create", "Missing option '--compute-cores'"),
    (["run", "--bogus", "--", "true"], "run", "No such option '--bogus'"),
    (["run", "--forward-cost", "abc", "--", "true"], "", "invalid value 'abc' for '--forward-cost"),
    (["run", "--json", "--forward-cost", "abc", "--", "true"], "run", "Invalid value for '--forward-cost'"),
    (["nosuch"], "", "No such command 'nosuch'"),
])
def test_usage_errors_are_one_line_with_status_2(args, where, message):
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    prefix = f"coreplane: error: {where}: " if where else "coreplane: error: "
    assert len(lines) == 1 and lines[0].startswith(prefix) and message in lines[0], proc.stderr


def test_a_group_without_its_command_shows_help():
    proc = run_cli("cell")
    assert proc.returncode == 2 and "create" in proc.stdout and proc.stderr == ""


def test_version_names_the_commit():
    out = run_cli("--version", check=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(__file__)).stdout.strip()
    assert out.startswith("coreplane ") and f"(commit {commit})" in out


def test_exit_status_of_the_program_passes_through():
    assert run_cli("run", "--", sys.executable, "-c", "raise SystemExit(7)").returncode == 7


def test_old_spellings_work_with_a_one_line_note():
    proc = run_cli("run", "--delegates", "2", "--delegate", "all", "--", "sh", "-c", "echo --delegates")
    assert proc.returncode == 0 and proc.stdout == "--delegates\n"  # the program's own arguments are untouched
    assert proc.stderr.strip().splitlines() == [
        "coreplane: note: --delegates is now --delegate-threads; --delegates will go in the next release"]


def test_json_out_keeps_the_document_apart_from_the_program(tmp_path):
    doc = tmp_path / "run.json"
    proc = run_cli("run", "--json-out", str(doc), "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")
    assert json.loads(doc.read_text())["exit_status"] == 3


def test_shell_completion_answers_from_the_command_table():
    assert "_COREPLANE_COMPLETE" in run_cli("--show-completion", "bash", check=True).stdout
    proc = subprocess.run(CLI, capture_output=True, text=True, timeout=60, env={
        **os.environ, "_COREPLANE_COMPLETE": "bash_complete", "COMP_WORDS": "coreplane ru", "COMP_CWORD": "1"})
    assert proc.stdout.split() == ["plain,run"], proc
    proc = subprocess.run(CLI, capture_output=True, text=True, timeout=60, env={
        **os.environ, "_COREPLANE_COMPLETE": "bash_complete", "COMP_WORDS": "coreplane run --delegate-",
        "COMP_CWORD": "2"})
    assert proc.stdout.split() == ["plain,--delegate-threads"], proc
