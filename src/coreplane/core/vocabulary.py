"""The option names every command shares, one spelling for one idea, and the old spellings
still accepted (with a note) for one release."""

import sys

COMPUTE_CORES = "--compute-cores"  # the cores a program or a cell computes on
CONTROL_CORES = "--control-cores"  # the cores for OS work: delegates, the machine's other tasks
DELEGATE = "--delegate"  # the delegation policy: none | all | mckernel | mos | NAME,... | @FILE
DELEGATE_THREADS = "--delegate-threads"  # how many delegate threads serve delegated calls
FORWARD_COST = "--forward-cost"  # ns spent on the control core per direction of a delegated call
OUT = "--out"  # where a command writes what it makes

# Old spelling -> today's (accepted until the release after 0.1).
RENAMED = {"--compute": COMPUTE_CORES, "--control": CONTROL_CORES, "--policy": DELEGATE,
           "--delegates": DELEGATE_THREADS, "--output": OUT}


def modernise(args: list[str]) -> list[str]:
    """`args` with every old spelling before `--` replaced by today's, each noted on stderr
    (the program's own arguments, after `--`, are never touched)."""
    out = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, eq, value = arg.partition("=")
        if name in RENAMED:
            print(f"coreplane: note: {name} is now {RENAMED[name]}; {name} will go in the next release",
                  file=sys.stderr)
            arg = RENAMED[name] + eq + value
        out.append(arg)
    return out
