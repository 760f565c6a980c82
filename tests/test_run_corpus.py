"""Real programs from Debian packages, natively and under `coreplane run --delegate all`:
stdout, stderr and exit status must be byte-identical."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CLI

PROGRAMS = Path(__file__).parent / "programs"
# The C test programs the cases below run (others in tests/programs need more than libc to build).
C_PROGRAMS = ("many_threads", "vfork_exec", "signal_read")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return make_inputs(tmp_path_factory.mktemp("corpus"))


def make_inputs(d: Path) -> Path:
    """The corpus's inputs in `d`: a compressible text, random bytes, a Makefile, a script, the
    C test programs (also laid out by `python -m coreplane.bench.memcorpus`)."""
    text = "".join(f"line {i} {'abc' * (i % 17)}\n" for i in range(20000))
    (d / "text.txt").write_text(text)
    (d / "random.bin").write_bytes(os.urandom(1 << 20))
    (d / "Makefile").write_text("all: a.out\n\t@echo built $$(cat a.out)\na.out:\n\t@echo 42 > a.out\n"
                                "clean:\n\t@rm -f a.out\n")
    (d / "pipeline.sh").write_text(
        "#!/bin/sh\nset -e\nsort -r text.txt | uniq -c | sort -n | tail -3\n"
        "for i in 1 2 3; do (echo sub $i; sh -c 'exit 0') ; done\n"
        "x=$(seq 1 100 | paste -sd+ | bc 2>/dev/null || seq 1 100 | awk '{s+=$1} END {print s}')\n"
        "echo sum $x\nexec sh -c 'exec echo exec chain done'\n")
    (d / "pipeline.sh").chmod(0o755)
    for name in C_PROGRAMS:
        subprocess.run(["cc", "-O2", "-pthread", "-o", str(d / name), str(PROGRAMS / f"{name}.c")], check=True)
    return d


PY_SCRIPT = ("import json, threading, subprocess, hashlib\n"
             "out = {}\n"
             "def work(i): out[i] = hashlib.sha256(str(i).encode() * 100000).hexdigest()[:12]\n"
             "ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]\n"
             "[t.start() for t in ts]; [t.join() for t in ts]\n"
             "print(json.dumps(dict(sorted(out.items()))))\n"
             "print(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip())\n")

CASES = {
    "coreutils": ["sh", "-c", "ls -la text.txt random.bin | awk '{print $1, $5, $9}'; wc text.txt; "
                  "sha256sum random.bin; head -c 100 text.txt | od -c | tail -2; cat nosuchfile"],
    "bzip2": ["sh", "-c", "bzip2 -9 -c text.txt | bzip2 -d | sha256sum"],
    "gzip": ["sh", "-c", "gzip -c random.bin | gzip -dc | cmp - random.bin && echo same"],
    "xz-threads": ["xz", "-T2", "-c", "-3", "text.txt"],
    "python3": ["python3", "-c", PY_SCRIPT],
    "sqlite3": ["sqlite3", ":memory:", "create table t(a, b); "
                "with recursive c(x) as (select 1 union all select x + 1 from c where x < 5000) "
                "insert into t select x, x * x from c; select count(*), sum(b) from t; select * from nosuch;"],
    "tar": ["sh", "-c", "tar --mtime=@0 --owner=0 --group=0 -cf - text.txt Makefile | tar -tvf -"],
    "make": ["sh", "-c", "make -s clean && make -s && make -s"],
    "shell-pipes-fork-exec": ["./pipeline.sh"],
    "busybox-static": ["busybox", "sh", "-c", "echo static $((6*7)); busybox wc -l text.txt; busybox sha1sum random.bin"],
    "multithreaded-c": ["./many_threads", "16", "300"],
    "vfork-posix-spawn": ["./vfork_exec"],
    "signals-during-delegated-read": ["./signal_read"],
    "exit-status": ["sh", "-c", "echo out; echo err >&2; exit 3"],
}


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, timeout=300)


@pytest.mark.parametrize("name", sorted(CASES))
def test_delegate_all_is_byte_identical(name, work):
    if name == "busybox-static":
        assert "statically linked" in subprocess.run(["file", "-L", shutil.which("busybox")],
                                                     capture_output=True, text=True).stdout
    argv = CASES[name]
    native = run(argv, work)
    under = run(CLI + ["run", "--delegate", "all", "--", *argv], work)
    assert (under.returncode, under.stdout, under.stderr) == (native.returncode, native.stdout, native.stderr)
    assert native.stdout, "the program printed nothing: the comparison would be empty"
