"""Doctor's checks: each turns what a Host shows (plus live probes) into a verdict with evidence."""

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Callable

from coreplane.core.cpulist import format_cpu_list, parse_cpu_list
from coreplane.core.machine import cpuinfo_field
from coreplane.doctor import probes as live_probes
from coreplane.doctor.host import Host

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"

# A probe answers (worked, evidence); absent when reading a snapshot.
Probe = Callable[..., tuple[bool, str]]


@dataclass
class Finding:
    name: str
    verdict: str
    summary: str
    evidence: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def kernel_version(host: Host) -> tuple[int, int]:
    """(major, minor) from /proc/sys/kernel/osrelease, (0, 0) if unknown."""
    m = re.match(r"(\d+)\.(\d+)", host.read("/proc/sys/kernel/osrelease") or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@dataclass
class Mount:
    point: str
    fstype: str
    options: set[str]


def mounts(host: Host) -> list[Mount]:
    """Parses /proc/self/mountinfo (fstype and super options follow the ' - ' separator)."""
    out = []
    for line in (host.read("/proc/self/mountinfo") or "").splitlines():
        pre, _, post = line.partition(" - ")
        pre_f, post_f = pre.split(), post.split()
        if len(pre_f) >= 5 and len(post_f) >= 3:
            out.append(Mount(pre_f[4], post_f[0], set(post_f[2].split(",")) | set(pre_f[5].split(","))))
    return out


def check_cpus(host: Host, probes: dict[str, Probe]) -> Finding:
    online = parse_cpu_list(host.read("/sys/devices/system/cpu/online"))
    model = cpuinfo_field(host.read("/proc/cpuinfo"), "model name")
    ev = [f"online: {format_cpu_list(online) or '?'}", f"model: {model or '?'}"]
    cores: dict[tuple[str, str], list[int]] = {}
    for cpu in online:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        key = (host.read(f"{base}/physical_package_id") or "?", host.read(f"{base}/core_id") or "?")
        cores.setdefault(key, []).append(cpu)
    packages = {k[0] for k in cores}
    smt = max((len(v) for v in cores.values()), default=1)
    ev.append(f"{len(packages)} package(s), {len(cores)} core(s), {smt} thread(s) per core")
    if "hwloc" in probes:
        ev.append(probes["hwloc"]()[1])
    if len(online) < 2:
        return Finding("cpus", FAIL, f"{len(online)} CPU online: a cell needs a compute core and a control core", ev)
    return Finding("cpus", OK, f"{len(online)} CPUs ({len(cores)} cores)", ev)


def check_kernel(host: Host, probes: dict[str, Probe]) -> Finding:
    release = host.read("/proc/sys/kernel/osrelease") or "?"
    arch = host.read("/proc/sys/kernel/arch")
    ev = [f"release: {release}"] + ([f"arch: {arch}"] if arch else [])
    if arch and arch != "x86_64":
        return Finding("kernel", FAIL, f"architecture {arch}: coreplane runs x86-64 programs only", ev)
    return Finding("kernel", OK, f"Linux {release}", ev)


def check_sud(host: Host, probes: dict[str, Probe]) -> Finding:
    ver = kernel_version(host)
    ev = [f"kernel {ver[0]}.{ver[1]}; Syscall User Dispatch needs >= 5.11"]
    if ver < (5, 11):
        return Finding("syscall_user_dispatch", FAIL, "kernel too old: coreplane run cannot intercept syscalls", ev)
    if "sud" not in probes:
        return Finding("syscall_user_dispatch", OK, "kernel supports it (not probed: snapshot)", ev)
    worked, why = probes["sud"]()
    ev.append(why)
    if not worked:
        return Finding("syscall_user_dispatch", FAIL, "cannot be armed: coreplane run cannot intercept syscalls", ev)
    return Finding("syscall_user_dispatch", OK, "armed and trapping", ev)


def check_fast_path(host: Host, probes: dict[str, Probe]) -> Finding:
    """Which fast path the runtime takes here: sites relocated to trampolines, page 0 unmapped
    (crates/runtime fastpath.rs); the page-0 sled only when asked for (--null-page-sled), and
    what it gives up here: with protection keys a NULL call enters the runtime, without them
    page 0 reads as sled bytes too (and it needs CAP_SYS_RAWIO to map page 0 at all)."""
    flags = set((cpuinfo_field(host.read("/proc/cpuinfo"), "flags") or "").split())
    keys = {"pku", "ospke"} <= flags
    cap = re.search(r"^CapEff:\s*([0-9a-f]+)", host.read("/proc/self/status") or "", re.M)
    rawio = bool(cap and int(cap.group(1), 16) >> 17 & 1)
    ev = [f"protection keys: {'yes' if keys else 'no'} (pku, ospke in /proc/cpuinfo flags)",
          f"CAP_SYS_RAWIO: {'yes' if rawio else 'no'}",
          "vDSO calls: native by default (unseen); --vdso intercept profiles and delegates them"]
    sled = ("execute-only: a NULL call enters the runtime" if keys else "page 0 reads as sled bytes")
    if not rawio:
        sled += "; it needs CAP_SYS_RAWIO to map page 0"
    return Finding("fast_path", OK, f"relocating rewrite; page 0 unmapped, NULL accesses fault; "
                   f"--null-page-sled opts into the sled ({sled})", ev)


def check_cgroups(host: Host, probes: dict[str, Probe]) -> Finding:
    ms = mounts(host)
    v1 = {m.point: m for m in ms if m.fstype == "cgroup"}
    v2 = [m for m in ms if m.fstype == "cgroup2"]
    cpuset_v1 = next((p for p, m in v1.items() if "cpuset" in m.options), None)
    v2_point = v2[0].point if v2 else None
    v2_controllers = (host.read(f"{v2_point}/cgroup.controllers") or "").split() if v2_point else []
    mode = "v2" if v2 and not v1 else "v1" if v1 and not v2 else "hybrid (v1 + v2)" if v1 else "none"
    ev = [f"mode: {mode}"]
    if v2_point:
        ev.append(f"cgroup2 at {v2_point}, controllers: {' '.join(v2_controllers) or '(none)'}")
    if cpuset_v1:
        ev.append(f"cpuset (v1) at {cpuset_v1}")
    where = cpuset_v1 or (v2_point if "cpuset" in v2_controllers else None)
    if where is None:
        return Finding("cgroups", WARN, f"{mode}; no cpuset controller: cells fall back to affinity only", ev)
    summary = f"{mode}; cpuset at {where}"
    if where == v2_point:
        partition = host.exists(f"{v2_point}/cpuset.cpus.partition") or bool(
            host.glob(f"{v2_point}/*/cpuset.cpus.partition"))
        ev.append("cpuset.cpus.partition: " + ("present" if partition else "absent"))
    if "cgroup_writable" not in probes:
        return Finding("cgroups", OK, summary + " (writability not probed: snapshot)", ev)
    worked, why = probes["cgroup_writable"](where)
    ev.append(why)
    if not worked:
        return Finding("cgroups", WARN, summary + ", not writable: cells fall back to affinity only", ev)
    return Finding("cgroups", OK, summary + ", writable", ev)


def _simple_probe(name: str, key: str, ev: list[str], probes: dict[str, Probe], purpose: str) -> Finding:
    if key not in probes:
        return Finding(name, INFO, "not probed (snapshot)", ev)
    worked, why = probes[key]()
    ev.append(why)
    return Finding(name, OK if worked else WARN, "works" if worked else f"unavailable: {purpose}", ev)


def check_seccomp(host: Host, probes: dict[str, Probe]) -> Finding:
    status = host.read("/proc/self/status") or ""
    mode = re.search(r"^Seccomp:\s*(\d+)", status, re.M)
    actions = host.read("/proc/sys/kernel/seccomp/actions_avail")
    ev = [f"Seccomp mode of this process: {mode.group(1) if mode else '?'}", f"actions: {actions or '?'}"]
    if actions is None:
        return Finding("seccomp", WARN, "not in this kernel", ev)
    if mode and mode.group(1) == "2":
        return Finding("seccomp", WARN, "this process already runs under a seccomp filter", ev)
    return Finding("seccomp", OK, "available" + (", user_notif" if "user_notif" in actions else ""), ev)


def check_userfaultfd(host: Host, probes: dict[str, Probe]) -> Finding:
    unpriv = host.read("/proc/sys/vm/unprivileged_userfaultfd")
    ev = [f"vm.unprivileged_userfaultfd = {unpriv if unpriv is not None else '?'}",
          "/dev/userfaultfd " + ("present" if host.exists("/dev/userfaultfd") else "absent")]
    return _simple_probe("userfaultfd", "userfaultfd", ev, probes, "user-level page faults disabled")


def check_io_uring(host: Host, probes: dict[str, Probe]) -> Finding:
    disabled = host.read("/proc/sys/kernel/io_uring_disabled")
    ev = [f"kernel.io_uring_disabled = {disabled if disabled is not None else '(absent)'}"]
    return _simple_probe("io_uring", "io_uring", ev, probes, "message-based I/O falls back to delegation")


def check_hugepages(host: Host, probes: dict[str, Probe]) -> Finding:
    meminfo = dict(re.findall(r"^(\w+):\s+(\d+)", host.read("/proc/meminfo") or "", re.M))
    thp = host.read("/sys/kernel/mm/transparent_hugepage/enabled") or ""
    thp_mode = (re.search(r"\[(\w+)\]", thp) or [None, "?"])[1]
    total, free = int(meminfo.get("HugePages_Total", 0)), int(meminfo.get("HugePages_Free", 0))
    size = int(meminfo.get("Hugepagesize", 0))
    ev = [f"reserved {total}, free {free}, size {size} kB", f"THP: {thp_mode}"]
    if total == 0 and thp_mode == "never":
        return Finding("hugepages", WARN, "none reserved and THP off: no huge-page memory pools", ev)
    return Finding("hugepages", OK, f"{free}/{total} x {size // 1024} MiB free; THP {thp_mode}", ev)


def check_perf(host: Host, probes: dict[str, Probe]) -> Finding:
    paranoid = host.read("/proc/sys/kernel/perf_event_paranoid")
    ev = [f"kernel.perf_event_paranoid = {paranoid if paranoid is not None else '?'}"]
    return _simple_probe("perf_counters", "perf", ev, probes, "no cycle or instruction counts")


def _tracefs_dir(host: Host) -> str | None:
    for m in mounts(host):
        if m.fstype == "tracefs":
            return m.point
    return None


def check_tracefs(host: Host, probes: dict[str, Probe]) -> Finding:
    point = _tracefs_dir(host)
    supported = "tracefs" in (host.read("/proc/filesystems") or "")
    ev = [f"tracefs {'mounted at ' + point if point else 'not mounted'}; in kernel: {'yes' if supported else 'no'}"]
    if point is None:
        verdict = INFO if supported else WARN
        return Finding("tracefs", verdict, "not mounted (coreplane noise mounts it when run as root)"
                       if supported else "not in this kernel: no osnoise/timerlat figures", ev)
    tracers = (host.read(f"{point}/available_tracers") or "").split()
    ev.append(f"tracers: {' '.join(tracers) or '?'}")
    missing = [t for t in ("osnoise", "timerlat") if t not in tracers]
    if missing:
        return Finding("tracefs", WARN, f"no {' or '.join(missing)} tracer: gap detector only", ev)
    return Finding("tracefs", OK, "osnoise and timerlat available", ev)


def check_kvm(host: Host, probes: dict[str, Probe]) -> Finding:
    present = host.exists("/dev/kvm")
    return Finding("kvm", OK if present else INFO, "/dev/kvm present" if present else "no /dev/kvm",
                   ["/dev/kvm " + ("present" if present else "absent")])


def check_virtual(host: Host, probes: dict[str, Probe]) -> Finding:
    flags = (cpuinfo_field(host.read("/proc/cpuinfo"), "flags") or "").split()
    vendor = host.read("/sys/class/dmi/id/sys_vendor")
    product = host.read("/sys/class/dmi/id/product_name")
    ev = [f"cpu flag 'hypervisor': {'yes' if 'hypervisor' in flags else 'no'}"]
    if vendor or product:
        ev.append(f"dmi: {vendor or '?'} / {product or '?'}")
    if "hypervisor" in flags:
        return Finding("virtual_machine", WARN, "virtual machine: vCPUs may be descheduled by the host; "
                       "expect noisy tails", ev)
    return Finding("virtual_machine", OK, "bare metal", ev)


def check_isolation(host: Host, probes: dict[str, Probe]) -> Finding:
    cmdline = host.read("/proc/cmdline") or ""
    params = {k: v for k, _, v in (w.partition("=") for w in cmdline.split())
              if k in ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")}
    isolated = host.read("/sys/devices/system/cpu/isolated")
    nohz = host.read("/sys/devices/system/cpu/nohz_full")
    partitions = []
    for path in host.glob("/sys/fs/cgroup/*/cpuset.cpus.partition") + host.glob("/sys/fs/cgroup/*/*/cpuset.cpus.partition"):
        value = host.read(path)
        if value and value.split()[0] in ("root", "isolated"):
            partitions.append(f"{path.rsplit('/', 1)[0]}: {value}")
    ev = [f"cmdline: {' '.join(f'{k}={v}' for k, v in params.items()) or '(no isolation parameters)'}",
          f"isolated: {isolated or '(none)'}", f"nohz_full: {nohz or '(none)'}"] + partitions
    if isolated or (nohz and nohz != "(null)") or partitions:
        return Finding("isolation", OK, f"isolated CPUs: {isolated or nohz or 'by cpuset partition'}", ev)
    return Finding("isolation", INFO, "no boot-time isolation; cells isolate with cpusets at run time", ev)


def check_privileges(host: Host, probes: dict[str, Probe]) -> Finding:
    status = host.read("/proc/self/status") or ""
    uid = re.search(r"^Uid:\s*(\d+)", status, re.M)
    cap = re.search(r"^CapEff:\s*([0-9a-f]+)", status, re.M)
    caps = int(cap.group(1), 16) if cap else 0
    names = {21: "CAP_SYS_ADMIN", 23: "CAP_SYS_NICE", 17: "CAP_SYS_RAWIO"}
    held = [n for bit, n in names.items() if caps >> bit & 1]
    min_addr = host.read("/proc/sys/vm/mmap_min_addr")
    ev = [f"uid {uid.group(1) if uid else '?'}", f"capabilities: {' '.join(held) or '(none of interest)'}",
          f"vm.mmap_min_addr = {min_addr or '?'}"]
    if uid and uid.group(1) == "0":
        return Finding("privileges", OK, "root: cpusets, SCHED_FIFO and IRQ steering available", ev)
    return Finding("privileges", WARN, "not root: cells and noise injection need root or delegated cgroups", ev)


CHECKS = [check_cpus, check_kernel, check_sud, check_fast_path, check_cgroups, check_isolation, check_hugepages, check_perf,
          check_tracefs, check_seccomp, check_userfaultfd, check_io_uring, check_kvm, check_virtual,
          check_privileges]


def _hwloc() -> tuple[bool, str]:
    tool = shutil.which("lstopo-no-graphics")
    if not tool:
        return False, "hwloc: not installed"
    out = subprocess.run([tool, "--no-io", "--of", "console"], capture_output=True, text=True, timeout=20).stdout
    counts = {kind: len(re.findall(rf"\b{kind} L#", out)) for kind in ("Package", "Core", "PU")}
    caches = dict(re.findall(r"\b(L[23]) L#0 \((\w+)\)", out))
    return True, "hwloc: " + ", ".join(f"{n} {k}" for k, n in counts.items()) + "".join(
        f", {lvl} {size}" for lvl, size in sorted(caches.items()))


LIVE_PROBES: dict[str, Probe] = {
    "sud": live_probes.syscall_user_dispatch,
    "perf": live_probes.perf_hw_counter,
    "userfaultfd": live_probes.userfaultfd,
    "io_uring": live_probes.io_uring,
    "cgroup_writable": live_probes.cgroup_dir_writable,
    "hwloc": _hwloc,
}


def diagnose(host: Host, probes: dict[str, Probe] | None = None) -> list[Finding]:
    """Runs every check; live probes are used only on the live host unless given explicitly."""
    if probes is None:
        probes = LIVE_PROBES if host.live else {}
    return [check(host, probes) for check in CHECKS]
