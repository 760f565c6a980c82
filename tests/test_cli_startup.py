"""The CLI starts like a native tool (issue 17): the top level imports no heavy library, a
command imports only its own area, errors of every kind are one line, and the command table
agrees with the commands it loads. Start-up times themselves are in docs/benchmarks.md."""

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


def test_run_imports_only_the_runtime_area():
    mods = imported_by("run", "--", "true")
    assert "coreplane" in mods and "typer" in mods
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_command_table_agrees_with_the_commands():
    from coreplane.cli import COMMANDS, load

    for name, entry in COMMANDS.items():
        command = load(name)
        assert command.get_short_help_str(limit=300) == entry.help, name


@pytest.mark.parametrize("args,where,message", [
    (["cell", "create", "mycell"], "cell create", "Missing option '--compute'"),
    (["run", "--bogus", "--", "true"], "run", "No such option '--bogus'"),
    (["run", "--forward-cost", "abc", "--", "true"], "run", "Invalid value for '--forward-cost'"),
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
