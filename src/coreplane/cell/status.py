"""An honest account of a cell's isolation: what the kernel still runs on the compute cores
(tick, per-CPU kernel threads, managed IRQs, workqueues, RCU), each with its evidence."""

import gzip
import time
from pathlib import Path

from coreplane.cell import memory, state, steering
from coreplane.cell.cgroups import EXEMPT_PIDS, PF_KTHREAD, PF_NO_SETAFFINITY, Cpuset, task_flags
from coreplane.core.cpulist import format_cpu_list, parse_cpu_list

ISOLATED, PARTIAL, NOT_ISOLATED, INFO = "isolated", "partial", "not isolated", "info"
# The flags isolcpus= may put before its CPU list (isolcpus=nohz,domain,2-3).
HOUSEKEEPING_FLAGS = frozenset({"nohz", "domain", "managed_irq"})


def per_cpu_counters(path: str = "/proc/interrupts") -> dict[str, tuple[list[int], str]]:
    """Rows of /proc/interrupts or /proc/softirqs: name ("24", "LOC", "TIMER") to
    (per-CPU counts, description such as "IO-APIC 4-edge ttyS0")."""
    lines = Path(path).read_text().splitlines()
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        counts = [int(f) for f in fields[:ncpu] if f.isdigit()]
        if counts:
            out[name.strip()] = (counts + [0] * (ncpu - len(counts)), " ".join(fields[len(counts):]))
    return out


def interrupt_counts() -> dict[str, list[int]]:
    return {name: counts for name, (counts, _) in per_cpu_counters().items()}


def _task_facts(tid_dir: Path) -> dict | None:
    try:
        status = dict(line.split(":\t", 1) for line in (tid_dir / "status").read_text().splitlines() if ":\t" in line)
    except (OSError, ValueError):
        return None
    flags = task_flags(int(tid_dir.name))
    if flags is None:
        return None
    return {"tid": int(tid_dir.name), "tgid": int(status["Tgid"]), "comm": status["Name"].strip(),
            "cpus": parse_cpu_list(status["Cpus_allowed_list"]), "flags": flags}


def foreign_tasks(compute: list[int], members: set[int]) -> dict[str, list[str]]:
    """Threads outside the cell that may still run on a compute core, by kind."""
    kinds: dict[str, list[str]] = {"per-CPU kernel threads": [], "other kernel threads (e.g. workqueue rescuers)": [],
                                   "left in place (init, kthreadd)": [], "user tasks": []}
    for tid_dir in Path("/proc").glob("[0-9]*/task/[0-9]*"):
        facts = _task_facts(tid_dir)
        if not facts or facts["tid"] in members or not set(facts["cpus"]) & set(compute):
            continue
        label = f"{facts['comm']}[{facts['tid']}]"
        if facts["flags"] & PF_KTHREAD and facts["tgid"] not in EXEMPT_PIDS:
            bound = facts["flags"] & PF_NO_SETAFFINITY and len(facts["cpus"]) == 1
            kinds["per-CPU kernel threads" if bound else "other kernel threads (e.g. workqueue rescuers)"].append(label)
        elif facts["tgid"] in EXEMPT_PIDS:
            kinds["left in place (init, kthreadd)"].append(label)
        else:
            kinds["user tasks"].append(label)
    return {k: sorted(v) for k, v in kinds.items() if v}


def _members(cpuset: Cpuset, name: str) -> set[int]:
    tids = set()
    for path in (cpuset.cell_path(name), cpuset.cell_path(name) / "compute"):
        for fname in ("tasks", "cgroup.threads"):
            try:
                tids.update(int(t) for t in (path / fname).read_text().split())
                break
            except OSError:
                continue
    return tids


