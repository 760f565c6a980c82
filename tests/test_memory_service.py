"""The memory service (issue 15, `--memory pool` and `pool-demand`): anonymous memory served in
user space keeps what Linux promises (zero fill, faults after munmap, fork copies, mremap), the
budget is a hard limit (ENOMEM), calls are counted as served, and real programs give
byte-identical output."""

import gzip
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from conftest import CLI, build_program, run_cli
from coreplane.bench import memsvc_latency
from coreplane.core import binaries
from coreplane.doctor.probes import userfaultfd
from test_stress import watched

POOL = ["--memory", "pool", "--memory-budget", "256M"]


@pytest.fixture(scope="module")
def semantics(tmp_path_factory) -> Path:
    return build_program(tmp_path_factory, "pool_semantics")


UFFD_OK, UFFD_WHY = userfaultfd()
MEMORY_MODES = ["pool", pytest.param("pool-demand", marks=pytest.mark.skipif(not UFFD_OK, reason=UFFD_WHY))]


def run_pool(*args: str, budget: str = "256M", memory: str = "pool", **kw) -> subprocess.CompletedProcess:
    return run_cli("run", "--memory", memory, "--memory-budget", budget, "--", *args, timeout=60, **kw)


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("mode,status", [("zero", 0), ("sparse", 0), ("spanning", 0), ("fork", 0), ("fork_threads", 0),
                                         ("mprotect_free", 0), ("uaf", -11), ("shrink", -11), ("mremap", -11),
                                         ("exit_last", 7), ("brk", -11)])
def test_semantics_as_natively(semantics, mode, status, memory):
    native = subprocess.run([str(semantics), mode], capture_output=True, text=True, timeout=60)
    assert native.returncode == status, native.stdout + native.stderr
    proc = run_pool(str(semantics), mode, memory=memory)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert "survived" not in proc.stdout
    assert mode == "uaf" or f"{mode} ok" in proc.stdout
    if mode in ("zero", "sparse", "spanning", "fork", "fork_threads", "mprotect_free", "shrink", "exit_last", "brk"):
        assert proc.stdout == native.stdout
    if mode == "mremap":  # growing in place without MREMAP_MAYMOVE: the pool never does
        assert "mremap ok Cannot allocate memory" in proc.stdout


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("delegate", ["none", "all"])
def test_a_single_thread_in_seccomp_strict_mode_ends_the_process(semantics, memory, delegate):
    # Before: hung for ever. Its exit(2) reached the kernel unseen by the runtime (the thread no
    # longer traps and that call site was never rewritten), and the scrubber, or pool-demand's
    # fault handler, kept the process alive. Pool memory touched in strict mode is then filled by
    # the kernel (pool-demand's handler is gone with its userfaultfd).
    native = watched([str(semantics), "strict_exit"])
    assert (native.returncode, native.stdout) == (7, "strict_exit ok\ntouched\n")
    proc = watched(CLI + ["run", "--delegate", delegate, "--memory", memory, "--memory-budget", "256M", "--",
                          str(semantics), "strict_exit"])
    assert (proc.returncode, proc.stdout) == (7, native.stdout), proc.stderr


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_a_fault_raced_by_map_fixed_over_held_pages_is_woken(semantics, memory):
    # Before: pool-demand's handler got ENOENT filling a page whose mapping another thread had
    # replaced (MAP_FIXED) while its fault waited, and ended the process (8 of 10 runs here).
    proc = watched(CLI + ["run", "--memory", memory, "--memory-budget", "512M", "--", str(semantics),
                          "fixed_race"])
    assert (proc.returncode, proc.stdout) == (0, "fixed_race ok\n"), proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="mlockall of a whole program needs CAP_IPC_LOCK (root here)")
