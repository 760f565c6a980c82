"""`coreplane run` with nothing in between: when every option is one coreplane-exec takes as it
is (no cell to create, no mapping file to read, no summary to print), the CLI replaces itself
with coreplane-exec, which then exits or dies exactly as the program does."""

import os

from coreplane.core import binaries, vocabulary as v

# The options of `coreplane run` that coreplane-exec takes unchanged: name -> takes a value.
PASSED = {v.DELEGATE: True, "--local": True, v.FORWARD_COST: True, v.COMPUTE_CORES: True,
          v.CONTROL_CORES: True, v.DELEGATE_THREADS: True, "--profile": True, "--time-every": True,
          "--null-page-sled": False, "--rewrite-at": True, "--vdso": True, "--memory": True, "--memory-budget": True,
          "--scrubber-priority": True, "--memory-grow": True, "--online-map": True}
NO_CELL = "--no-cell"
# coreplane-exec prints its errors with this prefix instead of its own name.
ERROR_PREFIX_VARIABLE = "COREPLANE_ERROR_PREFIX"


def exec_argv(args: list[str]) -> list[str] | None:
    """The coreplane-exec command line equivalent to `coreplane run ARGS`, or None when the run
    needs the full command (another option, --help, no program, or a cell by default)."""
    options, i, compute, no_cell = [], 0, False, False
    while i < len(args) and args[i] != "--":
        name, eq, _ = args[i].partition("=")
        if name == NO_CELL and not eq:
            no_cell = True
        elif name in PASSED and not (eq and not PASSED[name]):
            takes_next = PASSED[name] and not eq
            if takes_next and i + 1 >= len(args):
                return None
            options += args[i:i + 1 + takes_next]
            compute |= name == v.COMPUTE_CORES
            i += takes_next
        else:
            return None
        i += 1
    program = args[i + 1:]
    if not program or (compute and not no_cell and os.geteuid() == 0):
        return None
    exe = binaries.locate("coreplane-exec")
    return None if exe is None else [exe, *options, "--", *program]


def run(args: list[str]) -> None:
    """Becomes coreplane-exec running `coreplane run ARGS`; returns only when the full command is needed."""
    argv = exec_argv(args)
    if argv is not None:
        os.environ[ERROR_PREFIX_VARIABLE] = "coreplane: error: "
        os.execv(argv[0], argv)