def _kernel_config(option: str) -> str | None:
    """Value of a CONFIG_ option from /proc/config.gz, or None when the kernel hides it."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith(option + "="):
                    return line.strip().split("=", 1)[1]
                if line.startswith(f"# {option} is not set"):
                    return "n"
    except OSError:
        return None
    return "n"


def cmdline_cpus(cmdline: str, param: str) -> list[int]:
    """The CPUs a kernel command-line parameter lists (nohz_full=2-3, rcu_nocbs=1,3), without the
    housekeeping flags before them (isolcpus=nohz,domain,2-3 lists 2 and 3); [] when it lists none."""
    for word in cmdline.split():
        key, _, value = word.partition("=")
        if key == param and value:
            items = value.split(",")
            while items and items[0] in HOUSEKEEPING_FLAGS:
                items.pop(0)
            return parse_cpu_list(",".join(items))
    return []


def _check(item: str, verdict: str, detail: str, evidence: list[str] | None = None) -> dict:
    return {"item": item, "state": verdict, "detail": detail, "evidence": evidence or []}


def _irq_checks(compute: list[int], deltas: dict[str, list[int]], sample_s: float) -> dict:
    stuck, lazy = [], []
    for irq in steering.irq_numbers():
        d = steering.PROC_IRQ / str(irq)
        try:
            wanted = parse_cpu_list((d / "smp_affinity_list").read_text())
            effective = parse_cpu_list((d / "effective_affinity_list").read_text())
        except OSError:
            continue
        if set(wanted) & set(compute):
            stuck.append(str(irq))
        elif set(effective) & set(compute):
            lazy.append(str(irq))
    fired = {n: sum(c[i] for i in compute) for n, c in deltas.items() if n.isdigit() and sum(c[i] for i in compute)}
    evidence = [f"IRQ {n}: {v} in {sample_s:g} s on the compute cores" for n, v in sorted(fired.items())]
    if lazy:
        evidence.append(f"IRQ {', '.join(lazy)}: steered; x86 moves an IRQ at its next interrupt")
    if not stuck:
        return _check("device IRQs", ISOLATED, "every device IRQ is steered off the compute cores", evidence)
    return _check("device IRQs", PARTIAL, f"IRQ {', '.join(stuck)} may still fire on a compute core: the kernel "
                  "manages their affinity (multi-queue devices spread them over all CPUs)", evidence)


def _tick_check(compute: list[int], deltas: dict[str, list[int]], sample_s: float) -> dict:
    nohz = parse_cpu_list((Path("/sys/devices/system/cpu/nohz_full").read_text()
                           if Path("/sys/devices/system/cpu/nohz_full").exists() else ""))
    loc = {c: deltas.get("LOC", [0] * (max(compute) + 1))[c] / sample_s for c in compute}
    evidence = [f"local timer interrupts on CPU {c}: {rate:.0f}/s" for c, rate in loc.items()]
    hz = _kernel_config("CONFIG_HZ")
    if set(compute) <= set(nohz):
        return _check("scheduler tick", ISOLATED, "compute cores are nohz_full: the tick stops with one task", evidence)
    why = ("the kernel is built without CONFIG_NO_HZ_FULL" if _kernel_config("CONFIG_NO_HZ_FULL") == "n"
           else "nohz_full= does not list them on the kernel command line (boot-time only)")
    return _check("scheduler tick", NOT_ISOLATED, f"the tick keeps interrupting the compute cores"
                  f"{f' at CONFIG_HZ={hz}' if hz else ''}: {why}", evidence)


def report(record: dict, cpuset: Cpuset, sample_s: float = 0.2) -> dict:
    """The cell's isolation, item by item, from the machine's current state and a short
    sample of the interrupts that reach the compute cores."""
    name, compute = record["name"], record["compute"]
    before = interrupt_counts()
    time.sleep(sample_s)
    after = interrupt_counts()
    deltas = {n: [a - b for a, b in zip(after[n], before.get(n, [0] * len(after[n])))] for n in after}
    checks = []

    path = cpuset.cell_path(name)
    if path.is_dir():
        part = record.get("cgroup", {}).get("partition", "")
        checks.append(_check("cpuset", ISOLATED if part == "isolated" else PARTIAL if cpuset.version == 1 else INFO,
                             f"{path} (cgroup v{cpuset.version}), partition: {part}",
                             [f"compute {format_cpu_list(compute)}, control {format_cpu_list(record['control'])}"]))
    else:
        checks.append(_check("cpuset", NOT_ISOLATED, f"{path} is missing: the cell's group was removed"))

    foreign = foreign_tasks(compute, _members(cpuset, name))
    movable = {k: v for k, v in foreign.items() if k != "per-CPU kernel threads"}
    evidence = [f"{k}: {len(v)} ({', '.join(v[:6])}{', ...' if len(v) > 6 else ''})" for k, v in foreign.items()]
    if movable:
        checks.append(_check("other tasks", NOT_ISOLATED if not record["spec"]["move_tasks"] else PARTIAL,
                             "threads outside the cell may still run on the compute cores", evidence))
    else:
        checks.append(_check("other tasks", PARTIAL if foreign else ISOLATED,
                             "only the kernel's per-CPU threads (ksoftirqd, migration, cpuhp, kworker/N) remain: "
                             "they cannot be moved on stock Linux" if foreign else "no other thread may run there",
                             evidence))

    checks.append(_tick_check(compute, deltas, sample_s))
    checks.append(_irq_checks(compute, deltas, sample_s))
    ipis = {n: sum(c[i] for i in compute) for n, c in deltas.items() if not n.isdigit() and n != "LOC"}
    checks.append(_check("IPIs and other interrupts", INFO, f"in {sample_s:g} s on the compute cores",
                         [f"{n}: {v}" for n, v in sorted(ipis.items()) if v]))

    wq = steering.WQ_CPUMASK
    if wq.exists():
        wq_cpus = steering.mask_to_cpus(wq.read_text())
        checks.append(_check("unbound workqueues", NOT_ISOLATED if set(wq_cpus) & set(compute) else ISOLATED,
                             f"{wq} = {format_cpu_list(wq_cpus)}",
                             ["per-CPU workqueues (kworker/N:*) still run work queued on their CPU"]))

    if cpuset.version == 1:
        lb = (cpuset.root / "cpuset.sched_load_balance").read_text().strip()
        checks.append(_check("load balancing", PARTIAL if lb == "1" else ISOLATED,
                             "the compute cores stay in the scheduler's load-balancing domain (cgroup v1, "
                             "sched_load_balance=1 at the root): idle balancing still looks at them"))
    cmdline = Path("/proc/cmdline").read_text()
    nocb = cmdline_cpus(cmdline, "rcu_nocbs") or cmdline_cpus(cmdline, "nohz_full")
    checks.append(_check("RCU callbacks", ISOLATED if set(compute) <= set(nocb) else NOT_ISOLATED,
                         "offloaded (rcu_nocbs)" if set(compute) <= set(nocb)
                         else "RCU callbacks run on the compute cores (no rcu_nocbs= on the command line)"))

    spec = record["spec"]
    processes = cpuset.processes(path)
    if spec["hugepages"]:
        free = int((steering.HUGEPAGES.parent / "free_hugepages").read_text())
        pool = int(steering.HUGEPAGES.read_text())
        held = memory.huge_pages_held(processes)
        checks.append(_check("huge pages", INFO if pool >= spec["hugepages"] else PARTIAL,
                             f"the cell added {spec['hugepages']} x 2 MiB to the kernel's huge page pool, which is "
                             f"system-wide (any process may take them): pool {pool}, free {free}",
                             [f"held by the cell's processes: {memory.mib(held['hugetlb'])} hugetlb, "
                              f"{memory.mib(held['transparent'])} transparent"]))
    pools = [f for f in map(memory.pool_figures, processes) if f]
    if pools or spec.get("memory_budget"):
        budget = spec.get("memory_budget")
        in_use = sum(f["in_use"] for f in pools)
        checks.append(_check("memory pools", PARTIAL if budget and in_use > budget else INFO,
                             f"pooled processes: {len(pools)}, {memory.mib(in_use)} in use"
                             + (f" of the cell's budget {memory.mib(budget)} (each process's pool at most that)"
                                if budget else ""),
                             [f"pid {f['pid']} ({f['mode']}): reserved {memory.mib(f['reserved'])}, in use "
                              f"{memory.mib(f['in_use'])} (heap {memory.mib(f['heap'])}), free {memory.mib(f['free'])}, "
                              f"scrubbing {memory.mib(f['scrubbing'])}, given back {memory.mib(f['given_back'])}"
                              for f in pools]))
    if spec["mlock"]:
        locked = {}
        for pid in cpuset.processes(path):
            try:
                line = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("VmLck"))
                locked[pid] = line.split(":")[1].strip()
            except (OSError, StopIteration):
                continue
        checks.append(_check("mlock", ISOLATED if any(v != "0 kB" for v in locked.values()) else PARTIAL,
                             "memory lock limit lifted for cell processes; locking itself is done in the process",
                             [f"pid {p}: VmLck {v}" for p, v in locked.items()]))

    owner = record.get("owner")
    watchdog_pid = record.get("watchdog_pid")
    return {
        "name": name, "compute": compute, "control": record["control"], "phase": record.get("phase"),
        "cgroup": record.get("cgroup"), "processes": processes, "memory_pools": pools,
        "owner": owner and {**owner, "alive": state.owner_alive(owner)},
        "watchdog": {"pid": watchdog_pid, "alive": bool(watchdog_pid) and state.start_time(watchdog_pid) is not None},
        "sample_s": sample_s, "checks": checks,
    }
