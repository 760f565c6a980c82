"""The arbiter in a QEMU/TCG guest of Debian's kernel, booted from an initramfs of busybox, the
arbiter, libcoreplane-vcore and C programs built against it: cgroup v2's cpuset controller (this
machine binds it to cgroup v1) and more compute cores than this machine has. Times measured there
are emulated (TCG) and not comparable to hardware times."""

import glob
import shutil
import subprocess
import tempfile
from pathlib import Path

from coreplane.core import binaries
from coreplane.core.errors import CoreplaneError
from coreplane.core.native import REPO_ROOT

KERNEL_DIR = REPO_ROOT / "target" / "arbiter-cgroup2"
VCORE_INCLUDE = REPO_ROOT / "crates" / "vcore" / "include"
MAX_TABLES = REPO_ROOT / "crates" / "vcore" / "bench" / "max_tables.c"
LABEL = "emulated (QEMU TCG), not comparable to hardware times"

def init_script(warn_us: int, body: str, after: str = "") -> str:
    """A guest's /init: busybox, cgroup2 mounted alone, an arbiter with `--warn-us warn_us` started
    and waited for, then `body` (shell lines), the arbiter stopped, `after`, power off."""
    return (r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin LD_LIBRARY_PATH=/lib COREPLANE_ARBITER_SOCKET=/run/arbiter.sock
mount -t devtmpfs dev /dev; mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t cgroup2 none /sys/fs/cgroup
""" + f"/bin/coreplane-arbiter --state-dir /run --warn-us {warn_us} 2>/arbiter.log & ARB=$!\n"
            + "for i in $(seq 200); do [ -S /run/arbiter.sock ] && break; sleep 0.05; done\n"
            + body + "kill -TERM $ARB; wait $ARB\n" + after + "poweroff -f\n")


# /init for the max rows: the arbiter with no warning time on loans (ROS's preempt-and-get).
MAX_TABLES_INIT = init_script(0, "/bin/max_tables TRIALS\necho \"CHECK max_tables exit $?\"\n",
                              after='echo "CHECK arbiter said: $(head -1 /arbiter.log)"\n')


def kernel() -> Path | None:
    """Debian's kernel: the one `make arbiter-cgroup2` unpacked, else a fullsys image's."""
    found = sorted(glob.glob(str(KERNEL_DIR / "boot" / "vmlinuz-*")))
    found += sorted(glob.glob(str(REPO_ROOT / "target/fullsys/images/*/vmlinuz")))
    return Path(found[0]) if found else None


def missing() -> str | None:
    """What a guest run needs and this machine lacks, or None."""
    for tool in ("qemu-system-x86_64", "busybox", "cpio", "gcc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if kernel() is None:
        return "no guest kernel (make arbiter-cgroup2 fetches Debian's)"
    if binaries.locate("coreplane-arbiter") is None:
        return "coreplane-arbiter is not built"
    return None


def initramfs(tmp: Path, init: str, programs: dict[str, Path], extra: tuple[str, ...] = ()) -> Path:
    """An initramfs of busybox, the arbiter, the vcore library, `programs` (name -> C source,
    built against the library) and coreplane's binaries named in `extra` in /bin, the host's
    shared libraries they need, and `init`."""
    root = tmp / "root"
    for d in ("bin", "lib", "lib64", "proc", "sys", "run", "dev"):
        (root / d).mkdir(parents=True)
    arbiter = Path(binaries.locate("coreplane-arbiter"))
    library = arbiter.parent / "libcoreplane_vcore.so"
    shutil.copy(shutil.which("busybox"), root / "bin" / "busybox")
    shutil.copy(arbiter, root / "bin" / "coreplane-arbiter")
    shutil.copy(library, root / "lib" / library.name)
    built = []
    for name in extra:
        built.append(root / "bin" / name)
        shutil.copy(binaries.locate(name), built[-1])
    for name, source in programs.items():
        exe = root / "bin" / name
        cc = subprocess.run(["gcc", "-O2", "-Wall", "-pthread", "-I", str(VCORE_INCLUDE), "-o", str(exe), str(source),
                             "-L", str(arbiter.parent), "-lcoreplane_vcore"], capture_output=True, text=True)
        if cc.returncode != 0:
            raise CoreplaneError(f"{source}: does not build: {(cc.stderr.strip().splitlines() or ['gcc failed'])[0]}")
        built.append(exe)
    # The guest has no root file system of its own.
    for exe in (arbiter, library, *built):
        # (ldd fails on a static binary, which needs nothing)
        for line in subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout.splitlines():
            path = next((w for w in line.split() if w.startswith("/")), None)
            if path and "coreplane" not in path:
                shutil.copy(path, root / ("lib64" if "ld-linux" in path else "lib") / Path(path).name)
    (root / "init").write_text(init)
    (root / "init").chmod(0o755)
    image = tmp / "initramfs.cpio"
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    with open(image, "wb") as out:
        subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files, stdout=out, check=True)
    return image


def boot(image: Path, cpus: int, timeout: float = 300) -> list[str]:
    """Boots the guest (TCG, `cpus` vCPUs) until its init powers it off; the console's lines that
    carry CHECK or ROW, from there on (the first line starts with the firmware's escapes)."""
    try:
        output = subprocess.run(["qemu-system-x86_64", "-accel", "tcg", "-smp", str(cpus), "-m", "512", "-nographic",
                                 "-no-reboot", "-kernel", str(kernel()), "-initrd", str(image), "-append",
                                 "console=ttyS0 quiet panic=-1"],
                                capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL).stdout
    except subprocess.TimeoutExpired as expired:  # what it said until then, and that it hung
        said = expired.stdout or b""
        output = (said.decode(errors="replace") if isinstance(said, bytes) else said) + f"\nCHECK TIMEOUT after {timeout:g} s"
    lines = []
    for line in output.splitlines():
        at = min((i for i in (line.find("CHECK"), line.find("ROW ")) if i >= 0), default=-1)
        if at >= 0:
            lines.append(line[at:].strip())
    return lines


def max_tables(cpus: int, trials: int) -> dict:
    """ROS Tables 1-2's max rows (crates/vcore/bench/max_tables.c) in a guest of `cpus` vCPUs
    (one control core, `cpus` - 1 compute cores), with the ratios that give their shape."""
    if cpus < 3:
        raise CoreplaneError(f"--guest-cpus {cpus}: at least 3 (one control core and two compute cores)")
    why = missing()
    if why:
        raise CoreplaneError(f"cannot run the guest: {why}")
    with tempfile.TemporaryDirectory(prefix="coreplane-arbiter-guest-") as tmp:
        image = initramfs(Path(tmp), MAX_TABLES_INIT.replace("TRIALS", str(trials)), {"max_tables": MAX_TABLES})
        lines = boot(image, cpus, timeout=600 + trials * 10)
    ops = {}
    for line in lines:
        if line.startswith("ROW "):
            _, name, cores, n, lo, p50, p99 = line.split()
            ops[name] = {"cores": int(cores), "n": int(n), "min_us": int(lo) / 1e3, "p50_us": int(p50) / 1e3,
                         "p99_us": int(p99) / 1e3}
    if "CHECK max_tables exit 0" not in lines or "preempt_and_get_max" not in ops:
        raise CoreplaneError("the guest's measurement failed: " + " | ".join(lines[-4:]))
    p50 = {name: s["p50_us"] for name, s in ops.items()}
    shape = {"preempt_max_over_preempt_one": p50["preempt_max"] / p50["preempt_one"],
             "get_max_cold_over_get_one_cold": p50["get_max_cold"] / p50["get_one_cold"],
             "preempt_and_get_max_over_get_max_cold": p50["preempt_and_get_max"] / p50["get_max_cold"]}
    return {"label": LABEL, "guest_cpus": cpus, "compute_cores": cpus - 1, "trials": trials, "ops": ops,
            "shape": {k: round(v, 3) for k, v in shape.items()}}
