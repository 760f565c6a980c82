"""The mapping file `coreplane-map/1` written by `coreplane map --out` and read by `coreplane run --map`."""

from pathlib import Path

from coreplane.core import documents
from coreplane.core.errors import CoreplaneError

FORMAT = "coreplane-map/1"


def write(path: Path, doc: dict) -> None:
    """Writes a mapping document (atomically: a crash leaves the old file or the new one)."""
    documents.write(path, {"format": FORMAT, **doc}, indent=2)


def cpu_lists(path: str | Path) -> dict[str, list[int]]:
    """Task key (clone-tree position: "0" the program, "0.1" its second child, ...) -> the OS CPUs
    it may run on. What a launcher applies with sched_setaffinity when the task appears."""
    path = Path(path)
    doc = documents.read(path, FORMAT)
    out: dict[str, list[int]] = {}
    for i, entry in enumerate(doc.get("placement") or []):
        task, cpus = entry.get("task"), entry.get("cpus")
        if not isinstance(task, str) or not isinstance(cpus, list) or not cpus \
                or not all(isinstance(c, int) and c >= 0 for c in cpus):
            raise CoreplaneError(f"{path}: placement[{i}]: needs 'task' (string) and 'cpus' (non-empty list of CPU numbers)")
        if task in out:
            raise CoreplaneError(f"{path}: placement[{i}]: task {task!r} placed twice")
        out[task] = cpus
    if not out:
        raise CoreplaneError(f"{path}: field 'placement' is missing or empty")
    return out


THREADS = "{threads}"


def with_threads(path: str | Path, command: list[str]) -> list[str]:
    """The program's arguments with every "{threads}" replaced by the number of threads the
    mapping file carries (from `coreplane graph partition` of the traced program's graph)."""
    if not any(THREADS in arg for arg in command):
        return command
    path = Path(path)
    threads = documents.read(path, FORMAT).get("threads")
    if not isinstance(threads, int) or threads < 1:
        raise CoreplaneError(f"{path}: field 'threads' is {threads!r}: the program's arguments ask for {THREADS}, "
                             "so map a graph partitioned by `coreplane graph partition`")
    return [arg.replace(THREADS, str(threads)) for arg in command]
