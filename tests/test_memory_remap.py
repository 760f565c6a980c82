"""Blocks that grow by moving (mremap MREMAP_MAYMOVE, glibc's realloc of an mmapped chunk) keep
their bytes under the memory service, in both modes, and so do real programs that grow large
tables that way (perl's hashes, SQLite's page cache). Under `--memory pool-demand` the second
move of a block failed with EFAULT (the kernel moves a range spanning several mappings only when
none is registered with userfaultfd) and malloc aborted in munmap_chunk (issue 15, session 11).
Pages moved to a fixed place (MREMAP_FIXED) keep their bytes too, the pool's pages they leave
fault, and those they go to may be pages the program gave back (session 20)."""

import subprocess
from pathlib import Path

import pytest

from conftest import build_program, run_cli
from test_memory_service import MEMORY_MODES


def under_pool(memory: str, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_cli("run", "--memory", memory, "--memory-budget", "256M", "--", *argv, timeout=120, cwd=cwd)


# remap_grow: a block moved again and again. remap_fixed: before, every mremap with MREMAP_FIXED
# on pool memory failed with EINVAL (stress-ng --pagemove failed under the pool).
@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("name, kept", [("remap_grow", "kept every byte"), ("remap_fixed", "every byte in place")])
def test_moved_pages_keep_their_bytes(tmp_path_factory, memory, name, kept):
    exe = build_program(tmp_path_factory, name)
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and kept in native.stdout, native.stdout
    proc = under_pool(memory, str(exe))
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stdout + proc.stderr


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_perl_growing_a_hash_as_natively(tmp_path, memory):
    words = " ".join(f"w{i}" for i in range(60000))
    (tmp_path / "text.txt").write_text((words + "\n") * 4)
    script = ["perl", "-ne", r'$w{$_}++ for /(\w+)/g; END { print scalar(keys %w), " ", $w{w7}, "\n" }', "text.txt"]
    native = subprocess.run(script, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    proc = under_pool(memory, *script, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
