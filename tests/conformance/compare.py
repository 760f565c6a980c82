"""One case of the corpus natively and under each delegation mode, and the verdict per mode.

The rule: exit status (or the signal that ended the program) always counts; stdout and stderr
count only when two native runs of the case printed the same bytes, since a program that prints
pids, addresses or times cannot be compared byte for byte. Every run starts from the same,
freshly prepared working directory (same path), with stdin /dev/null and a fixed environment.
A native exit status 77 (the automake convention) or a native run that cannot finish is a skip.
When this process is root the case runs as the user nobody, in both worlds, by the same
`setpriv` prefix: strace's tests are meant for an unprivileged user, and several (settimeofday,
sethostname, swapon, reboot...) would otherwise act on the machine."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("coreplane"))
MODES = ("none", "all")
# Every mode a run can be compared in: name -> the `coreplane run` options. MODES is the default set
# (docs/conformance.md); the others are asked for by name (`python -m conformance --modes pool,mos`).
# PROFILE stands for a fresh file per run, outside the case's directory (the program might list it).
PROFILE = "{profile}"
OPTIONS: dict[str, list[str]] = {
    "none": ["--delegate", "none"],
    "all": ["--delegate", "all"],
    "pool": ["--memory", "pool"],
    "vdso": ["--vdso", "intercept", "--delegate", "all"],
    "fc20": ["--delegate", "all", "--forward-cost", "20000"],
    "mos": ["--delegate", "mos"],
    "profile": ["--profile", PROFILE],
    "rewrite1": ["--rewrite-at", "1"],
    "pooldemand": ["--memory", "pool-demand"],
    "profall": ["--profile", PROFILE, "--delegate", "all"],
    "dt4": ["--delegate", "all", "--delegate-threads", "4"],
}
SKIP_STATUS = 77
NOBODY = 65534
DROP = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


@dataclass
class Case:
    """A program to compare: argv run in a fresh `cwd`; `prepare(dir)` lays out its inputs."""
    name: str
    argv: list[str]
    prepare: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    group: str = ""


@dataclass
class Run:
    """What one run left behind: status (negative: killed by that signal; None: timed out)."""
    status: int | None
    stdout: bytes
    stderr: bytes


@dataclass
class Verdict:
    """The case's outcome per mode: 'pass', 'differ' or 'skip', with the reason."""
    case: str
    group: str
    outcome: dict[str, str]
    reason: dict[str, str]
    output_compared: bool


def privileged() -> bool:
    return os.geteuid() == 0


def base_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The same small environment for every run, so nothing of the caller's leaks into a case."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "TERM": "dumb",
           "TMPDIR": str(home)}
    # The per-user calibration file coreplane reads lives in the runner's cache, not in a case's home.
    if "XDG_CACHE_HOME" in os.environ:
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    env.update(extra)
    return env


def fresh_dir(work: Path, case: Case) -> Path:
    """The case's working directory, emptied and prepared again: every run sees the same one."""
    d = work / case.name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    if case.prepare:
        case.prepare(d)
    if privileged():
        for p in [d, *d.rglob("*")]:
            os.lchown(p, NOBODY, NOBODY)
    return d


def execute(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Run:
    """Runs argv in its own session; on timeout kills the whole session, status None."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return Run(proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Run(None, out, err)
    finally:
        # Whatever the program left running in its session (daemons it forked) goes with it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_case(case: Case, work: Path, mode: str | None) -> Run:
    """One run of the case: natively (mode None) or under `coreplane run` with the options of MODE."""
    d = fresh_dir(work, case)
    argv = (DROP if privileged() else []) + case.argv
    with tempfile.TemporaryDirectory(prefix="coreplane-conformance-") as tmp:
        if mode is not None:
            options = [str(Path(tmp) / "profile.json") if o == PROFILE else o for o in OPTIONS[mode]]
            argv = [CLI, "run", *options, "--"] + argv
        return execute(argv, d, base_env(d, case.env), case.timeout * (1 if mode is None else 2))


def describe(run: Run) -> str:
    if run.status is None:
        return "timed out"
    return f"killed by {signal.Signals(-run.status).name}" if run.status < 0 else f"exit {run.status}"


def first_line(data: bytes, limit: int = 100) -> str:
    line = data.decode(errors="replace").strip().splitlines()
    return (line[0] if line else "")[:limit]


def mismatch(native: Run, other: Run, compare_output: bool) -> str:
    """Why a run under the runtime is not the native one, or '' when it is."""
    if other.status != native.status:
        detail = first_line(other.stderr)
        return f"{describe(other)}, natively {describe(native)}" + (f": {detail}" if detail else "")
    if compare_output and other.stdout != native.stdout:
        return "stdout differs"
    if compare_output and other.stderr != native.stderr:
        return f"stderr differs: {first_line(other.stderr)}"
    return ""


def judge(case: Case, work: Path, modes=MODES, confirm: bool = True) -> Verdict:
    """Two native runs fix the rule; each mode is then compared, and a difference is run again
    (natively and in that mode) to say whether it reproduces."""
    first, second = run_case(case, work, None), run_case(case, work, None)
    outcome, reason = {}, {}
    if first.status == SKIP_STATUS or first.status is None or first.status != second.status:
        why = (f"skip: {first_line(first.stderr) or 'exit 77'}" if first.status == SKIP_STATUS else
               "times out natively" if first.status is None else
               f"exit status varies natively ({describe(first)}, {describe(second)})")
        return Verdict(case.name, case.group, {m: "skip" for m in modes}, {m: why for m in modes}, False)
    same_output = (first.stdout, first.stderr) == (second.stdout, second.stderr)
    for mode in modes:
        why = mismatch(first, run_case(case, work, mode), same_output)
        if why and confirm:
            again = mismatch(run_case(case, work, None), run_case(case, work, mode), same_output)
            why = f"{why} (again: {again})" if again else f"{why} (once in two tries)"
        outcome[mode], reason[mode] = ("differ", why) if why else ("pass", "")
    return Verdict(case.name, case.group, outcome, reason, same_output)
