"""One vocabulary across every command (issue 17): no command spells an option the old way,
every command takes --json, and the old spellings still work, each with a one-line note."""

import click
import pytest

from conftest import run_cli
from coreplane.cli import COMMANDS, load
from coreplane.core.vocabulary import RENAMED, modernise


def leaves():
    """(path, command) for every command that runs something."""
    def walk(path, command):
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(f"{path} {name}", sub)
        else:
            yield path, command
    for name in COMMANDS:
        yield from walk(name, load(name))


@pytest.mark.parametrize("path,command", list(leaves()), ids=lambda x: x if isinstance(x, str) else "")
def test_options_speak_the_vocabulary_and_take_json(path, command):
    names = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    assert not names & set(RENAMED), f"{path}: old spelling {names & set(RENAMED)}"
    if path != "cell exec":  # it becomes the program (execvp): nothing of it is left to report
        assert "--json" in names, f"{path}: no --json"


def test_modernise_leaves_the_program_alone():
    assert modernise(["project", "--policy=all", "x", "--", "prog", "--policy"]) == \
        ["project", "--delegate=all", "x", "--", "prog", "--policy"]


def test_an_old_spelling_on_another_command_still_works(tmp_path):
    proc = run_cli("cell", "create", "--compute", "999", "--control", "0")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith("coreplane: note: --compute is now --compute-cores")
    assert proc.stderr.splitlines()[-1].startswith("coreplane: error: --compute-cores 999")
