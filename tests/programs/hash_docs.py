"""The hang shape of issue 12: four threads walk /usr/share/doc and hash every regular file they
are handed; prints how many files and bytes were hashed, and one digest of all digests."""

import hashlib
import os
import queue
import sys
import threading

ROOT = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc"
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
paths: queue.Queue = queue.Queue()
digests: dict[str, str] = {}
sizes: dict[str, int] = {}


def worker() -> None:
    while (path := paths.get()) is not None:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                while chunk := f.read(65536):
                    h.update(chunk)
                    sizes[path] = sizes.get(path, 0) + len(chunk)
        except OSError as e:
            digests[path] = f"error {e.errno}"
            continue
        digests[path] = h.hexdigest()


threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads:
    t.start()
queued = 0
for top, dirs, names in os.walk(ROOT):
    dirs.sort()
    for name in sorted(names):
        full = os.path.join(top, name)
        if queued < LIMIT and os.path.isfile(full) and not os.path.islink(full):
            paths.put(full)
            queued += 1
for _ in threads:
    paths.put(None)
for t in threads:
    t.join()
total = hashlib.sha256("".join(f"{p} {d}\n" for p, d in sorted(digests.items())).encode()).hexdigest()
print(len(digests), sum(sizes.values()), total[:16])
