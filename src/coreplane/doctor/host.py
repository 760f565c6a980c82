"""Reading a host's /proc and /sys, live or from a captured snapshot, remembering every path read."""

import shutil
from pathlib import Path


class Host:
    """A view of one machine's files below `root` ("/" for the live host)."""

    def __init__(self, root: str | Path = "/"):
        self.root = Path(root)
        self.live = self.root.resolve() == Path("/")
        self.read_paths: set[str] = set()

    def _path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def read(self, rel: str) -> str | None:
        """Contents of `rel` (e.g. "/proc/cmdline") stripped, or None if absent or unreadable."""
        self.read_paths.add(rel)
        try:
            return self._path(rel).read_text(errors="replace").strip()
        except OSError:
            return None

    def exists(self, rel: str) -> bool:
        self.read_paths.add(rel)
        return self._path(rel).exists()

    def glob(self, rel_pattern: str) -> list[str]:
        """Paths (absolute, as on the host) matching a glob below root."""
        base = self.root.resolve()
        return sorted("/" + str(p.relative_to(base)) for p in base.glob(rel_pattern.lstrip("/")))

    def capture(self, dest: str | Path) -> int:
        """Copies every file read so far to `dest`, so the same report can be made elsewhere."""
        count = 0
        for rel in sorted(self.read_paths):
            src = self._path(rel)
            if src.is_file():
                target = Path(dest) / rel.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    shutil.copyfile(src, target)
                    count += 1
                except OSError:
                    continue
            elif src.is_dir():
                (Path(dest) / rel.lstrip("/")).mkdir(parents=True, exist_ok=True)
            elif src.exists():  # a device node such as /dev/kvm: its presence is the fact
                target = Path(dest) / rel.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
                count += 1
        return count

