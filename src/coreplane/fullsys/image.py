"""GENIMAGE: a bootable Debian image per suite (mmdebstrap, the suite's own kernel, coreplane's init), cached by the hash of what went in and boot-checked before use."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from coreplane.core.errors import CoreplaneError
from coreplane.core.documents import read_json
from coreplane.fullsys import guest, minimal
from coreplane.fullsys.paths import GUEST_INIT, IMAGES, MINIMAL, check_suite, variant_packages

# minbase plus the kernel (initramfs-tools comes with it); documentation is left out to keep the
# image small. Part of the cache key: changing it builds new images.
MMDEBSTRAP_OPTIONS = ("--variant=minbase", "--include=linux-image-amd64",
                      "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
                      "--dpkgopt=path-exclude=/usr/share/locale/*")
# 2: the workload moved out of the image onto a disk of its own (fullsys/workdisk.py).
FORMAT = 2
# Room beyond the files' bytes for ext4's metadata, journal and partly filled blocks (a 560 MiB
# bookworm tree did not fit in 600 MiB); the guest mounts the file system read-only.
HEADROOM = 1.3
HEADROOM_BYTES = 128 << 20
# Given to mmdebstrap's own apt when asked (`fullsys image --allow-expired-release`): apt then
# takes a suite whose Release file is past its Valid-Until (a mirror not refreshed: this
# machine's sid was 17 days past on 2026-11-23); signatures are still checked. Not part of the
# cache key: it changes whether the build may start, not what goes in.
ALLOW_EXPIRED = '--aptopt=Acquire::Check-Valid-Until "false"'


def mmdebstrap_options(suite: str) -> tuple[str, ...]:
    """mmdebstrap's options for `suite` (SUITE or SUITE+VARIANT: the variant's packages included)."""
    return (*MMDEBSTRAP_OPTIONS, *(f"--include={p}" for p in variant_packages(suite)))


def cache_key(suite: str) -> str:
    """The hash of everything an image is made from: suite, options (or the minimal image's
    inputs), init script."""
    digest = hashlib.sha256(f"{FORMAT}\0{suite}\0".encode())
    digest.update(minimal.key_material() if suite == MINIMAL else "\0".join((*mmdebstrap_options(suite), "")).encode())
    digest.update(GUEST_INIT.read_bytes())
    return digest.hexdigest()[:16]


def image_dir(suite: str) -> Path:
    """The cache directory of `suite`'s image for the current inputs."""
    return IMAGES / f"{check_suite(suite)}-{cache_key(suite)}"


def _tree_bytes(root: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(root) for f in files)


def _only(root: Path, pattern: str) -> Path:
    found = sorted(root.glob(pattern))
    if len(found) != 1:
        raise CoreplaneError(f"{root}: expected one {pattern}, found {len(found)}")
    return found[0]


def _run(cmd: list[str], what: str, log: Path) -> float:
    started = time.monotonic()
    with open(log, "ab") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = " ".join(log.read_text(errors="replace").split())[-200:]
        raise CoreplaneError(f"{what} failed ({done.returncode}): '{tail}' (full log {log})")
    return time.monotonic() - started


def _debian_tree(suite: str, scratch: Path, log: Path, allow_expired: bool) -> dict:
    """mmdebstrap's tree of `suite` in `scratch`/root with coreplane's init, its kernel and initrd
    beside it; what went in."""
    root = scratch / "root"
    _run(["mmdebstrap", "--quiet", *mmdebstrap_options(suite), *((ALLOW_EXPIRED,) if allow_expired else ()),
          suite.partition("+")[0], str(root)], f"mmdebstrap {suite}", log)
    (root / "coreplane").mkdir()
    shutil.copy2(GUEST_INIT, root / "coreplane" / "init")
    os.chmod(root / "coreplane" / "init", 0o755)
    kernel = _only(root / "boot", "vmlinuz-*")
    shutil.copy2(kernel, scratch / "vmlinuz")
    shutil.copy2(_only(root / "boot", "initrd.img-*"), scratch / "initrd.img")
    return {"kernel": kernel.name.removeprefix("vmlinuz-"), "packages_added": list(variant_packages(suite)),
            "release_validity_checked": not allow_expired}


def build(suite: str, allow_expired: bool = False) -> Path:
    """Builds `suite`'s image into a scratch directory, boot-checks it, then moves it into the cache."""
    final = image_dir(suite)
    scratch = final.with_name(f".{final.name}.{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    root = scratch / "root"
    scratch.mkdir(parents=True)
    log = scratch / "build.log"
    started = time.monotonic()
    made = (minimal.populate(scratch, GUEST_INIT, log) if suite == MINIMAL
            else _debian_tree(suite, scratch, log, allow_expired))
    bootstrap_s = time.monotonic() - started
    size = int(_tree_bytes(root) * HEADROOM) + HEADROOM_BYTES
    mkfs_s = _run(["mkfs.ext4", "-q", "-F", "-L", "coreplane", "-d", str(root), str(scratch / "rootfs.ext4"),
                   f"{size // 1024}k"], "mkfs.ext4", log)
    debian_version = (root / "etc" / "debian_version").read_text().strip()
    shutil.rmtree(root)
    check = guest.boot(scratch, scratch / "boot-check.log")
    info = {"suite": suite, "key": final.name.rsplit("-", 1)[1], "debian_version": debian_version, **made,
            "bootstrap_s": round(bootstrap_s, 1), "mkfs_s": round(mkfs_s, 1), "boot_check_s": round(check.wall_s, 1),
            "boot_banner": re.search(f"{guest.BOOT_MARKER}.*", check.console).group(0).strip()}
    (scratch / "image.json").write_text(json.dumps(info, indent=2) + "\n")
    if final.exists():  # another build finished first: same inputs, same image
        shutil.rmtree(scratch)
    else:
        scratch.rename(final)
    return final


def describe(path: Path, built_now: bool, wall_s: float) -> dict:
    """What an image is: its build record, its files' sizes, and whether this call built it."""
    info = read_json(path / "image.json")
    files = {name: (path / name).stat().st_size for name in ("rootfs.ext4", "vmlinuz", "initrd.img")}
    allocated = sum((path / name).stat().st_blocks * 512 for name in files)
    return {**info, "path": str(path), "built_now": built_now, "wall_s": round(wall_s, 1), "bytes": files,
            "allocated_bytes": allocated}


def ensure(suite: str, allow_expired: bool = False) -> dict:
    """`suite`'s image from the cache, built (and boot-checked) first when missing; with
    `allow_expired` its suite's Release file may be past its Valid-Until (ALLOW_EXPIRED)."""
    started = time.monotonic()
    path = image_dir(suite)
    built_now = not (path / "image.json").exists()
    if built_now:
        path = build(suite, allow_expired)
    return describe(path, built_now, time.monotonic() - started)