@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("mode", ["zero", "sparse"])
def test_locked_memory_comes_back_zeroed(semantics, memory, mode):
    # A cell made with --mlock has `cell exec` set COREPLANE_CELL_MLOCK=1, and the runtime calls
    # mlockall(MCL_CURRENT | MCL_FUTURE). Before: the kernel refused the scrubber's MADV_DONTNEED
    # on the locked pool (EINVAL, unchecked), and freed pages came back with the program's bytes.
    proc = watched(["env", "COREPLANE_CELL_MLOCK=1", *CLI, "run", "--memory", memory, "--memory-budget", "256M",
                    "--", str(semantics), mode])
    assert (proc.returncode, proc.stdout) == (0, f"{mode} ok\n"), proc.stdout + proc.stderr


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_untouched_memory_goes_back_without_the_scrubber(semantics, memory):
    # Before: every freed run went to the scrubber (a second thread), and the next mmap waited
    # while it looked at each 2 MiB of memory never touched (mmap + munmap of 128 MiB untouched
    # ran at 0.005x Linux). A run touched only at its end is dropped by the program's thread.
    threads = 1 if memory == "pool" else 2   # pool-demand's fault handler
    assert run_pool(str(semantics), "untouched", memory=memory).stdout == f"untouched ok {threads} threads\n"


def fifo_allowed() -> bool:
    """Whether coreplane-exec may run the scrubber under SCHED_FIFO here (its own check, which
    leaves this process's scheduling alone)."""
    exe = binaries.locate("coreplane-exec")
    return exe is not None and memsvc_latency.fifo_allowed(str(exe))


def test_memory_service_options_without_a_pool_are_one_line():
    # Without --memory pool there is no scrubber and no pool to grow: the options would be ignored.
    for option in (["--scrubber-priority", "fifo"], ["--memory-grow", "64M"]):
        proc = run_cli("run", *option, "--", "true")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert option[0] in proc.stderr


@pytest.mark.skipif(not fifo_allowed(), reason="SCHED_FIFO refused here (it needs CAP_SYS_NICE or RLIMIT_RTPRIO)")
@pytest.mark.parametrize("priority,policy", [("normal", 0), ("fifo", 1)])
def test_the_scrubber_runs_under_the_priority_asked_for(semantics, priority, policy, tmp_path):
    # --scrubber-priority fifo: SCHED_FIFO 1 for the scrubber only (the program's thread is not
    # one of those listed); normal, the default, leaves it an ordinary task.
    prof = tmp_path / "p.json"
    proc = run_cli("run", *POOL, "--scrubber-priority", priority, "--profile", str(prof), "--", str(semantics),
                   "policy", timeout=60)
    assert proc.stdout == f"policy ok {policy}\n", proc.stderr
    assert json.loads(prof.read_text())["config"]["scrubber_priority"] == priority


