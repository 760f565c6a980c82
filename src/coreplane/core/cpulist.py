"""Kernel CPU lists ("0-3,8,10-11", as sysfs and cpusets write them) to and from lists of CPU numbers."""


def parse_cpu_list(text: str | None) -> list[int]:
    """Expands a kernel CPU list such as "0-3,8,10-11" ("" or None is empty)."""
    cpus: list[int] = []
    for part in (text or "").replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def format_cpu_list(cpus: list[int]) -> str:
    """The inverse of parse_cpu_list: [0,1,2,5] -> "0-2,5"."""
    out, run = [], []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
