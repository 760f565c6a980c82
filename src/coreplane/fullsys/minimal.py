"""The minimal image of the regression run in `make test`: Debian's kernel (this machine's suite's linux-image-amd64, from the package registry) with busybox-static as the whole user land, made in seconds where an mmdebstrap image takes minutes."""

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.fullsys.paths import MINIMAL

BUSYBOX = Path("/bin/busybox")  # busybox-static (APT_PACKAGES): the one static build Debian ships
APT_PRIVATE = Path(__file__).with_name("apt_private.sh")
INITRD_INIT = Path(__file__).with_name("minimal_init.sh")
# What the guest's init and the workload need from the kernel's modules: the virtio PCI bus, the
# root and workload disks (ext4), the NIC of a multi-node run. Their dependencies come along.
MODULES = ("virtio_pci", "virtio_blk", "ext4", "crc32c_generic", "virtio_net")
DEPENDS = re.compile(rb"\0depends=([^\0]*)\0")


def key_material() -> bytes:
    """What the minimal image is made from besides the kernel package, for the image cache's key."""
    if not BUSYBOX.exists():
        raise CoreplaneError(f"{BUSYBOX} is missing: install busybox-static (`make setup`)")
    return b"\0".join([MINIMAL.encode(), hashlib.sha256(BUSYBOX.read_bytes()).digest(), INITRD_INIT.read_bytes(),
                       ",".join(MODULES).encode()])


def load_order(modules_dir: Path, wanted: tuple[str, ...]) -> list[Path]:
    """The module files for `wanted` and everything they depend on (each .ko's own `depends=` in its
    .modinfo section: the package ships no modules.dep, depmod writes it at installation), each
    after its dependencies."""
    files = {}
    for path in modules_dir.rglob("*.ko"):
        files[path.stem.replace("-", "_")] = path
    order: list[Path] = []
    def visit(name: str, chain: tuple[str, ...]) -> None:
        name = name.replace("-", "_")
        if name not in files:
            raise CoreplaneError(f"kernel module {name} (needed by {' <- '.join(chain) or 'the image'}) is not in "
                                 f"{modules_dir}")
        if files[name] in order:
            return
        found = DEPENDS.search(files[name].read_bytes())
        for dep in filter(None, (found.group(1).decode().split(",") if found else [])):
            visit(dep, (name, *chain))
        order.append(files[name])
    for name in wanted:
        visit(name, ())
    return order


def _busybox_tree(root: Path) -> None:
    """busybox at /bin/busybox with a link per applet (where Debian's packages would put them)."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    listed = subprocess.run([str(BUSYBOX), "--list-full"], capture_output=True, text=True, check=True).stdout
    for applet in listed.split():
        link = root / applet
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to("/bin/busybox")
    for directory in ("dev", "proc", "sys", "mnt", "root", "tmp", "etc"):
        (root / directory).mkdir(exist_ok=True)


def _run(cmd: list[str], what: str, log: Path, **kw) -> str:
    with open(log, "ab") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, **kw)
    if done.returncode != 0:
        tail = " ".join(log.read_text(errors="replace").split())[-200:]
        raise CoreplaneError(f"{what} failed ({done.returncode}): '{tail}' (full log {log})")
    return done.stdout.decode(errors="replace")


def populate(scratch: Path, guest_init: Path, log: Path) -> dict:
    """Writes vmlinuz, initrd.img (busybox, the modules, minimal_init.sh as /init: it mounts the root
    disk read-only and switches to it) and the root tree `scratch`/root (busybox, `guest_init` as
    /coreplane/init) into `scratch`; returns what went in."""
    apt = scratch / "apt"
    fetched = apt / "debs"
    fetched.mkdir(parents=True)
    # linux-image-amd64 is a metapackage: its dependency is the kernel of the day.
    _run(["sh", str(APT_PRIVATE), str(apt), "deb", "download", "linux-image-amd64"], "apt-get download", log,
         cwd=fetched)
    meta = _run(["dpkg-deb", "-f", str(next(fetched.glob("linux-image-amd64_*.deb"))), "Depends"], "dpkg-deb", log)
    package = re.match(r"\s*(linux-image-[^\s,(]+)", meta)
    if package is None:
        raise CoreplaneError(f"linux-image-amd64's Depends has no kernel package: {meta.strip()!r} (log {log})")
    _run(["sh", str(APT_PRIVATE), str(apt), "deb", "download", package.group(1)], "apt-get download", log, cwd=fetched)
    deb = next(fetched.glob(f"{package.group(1)}_*.deb"))
    unpacked = scratch / "kernel"
    _run(["dpkg-deb", "-x", str(deb), str(unpacked)], "dpkg-deb -x", log)
    version = package.group(1).removeprefix("linux-image-")
    shutil.copy2(next((unpacked / "boot").glob("vmlinuz-*")), scratch / "vmlinuz")

    initrd = scratch / "initrd"
    _busybox_tree(initrd)
    order = load_order(unpacked / "lib" / "modules" / version, MODULES)
    (initrd / "modules").mkdir()
    for path in order:
        shutil.copy2(path, initrd / "modules" / path.name)
    (initrd / "modules" / "order").write_text("".join(f"{p.name}\n" for p in order))
    shutil.copy2(INITRD_INIT, initrd / "init")
    (initrd / "init").chmod(0o755)
    files = sorted(str(p.relative_to(initrd)) for p in initrd.rglob("*"))
    cpio = subprocess.run(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"], cwd=initrd, input="\n".join(files).encode(),
                          capture_output=True)
    if cpio.returncode != 0:
        raise CoreplaneError(f"cpio of the minimal initrd failed: {cpio.stderr.decode(errors='replace').strip()[:200]}")
    (scratch / "initrd.img").write_bytes(cpio.stdout)

    root = scratch / "root"
    _busybox_tree(root)
    (root / "coreplane").mkdir()
    shutil.copy2(guest_init, root / "coreplane" / "init")
    (root / "coreplane" / "init").chmod(0o755)
    debian_version = Path("/etc/debian_version").read_text().strip()
    (root / "etc" / "debian_version").write_text(f"{debian_version} (minimal: busybox only)\n")
    for path in (apt, unpacked, initrd):
        shutil.rmtree(path)
    return {"kernel": version, "kernel_package": deb.name, "modules": [p.stem for p in order],
            "busybox": subprocess.run([str(BUSYBOX)], capture_output=True, text=True).stdout.split("\n", 1)[0]}
