"""Live probes: features are tried for real (armed, opened, created), never inferred from versions alone."""

import ctypes
import os
import signal
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

SYS_perf_event_open = 298
SYS_userfaultfd = 323
SYS_io_uring_setup = 425
PR_SET_SYSCALL_USER_DISPATCH = 59
PR_SYS_DISPATCH_ON = 1
SYSCALL_DISPATCH_FILTER_BLOCK = 1


def _errno_text() -> str:
    err = ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


def syscall_user_dispatch() -> tuple[bool, str]:
    """Arms SUD in a forked child with an empty allowed range; it must die of SIGSYS at its next syscall."""
    selector = ctypes.c_char(SYSCALL_DISPATCH_FILTER_BLOCK)
    pid = os.fork()
    if pid == 0:  # child: no Python-level cleanup may run after arming
        rc = _libc.prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, ctypes.byref(selector))
        os._exit(0 if rc == 0 else 10 + ctypes.get_errno())  # exit itself traps once armed
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS:
        return True, "armed in a child; its next syscall raised SIGSYS"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) >= 10:
        err = os.WEXITSTATUS(status) - 10
        return False, f"prctl(PR_SET_SYSCALL_USER_DISPATCH) failed: {os.strerror(err)}"
    return False, f"armed child ended unexpectedly (wait status {status:#x})"


def perf_hw_counter() -> tuple[bool, str]:
    """Opens a user-space instruction counter on this process and checks that it counts."""
    # perf_event_attr, PERF_ATTR_SIZE_VER0 = 64 bytes: type, size, config, period, sample_type,
    # read_format, flags (bit 5 exclude_kernel, bit 6 exclude_hv), then zeros.
    attr = struct.pack("IIQQQQQ", 0, 64, 1, 0, 0, 0, (1 << 5) | (1 << 6)) + bytes(8)
    buf = ctypes.create_string_buffer(attr, 64)
    fd = _libc.syscall(SYS_perf_event_open, buf, 0, -1, -1, 0)
    if fd < 0:
        return False, f"perf_event_open(HW_INSTRUCTIONS) failed: {_errno_text()}"
    try:
        sum(range(10000))
        count = struct.unpack("Q", os.read(fd, 8))[0]
    finally:
        os.close(fd)
    if count == 0:
        return False, "instruction counter opened but counted nothing (not virtualised?)"
    return True, f"instruction counter opened and counted {count}"


def userfaultfd() -> tuple[bool, str]:
    """userfaultfd as `--memory pool-demand` opens it (crates/exec/src/memory.rs): without
    UFFD_USER_MODE_ONLY, since the pool's faults taken inside syscalls are served too, which
    needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd = 1."""
    fd = _libc.syscall(SYS_userfaultfd, os.O_CLOEXEC)
    if fd < 0:
        return False, f"userfaultfd failed: {_errno_text()} (needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd = 1)"
    os.close(fd)
    return True, "userfaultfd created, kernel-mode faults included"


def io_uring() -> tuple[bool, str]:
    params = ctypes.create_string_buffer(120)
    fd = _libc.syscall(SYS_io_uring_setup, 1, params)
    if fd < 0:
        return False, f"io_uring_setup failed: {_errno_text()}"
    os.close(fd)
    return True, "io_uring_setup(1) created a ring"


def cgroup_dir_writable(parent: str) -> tuple[bool, str]:
    """Creates and removes a child cgroup below `parent`."""
    path = os.path.join(parent, f"coreplane-doctor-{os.getpid()}")
    try:
        os.mkdir(path)
    except OSError as exc:
        return False, f"mkdir {path}: {exc.strerror}"
    os.rmdir(path)
    return True, f"created and removed {path}"
