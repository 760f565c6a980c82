"""Launching a program under coreplane-exec, optionally inside a cell, and reporting how it ended."""

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from coreplane.core import vocabulary as v
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import binary


@dataclass
class RunOptions:
    """Everything `coreplane run` passes on; None means coreplane-exec's default."""

    command: list[str]
    delegate: str = "none"
    local: list[str] = field(default_factory=list)
    forward_cost_ns: int = 0
    compute_cores: str | None = None
    control_cores: str | None = None
    delegate_threads: int = 1
    profile: Path | None = None
    time_every: int = 16  # a profile times one local call in N on average (1: every call)
    count_tlb_flushes: bool = False  # a profile counts the program's TLB flushes (coreplane-exec --count-tlb-flushes)
    cell: bool | None = None  # None: a cell when compute cores are given and we are root
    placement: dict[str, list[int]] | None = None  # clone-tree key -> CPUs (coreplane run --map)
    online_map: str | None = None  # a topology spec: tasks placed as they appear (coreplane run --online-map)
    null_page_sled: bool = False  # the fast path through a sled at address 0 (coreplane-exec --null-page-sled)
    rewrite_at: int | None = None  # a site is rewritten at its Nth trap (coreplane-exec --rewrite-at; None: its default)
    vdso: str = "native"  # "intercept": vDSO calls profiled and delegable (coreplane-exec --vdso)
    memory: str = "linux"  # "pool": anonymous memory served by the runtime's memory service (--memory)
    memory_budget: str = "1G"  # the pool's size (--memory-budget)
    scrubber_priority: str = "normal"  # "fifo": the pool's scrubber under SCHED_FIFO 1 (--scrubber-priority)
    memory_grow: str = "0"  # what the run's pools may grow by, granted by coreplane-exec (--memory-grow)


@dataclass
class RunResult:
    exit_status: int | None
    signal: int | None
    wall_s: float
    profile: Path | None
    cell: str | None

    def as_dict(self) -> dict:
        return {"exit_status": self.exit_status, "signal": self.signal, "wall_s": self.wall_s,
                "profile": str(self.profile) if self.profile else None, "cell": self.cell}

    @property
    def shell_status(self) -> int:
        """The status a shell would show: the exit status, or 128 + the signal."""
        return self.exit_status if self.signal is None else 128 + self.signal

    def end_as_program(self) -> NoReturn:
        """Ends this process as the program ended: dies of its signal (without a core file), as
        coreplane-exec does, or exits with its status."""
        if self.signal is not None:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if self.signal != signal.SIGKILL:  # whose action cannot be changed
                signal.signal(self.signal, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [self.signal])
            os.kill(os.getpid(), self.signal)
        sys.exit(self.shell_status)  # the signal's default action was to go on (SIGCHLD, SIGCONT, ...)


def exec_argv(opts: RunOptions) -> list[str]:
    """The coreplane-exec command line for `opts`."""
    argv = [str(binary("coreplane-exec")), v.DELEGATE, opts.delegate,
            v.FORWARD_COST, str(opts.forward_cost_ns), v.DELEGATE_THREADS, str(opts.delegate_threads),
            "--time-every", str(opts.time_every), "--vdso", opts.vdso]
    if opts.memory != "linux":
        argv += ["--memory", opts.memory, "--memory-budget", opts.memory_budget,
                 "--scrubber-priority", opts.scrubber_priority, "--memory-grow", opts.memory_grow]
    if opts.local:
        argv += ["--local", ",".join(opts.local)]
    if opts.compute_cores:
        argv += [v.COMPUTE_CORES, opts.compute_cores]
    if opts.control_cores:
        argv += [v.CONTROL_CORES, opts.control_cores]
    if opts.null_page_sled:
        argv.append("--null-page-sled")
    if opts.rewrite_at is not None:
        argv += ["--rewrite-at", str(opts.rewrite_at)]
    if opts.profile:
        argv += ["--profile", str(opts.profile)]
        if opts.count_tlb_flushes:
            argv.append("--count-tlb-flushes")
    if opts.placement:
        argv += ["--placement", "|".join(f"{k}:{','.join(map(str, v))}" for k, v in opts.placement.items())]
    if opts.online_map:
        argv += ["--online-map", opts.online_map]
    return argv + ["--", *opts.command]


def check(opts: RunOptions) -> dict:
    """Rejects bad options before anything is created (a cell must not be made for a run that
    cannot start), with coreplane-exec's one-line message; returns the configuration as
    coreplane-exec resolved it."""
    if not opts.command:
        raise CoreplaneError("no program given: coreplane run [OPTIONS] -- PROGRAM [ARGS...]", 2)
    argv = exec_argv(opts)
    split = argv.index("--")
    probe = subprocess.run(argv[:split] + ["--check"] + argv[split:], capture_output=True, text=True)
    if probe.returncode != 0:
        # 126/127 (a program that cannot run) pass through as a shell would give them.
        raise CoreplaneError(probe.stderr.strip().removeprefix("coreplane-exec: "), probe.returncode)
    return json.loads(probe.stdout)


def _cell(opts: RunOptions, stack: ExitStack):
    """Creates the run's cell when asked for (or by default as root), owned by this process."""
    wanted = opts.cell if opts.cell is not None else (opts.compute_cores is not None and os.geteuid() == 0)
    if not wanted:
        return None
    from coreplane.cell import Cell, CellSpec
    from coreplane.cell.spec import parse_cores
    if not opts.compute_cores or not opts.control_cores:
        raise CoreplaneError(f"--cell needs {v.COMPUTE_CORES} and {v.CONTROL_CORES}")
    spec = CellSpec(compute=parse_cores(opts.compute_cores, v.COMPUTE_CORES),
                    control=parse_cores(opts.control_cores, v.CONTROL_CORES))
    cell = stack.enter_context(Cell.create(spec))
    cell.add_process(os.getpid())  # coreplane-exec and the program inherit the cell
    return cell


def run(opts: RunOptions) -> RunResult:
    """Runs the program (options already check()ed) to its end; the cell (if any) is destroyed
    afterwards, and by its watchdog if this process is killed."""
    with ExitStack() as stack:
        cell = _cell(opts, stack)
        start = time.monotonic()
        proc = subprocess.Popen(exec_argv(opts), preexec_fn=_die_with_parent)
        # Like a shell running a foreground job: the program handles INT and QUIT itself.
        old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
        try:
            status = proc.wait()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        wall = time.monotonic() - start
        name = cell.name if cell else None
    # coreplane-exec dies of the program's signal, so a negative status is that signal.
    sig = -status if status < 0 else None
    return RunResult(exit_status=None if sig else status, signal=sig, wall_s=wall,
                     profile=opts.profile, cell=name)


def _die_with_parent() -> None:
    """In the launcher's child before its exec: killed (SIGKILL) when this process dies, even of
    SIGKILL, as the program it runs is (coreplane-exec passes it on), so that `timeout -s KILL
    coreplane run ...` ends the program as it would end it natively."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def temporary_profile() -> Path:
    """A path for a profile the user did not ask to keep."""
    fd, path = tempfile.mkstemp(prefix="coreplane-profile-", suffix=".json")
    os.close(fd)
    return Path(path)