def test_a_refused_scrubber_priority_is_one_line(semantics):
    # Without the privilege (RLIMIT_RTPRIO 0, and root without CAP_SYS_NICE), one line before the
    # program starts (prlimit and setpriv: util-linux).
    drop = ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice"] if os.geteuid() == 0 else []
    proc = subprocess.run(["prlimit", "--rtprio=0", *drop, *CLI, "run", *POOL, "--scrubber-priority", "fifo", "--",
                           str(semantics), "zero"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--scrubber-priority fifo: SCHED_FIFO refused" in proc.stderr


@pytest.mark.skipif(not UFFD_OK, reason=UFFD_WHY)
def test_pool_demand_fills_pages_through_userfaultfd_in_batches(semantics):
    # The handler fills each touched page's aligned batch of 16 (natively 32 pages are resident,
    # more where transparent huge pages are always on).
    assert run_pool(str(semantics), "demand", memory="pool-demand").stdout == "demand ok 32 touched 512 resident\n"


def test_pool_demand_refused_is_one_line(semantics):
    """Where userfaultfd is refused, pool-demand says so in one line; where it is allowed, runs."""
    proc = run_pool(str(semantics), "zero", memory="pool-demand")
    if not UFFD_OK:
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "userfaultfd refused" in proc.stderr
    else:
        assert proc.returncode == 0 and proc.stdout == "zero ok\n", proc.stderr


@pytest.mark.skipif(not UFFD_OK or os.geteuid() != 0, reason=UFFD_WHY or "dropping to another user needs root")
@pytest.mark.parametrize("drop", [["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"], ["unshare", "-Ur"]])
def test_pool_demand_descendant_refused_userfaultfd_runs_as_natively(semantics, drop):
    # Before: a descendant that gave up CAP_SYS_PTRACE (postgres's initdb run by `su nobody`,
    # anything in a user namespace) died with 127 at its first pool reservation. Now the
    # kernel fills its pool's pages, as under --memory pool.
    argv = [*drop, str(semantics), "zero"]
    native = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    proc = run_pool(*argv, memory="pool-demand")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, native.stdout, "")


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_exhaustion_is_enomem_and_memory_comes_back(semantics, memory):
    proc = run_pool(str(semantics), "exhaust", budget="64M", memory=memory)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    words = proc.stdout.split()
    assert words[:2] == ["exhaust", "ok"] and " ".join(words[3:]) == "Cannot allocate memory"
    # 64 MiB, less a block for what else the program took: the pool does not grow.
    assert 60 <= int(words[2]) <= 64


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_the_pool_grows_by_what_the_launcher_grants(semantics, memory):
    # --memory-grow: a pool at its budget asks coreplane-exec for more before it says ENOMEM;
    # the run's allowance (64 MiB) bounds it. Before, the pool never grew past its budget.
    proc = run_cli("run", "--memory", memory, "--memory-budget", "64M", "--memory-grow", "64M", "--",
                   str(semantics), "exhaust", timeout=60)
    words = proc.stdout.split()
    assert proc.returncode == 0 and words[:2] == ["exhaust", "ok"], proc.stdout + proc.stderr
    assert 124 <= int(words[2]) <= 128 and " ".join(words[3:]) == "Cannot allocate memory"


@pytest.mark.parametrize("memory", MEMORY_MODES)
def test_the_heap_counts_in_the_budget(semantics, memory):
    # brk is served from the pool: the heap's pages count in the budget, and beyond it sbrk
    # fails with ENOMEM as Linux's would at its limit (natively the loop reaches its 128 MiB).
    assert subprocess.run([str(semantics), "brk_budget"], capture_output=True, text=True).stdout == "brk_budget ok 128 \n"
    proc = run_pool(str(semantics), "brk_budget", budget="64M", memory=memory)
    words = proc.stdout.split()
    assert proc.returncode == 0 and words[:2] == ["brk_budget", "ok"], proc.stdout + proc.stderr
    assert 56 <= int(words[2]) <= 64 and " ".join(words[3:]) == "Cannot allocate memory"


def test_calls_are_counted_as_served(semantics, tmp_path):
    prof = tmp_path / "p.json"
    proc = run_cli("run", *POOL, "--profile", str(prof), "--", str(semantics), "zero", timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(prof.read_text())
    assert doc["config"]["memory"] == "pool" and doc["config"]["memory_budget"] == 256 << 20
    calls = {c["name"]: c for c in doc["syscalls"]}
    # 24 maps, of which the 12 of 128 KiB or more are the pool's (smaller ones stay the kernel's).
    assert 12 <= calls["mmap"]["served"] < calls["mmap"]["count"] and calls["munmap"]["served"] >= 12
    for c in calls.values():
        assert c["local"] + c["delegated"] + c["served"] == c["count"]
    assert doc["config"]["scrubber_priority"] == "normal"
    run_cli("run", "--profile", str(prof), "--", str(semantics), "zero", check=True, timeout=60)
    linux = json.loads(prof.read_text())
    assert linux["config"]["memory"] == "linux" and linux["config"]["scrubber_priority"] is None
    assert all(c["served"] == 0 for c in linux["syscalls"])


def test_budget_beyond_the_machine_is_one_line(semantics):
    proc = run_cli("run", "--memory", "pool", "--memory-budget", "64T", "--", str(semantics), "zero")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "--memory-budget 65536.0 GiB: larger than this machine's memory" in proc.stderr
    bad = run_cli("run", "--memory", "pool", "--memory-budget", "2X", "--", "true")
    assert bad.returncode == 2 and "unknown size suffix" in bad.stderr and bad.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def text_input(tmp_path_factory) -> Path:
    rng = random.Random(15)
    path = tmp_path_factory.mktemp("data") / "lines.txt"
    path.write_text("".join(f"{rng.randrange(10**9)} {rng.choice(['alpha', 'beta', 'gamma'])}\n"
                            for _ in range(200_000)))
    return path


PYTHON_ALLOCATES = ("import hashlib; d = [bytes(range(256)) * 256 * i for i in range(1, 60)]; "
                    "s = b''.join(d); print(hashlib.sha256(s).hexdigest(), len(s)); "
                    "print(sum(len(bytearray(1 << k)) for k in range(10, 26)))")


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("argv", [["sort", "{input}"], ["gzip", "-c", "-6", "{input}"],
                                  ["python3", "-c", PYTHON_ALLOCATES]], ids=["sort", "gzip", "python3"])
def test_real_programs_byte_identical(argv, text_input, memory):
    argv = [a.replace("{input}", str(text_input)) for a in argv]
    native = subprocess.run(argv, capture_output=True, timeout=60)
    assert native.returncode == 0
    # 512 MiB: python3 holds ≈ 264 MiB at its peak, and its heap (brk) counts in the budget too.
    proc = subprocess.run([*CLI, "run", "--memory", memory, "--memory-budget", "512M", "--", *argv],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == native.stdout
    if argv[0] == "gzip":
        assert gzip.decompress(proc.stdout) == text_input.read_bytes()


@pytest.mark.parametrize("memory", MEMORY_MODES)
@pytest.mark.parametrize("mode,served", [("", 2), ("scattered", 2)])
def test_a_fragmented_pool_maps_what_linux_maps(tmp_path_factory, tmp_path, memory, mode, served):
    # Requests within the budget that the pool's buddy allocator has no aligned block for. Before
    # session 9's fix the mmap looped for ever under the pool's lock; after it, it was refused
    # with ENOMEM where Linux maps it. Now the allocator's space is twice the budget (20 then
    # 40 MiB: both the pool's), and what still finds no block ("scattered": a used page in every
    # 32 MiB-aligned block) is mapped by the kernel, mremap moving pool pages there too: all of
    # it reads as zero and keeps its bytes, and the profile counts only the pool's maps as served.
    frag = build_program(tmp_path_factory, "pool_frag")
    argv = [str(frag)] + ([mode] if mode else [])
    native = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stdout + native.stderr
    prof = tmp_path / "p.json"
    proc = run_cli("run", "--memory", memory, "--memory-budget", "64M", "--profile", str(prof), "--", *argv, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, native.stdout), proc.stderr
    calls = {c["name"]: c for c in json.loads(prof.read_text())["syscalls"]}
    assert calls["mmap"]["served"] == served
    if mode:
        assert calls["mremap"]["served"] == 1


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_limit_on_address_space_leaves_room_for_the_pool(where):
    # `ulimit -v` (RLIMIT_AS) of 2 GB, set by the shell the run starts (inside: its pool, from its
    # first brk, already reserved ≈ 3 GiB, and the exec of each command could not map its
    # vectors) or before the run (outside: the pool could not be reserved, and the run died).
    # Before: "Cannot allocate memory" (126), or "cannot reserve the memory pool" (127).
    limit, echo = "ulimit -v 2000000", ["/bin/echo", "hi"]
    if where == "inside":
        proc = run_cli("run", "--memory", "pool", "--", "sh", "-c", f"{limit}; {' '.join(echo)}; {' '.join(echo)}",
                       timeout=60)
        assert (proc.returncode, proc.stdout) == (0, "hi\nhi\n"), proc.stderr
    else:
        cli = " ".join(CLI + ["run", "--memory", "pool", "--", *echo])
        proc = subprocess.run(["sh", "-c", f"{limit}; exec {cli}"], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout) == (0, "hi\n"), proc.stderr
