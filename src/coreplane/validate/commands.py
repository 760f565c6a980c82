"""Shell commands of validation runs: native (walltime) or under the runtime (coreplane-exec), timed alike."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from coreplane.core import vocabulary as v
from coreplane.core.cpulist import format_cpu_list
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import workload
from coreplane.model.estimate import MIN_TRIALS
from coreplane.run.launch import RunOptions, check, exec_argv

# Every run leaves its measurement here, in its run directory: walltime's report for a native
# run, the runtime's profile (coreplane-profile/1) for a run under coreplane-exec. Both have
# wall_ns from fork to wait4 of the program, so both are timed alike.
MEASURE = "measure.json"
RUN_DIR = '"$COREPLANE_RUN_DIR"'  # set by the experiment engine for every run


@dataclass(frozen=True)
class Machine:
    """Where runs go: the compute and control cores (as coreplane-exec resolves them) and the
    autogroup nice value that shields runs from other sessions (None: leave it)."""

    compute: str
    control: str
    nice: int | None

    @classmethod
    def resolve(cls, compute: str | None, control: str | None, nice: int | None) -> "Machine":
        """Asks coreplane-exec which cores it would use (its defaults: the lowest allowed core
        controls, the rest compute)."""
        cfg = check(RunOptions(command=["/bin/true"], delegate="getppid", compute_cores=compute,
                               control_cores=control))
        allowed = os.sched_getaffinity(0)
        for key, option in (("compute_cores", v.COMPUTE_CORES), ("control_cores", v.CONTROL_CORES)):
            if not cfg.get(key) or not set(cfg[key]) <= allowed:
                raise CoreplaneError(
                    f"{option}: {format_cpu_list(cfg.get(key) or [])} not available to this process (it may run on "
                    f"{format_cpu_list(sorted(allowed))}; is another cell holding the other cores?)")
        if nice is not None and nice < 0 and os.geteuid() != 0:
            raise CoreplaneError(f"--nice {nice}: only root may raise priority; pass --nice 0")
        cores = lambda key: ",".join(str(c) for c in cfg[key])
        return cls(cores("compute_cores"), cores("control_cores"), nice)

    @property
    def compute_count(self) -> int:
        return len(self.compute.split(","))

    @property
    def control_count(self) -> int:
        return len(self.control.split(","))

    def as_dict(self) -> dict:
        return {"compute_cores": self.compute, "control_cores": self.control, "nice": self.nice}


def _walltime(machine: Machine, pin: bool, out: str) -> list[str]:
    argv = [str(workload("walltime"))]
    if pin:
        argv += ["-c", machine.compute]
    if machine.nice is not None:
        argv += ["-N", str(machine.nice)]
    return argv + ["-o", out, "--"]


def fresh_dir(path: Path) -> str:
    """A shell prefix that empties a program's output directory before its (timed) run. Every
    run then creates its files anew: on ext4 a file truncated and rewritten while its last
    contents are still unwritten is flushed at close (auto_da_alloc), and whether they were
    written back depended on how long ago the previous run was: sort and tar ran natively 15-20 %
    faster in some rounds than in others, and never so under the runtime, whose runs follow each
    other closely. Then the file system is synced (`sync -f`), so that no run starts while the
    previous one's files and their removal are still being written back: cp -r of 3000 files
    measured with a run-to-run CV of 0.9-1.2 (held-out suite) while the journal and writeback of
    the last run competed with it."""
    q = shlex.quote(str(path))
    return f"rm -rf {q} && mkdir -p {q} && sync -f {q} && "


def _shell(argv: list[str], quiet: bool) -> str:
    # Paths inside the run directory stay unquoted so that the shell expands $COREPLANE_RUN_DIR.
    text = " ".join(a if a.startswith(RUN_DIR) else shlex.quote(a) for a in argv)
    return text + (" > /dev/null" if quiet else "")


def native(argv: list[str], machine: Machine, quiet: bool = True) -> str:
    """The program on the compute cores without the runtime, timed by walltime into measure.json."""
    return _shell(_walltime(machine, True, f"{RUN_DIR}/{MEASURE}") + argv, quiet)


def under_runtime(argv: list[str], machine: Machine, delegated: list[str] | str, fc_ns: float,
                  quiet: bool = True, count_tlb_flushes: bool = False) -> str:
    """The program under `coreplane run` (coreplane-exec, the same options) with `delegated`
    calls (a list, or a policy the runtime knows) and a forward cost of `fc_ns` per direction;
    its profile is the measurement."""
    delegate = ",".join(delegated) if isinstance(delegated, list) else delegated
    opts = RunOptions(command=argv, delegate=delegate or "none", forward_cost_ns=int(round(fc_ns)),
                      compute_cores=machine.compute, control_cores=machine.control,
                      profile=Path(f"{RUN_DIR}/{MEASURE}"), count_tlb_flushes=count_tlb_flushes)
    return _shell(_walltime(machine, False, f"{RUN_DIR}/outer.json") + exec_argv(opts), quiet)


# The hand-off probes around a delegated run (handoff_bracket): null_call delegating getppid at no
# forward cost, MIN_TRIALS calls each, written into the run's directory.
HANDOFF_FILES = ("handoff-before.json", "handoff-after.json")


def handoff_bracket(run: str, machine: Machine) -> str:
    """`run` (a shell command) between two measurements of the delegated round trip, its exit
    status kept. Why: the host moves this guest's two vCPUs between placements whose round trip
    differs 3-4× (150 against 530 ns, docs/benchmarks.md) within minutes, inside a validation
    round; a program making 77,000 delegated calls (tar) then takes 116-146 ms in one placement
    and 147-211 ms in the other, so a round trip measured at the round's start mispredicts the
    runs after a move. Each probe is a process started under the runtime and 1000 calls, 10-40 ms
    depending on load, outside the run's measured wall time."""
    def probe(name: str) -> str:
        argv = [str(workload("null_call")), "-n", str(MIN_TRIALS)]
        opts = RunOptions(command=argv, delegate="getppid", forward_cost_ns=0, compute_cores=machine.compute,
                          control_cores=machine.control)
        return _shell(_walltime(machine, False, "/dev/null") + exec_argv(opts), quiet=False) + f" > {RUN_DIR}/{name}"
    before, after = (probe(name) for name in HANDOFF_FILES)
    return f"{before} && {{ {run}; }}; status=$?; {after}; exit $status"

