"""The vcore API from Python: ctypes over libcoreplane-vcore.so (the library C programs use)."""

import ctypes
import os

from coreplane.core import binaries
from coreplane.core.errors import CoreplaneError

LIBRARY = "libcoreplane-vcore.so"
EVENTS = {1: "granted", 2: "preempt_pending", 3: "preempted", 4: "released"}


def load() -> ctypes.CDLL:
    """The library, from the same places as coreplane's binaries."""
    for directory in binaries.search_dirs():
        path = os.path.join(directory, LIBRARY)
        if os.path.isfile(path):
            lib = ctypes.CDLL(path)
            lib.cp_vcore_error.restype = ctypes.c_char_p
            lib.cp_vcore_preempt_pending.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
            lib.cp_vcore_next_event.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)]
            lib.cp_vcore_procinfo.restype = ctypes.c_void_p
            return lib
    raise CoreplaneError(f"{LIBRARY} is not built (make rust)")


class Vcores:
    """This process's view of its many-core process: request, yield, events, preemption."""

    def __init__(self):
        self.lib = load()
        if self.lib.cp_vcore_open() != 0:
            raise CoreplaneError(self.error())

    def error(self) -> str:
        return self.lib.cp_vcore_error().decode()

    def request(self, n: int) -> int:
        granted = self.lib.cp_vcore_request(n)
        if granted < 0:
            raise CoreplaneError(f"vcore request: {self.error()}")
        return granted

    def yield_vcore(self, vcore: int) -> None:
        if self.lib.cp_vcore_yield(vcore) != 0:
            raise CoreplaneError(f"vcore yield: {self.error()}")

    def cpu(self, vcore: int) -> int:
        return self.lib.cp_vcore_cpu(vcore)

    def preempt_deadline(self, vcore: int) -> int | None:
        """The vcore's preemption deadline (CLOCK_MONOTONIC ns) when one is pending."""
        deadline = ctypes.c_uint64()
        return deadline.value if self.lib.cp_vcore_preempt_pending(vcore, ctypes.byref(deadline)) else None

    def events(self, vcore: int) -> list[tuple[str, int]]:
        """Drains the vcore's notification queue."""
        kind, arg, out = ctypes.c_uint32(), ctypes.c_uint64(), []
        while self.lib.cp_vcore_next_event(vcore, ctypes.byref(kind), ctypes.byref(arg)):
            out.append((EVENTS.get(kind.value, str(kind.value)), arg.value))
        return out

    def close(self) -> None:
        self.lib.cp_vcore_close()
