"""Long jobs show a bar with elapsed and remaining time on a terminal, and nothing when stderr
is not a terminal or with --json (issue 17)."""

import os
import pty
import re
import subprocess

from conftest import CLI, run_cli

SPEC = """
command = "sleep 0.05; echo value {a}"
repetitions = 2
[parameters]
a = [1, 2, 3]
[[metrics]]
source = "regex"
name = "value"
pattern = 'value (\\d+)'
"""


def on_a_terminal(args: list[str]) -> str:
    """What `coreplane ARGS` writes to a pseudo-terminal (stdout and stderr both)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(CLI + args, stdin=follower, stdout=follower, stderr=follower,
                            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed with the last writer
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    assert proc.returncode == 0
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))


def test_sweep_bar_shows_runs_elapsed_and_time_left_on_a_terminal(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    text = on_a_terminal(["sweep", str(spec), "--out", str(tmp_path / "out")])
    assert re.search(r"━+ 6/6 failed 0 0:00:0\d left 0:00:0\d", text), text[-2000:]


def test_no_bar_when_not_a_terminal_or_with_json(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    piped = run_cli("sweep", str(spec), "--out", str(tmp_path / "a"), check=True)
    assert "left" not in piped.stderr and "━" not in piped.stderr
    text = on_a_terminal(["sweep", str(spec), "--out", str(tmp_path / "b"), "--json"])
    assert "left" not in text and "━" not in text
