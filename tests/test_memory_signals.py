"""Signal handlers that use memory while the main loop maps and frees large blocks (issue 15):
under `--memory pool` the interrupted thread may be zeroing a step of freed memory with the
pool's lock released, and now holds the program's asynchronous signals off until it is done
(memsvc `HeldOff`); under `--memory pool-demand` a handler's fresh block is filled in batches
narrowed to its mapping (a batch reaching past it was refused whole, and the rest filled a page
per fault: the handler outlasted its 1 ms timer and the program crawled, > 120 s against 1.5 s
natively). Each mode finishes, as natively, with every byte of fresh memory zero."""

import subprocess
from pathlib import Path

import pytest

from conftest import build_program, run_cli
from test_memory_service import MEMORY_MODES


@pytest.fixture(scope="module")
def signal_help(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "pool_signal_help")


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("handler", ["mmap", "fork", "longjmp"])
def test_handlers_that_use_memory_as_natively(signal_help, memory, handler):
    native = subprocess.run([str(signal_help), handler], capture_output=True, text=True, timeout=120)
    assert native.returncode == 0, native.stdout + native.stderr
    proc = run_cli("run", "--memory", memory, "--memory-budget", "256M", "--", str(signal_help), handler,
                   timeout=120)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
