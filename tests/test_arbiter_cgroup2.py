"""The arbiter on cgroup v2, live: this machine binds the cpuset controller to its cgroup v1
hierarchy, so the check boots a guest (QEMU, TCG, 2 CPUs) of Debian's kernel with an initramfs
holding busybox, coreplane-arbiter, libcoreplane-vcore and tests/programs/arbiter_cgroup2_check.c,
cgroup2 mounted alone: a C client of the vcore library is granted a vcore, preempted at its
deadline and reclaimed; the arbiter stopped leaves no group and the controller off again; with
--gang-stop, a child holding no core is frozen through cgroup.freeze and thawed when granted one; an
arbiter killed mid-grant is cleaned up after by its watchdog. Needs qemu-system-x86_64 and a
kernel (`make arbiter-cgroup2` fetches both; else skipped)."""

import glob
import shutil
import subprocess
from pathlib import Path

import pytest

from coreplane.core import binaries

REPO = Path(__file__).resolve().parents[1]
KERNEL_DIR = REPO / "target" / "arbiter-cgroup2"


def kernel() -> Path | None:
    """Debian's kernel: the one `make arbiter-cgroup2` unpacked, else a fullsys image's."""
    found = sorted(glob.glob(str(KERNEL_DIR / "boot" / "vmlinuz-*"))) + sorted(glob.glob(str(REPO / "target/fullsys/images/*/vmlinuz")))
    return Path(found[0]) if found else None


pytestmark = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None or kernel() is None
                                or shutil.which("busybox") is None or binaries.locate("coreplane-arbiter") is None,
                                reason="needs qemu-system-x86_64, a Debian kernel and busybox (make arbiter-cgroup2)")

# The guest's /init: every line the test looks for starts with CHECK.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin LD_LIBRARY_PATH=/lib COREPLANE_ARBITER_SOCKET=/run/arbiter.sock
mount -t devtmpfs dev /dev; mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t cgroup2 none /sys/fs/cgroup
echo "CHECK controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
start() { /bin/coreplane-arbiter --state-dir /run --warn-us 20000 "$@" 2>/arbiter.log & ARB=$!
          for i in $(seq 100); do [ -S /run/arbiter.sock ] && break; sleep 0.05; done; }
start
/bin/check
echo "CHECK check exit $?"
kill -TERM $ARB; wait $ARB
echo "CHECK after stop: group $( [ -e /sys/fs/cgroup/coreplane-arbiter ] && echo left || echo gone)," \
     "subtree_control '$(cat /sys/fs/cgroup/cgroup.subtree_control)'"
start --gang-stop
/bin/check gang
echo "CHECK gang exit $?"
kill -TERM $ARB; wait $ARB
start
/bin/check hold > /hold.log & CHECKER=$!
for i in $(seq 100); do grep -q HOLDING /hold.log && break; sleep 0.05; done
CHILD=$(sed -n 's/CHECK HOLDING //p' /hold.log)
echo "CHECK holding child $CHILD in $(cat /proc/$CHILD/cgroup)"
kill -KILL $ARB
for i in $(seq 100); do [ -e /sys/fs/cgroup/coreplane-arbiter ] || break; sleep 0.05; done
echo "CHECK after SIGKILL: group $( [ -e /sys/fs/cgroup/coreplane-arbiter ] && echo left || echo gone)," \
     "child in $(cat /proc/$CHILD/cgroup), allowed $(grep Cpus_allowed_list /proc/$CHILD/status | cut -f2)"
echo "CHECK arbiter said: $(head -1 /arbiter.log)"
poweroff -f
"""


def initramfs(tmp: Path) -> Path:
    root = tmp / "root"
    for d in ("bin", "lib", "lib64", "proc", "sys", "run", "dev"):
        (root / d).mkdir(parents=True)
    arbiter = Path(binaries.locate("coreplane-arbiter"))
    library = arbiter.parent / "libcoreplane_vcore.so"
    shutil.copy(shutil.which("busybox"), root / "bin" / "busybox")
    shutil.copy(arbiter, root / "bin" / "coreplane-arbiter")
    shutil.copy(library, root / "lib" / library.name)
    subprocess.run(["gcc", "-O2", "-Wall", "-I", str(REPO / "crates/vcore/include"), "-o", str(root / "bin" / "check"),
                    str(REPO / "tests/programs/arbiter_cgroup2_check.c"), "-L", str(arbiter.parent), "-lcoreplane_vcore"],
                   check=True)
    # The host's shared libraries they need (the guest has no root file system of its own).
    for exe in (arbiter, library, root / "bin" / "check"):
        for line in subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
            path = next((w for w in line.split() if w.startswith("/")), None)
            if path and "coreplane" not in path:
                dest = root / ("lib64" if "ld-linux" in path else "lib") / Path(path).name
                shutil.copy(path, dest)
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    image = tmp / "initramfs.cpio"
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    with open(image, "wb") as out:
        subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files, stdout=out, check=True)
    return image


def test_arbiter_on_cgroup2_in_a_guest(tmp_path):
    image = initramfs(tmp_path)
    guest = subprocess.run(["qemu-system-x86_64", "-accel", "tcg", "-smp", "2", "-m", "512", "-nographic", "-no-reboot",
                            "-kernel", str(kernel()), "-initrd", str(image), "-append", "console=ttyS0 quiet panic=-1"],
                           capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    # (the console's first line starts with the firmware's escape sequences)
    lines = [line[line.index("CHECK"):].strip() for line in guest.stdout.splitlines() if "CHECK" in line]
    text = "\n".join(lines)
    assert "cpuset" in lines[0].split(), text
    assert "CHECK OK" in lines and "CHECK check exit 0" in lines, text
    assert any(line.startswith("CHECK preempted at the deadline") for line in lines), text
    assert "CHECK after stop: group gone, subtree_control ''" in lines, text
    assert "CHECK gang exit 0" in lines and any(line.startswith("CHECK gang: the child, preempted") for line in lines), text
    holding = next(line for line in lines if line.startswith("CHECK holding child"))
    assert holding.endswith("/coreplane-arbiter/mcp-" + holding.split()[3]), text
    after_kill = next(line for line in lines if line.startswith("CHECK after SIGKILL"))
    assert "group gone" in after_kill and "child in 0::/," in after_kill and after_kill.endswith("allowed 0-1"), text
    assert "cgroup V2" in lines[-1], text
