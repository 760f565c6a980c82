"""A profile at a glance: the `strace -c`-style table (without numpy or matplotlib, so that
`coreplane profile` starts fast; the plots are in profile/figures.py)."""

from rich.console import Console
from rich.table import Table

from coreplane.profile.records import Profile


# overhead.unprofiled_processes' "at" (docs/formats.md), in words.
WHY_UNPROFILED = {"fork": "a forked child without the profile directory",
                  "execve": "the image its execve started, without the profile directory",
                  "map": "its profile file could not be mapped"}


def summary(profile: Profile) -> dict:
    """Per syscall, by total time as `strace -c` sorts: calls, errors, total and mean time (ns),
    share of all syscall time and of the wall time; plus p, the model's system share, and the
    processes the profile does not count (overhead.unprofiled_processes)."""
    syscall_ns = sum(c.total_ns for c in profile.syscalls)
    rows = [{"name": c.name, "calls": c.count, "errors": c.errors, "total_ns": c.total_ns,
             "mean_ns": c.total_ns / c.count if c.count else 0.0,
             "share_of_syscall_time": c.total_ns / syscall_ns if syscall_ns else 0.0,
             "share_of_wall": c.total_ns / profile.wall_ns,
             "delegated": c.delegated, "served": c.served or 0}
            for c in sorted(profile.syscalls, key=lambda c: (-c.total_ns, c.name))]
    calls = sum(c.count for c in profile.syscalls)
    return {"program": profile.program, "argv": profile.argv, "wall_ns": profile.wall_ns,
            "threads": max(1, len(profile.threads)), "p": profile.system_share(), "rows": rows,
            "unprofiled_processes": (profile.overhead or {}).get("unprofiled_processes", []),
            "total": {"calls": calls, "errors": sum(c.errors for c in profile.syscalls),
                      "total_ns": syscall_ns, "mean_ns": syscall_ns / calls if calls else 0.0,
                      "share_of_wall": syscall_ns / profile.wall_ns}}


def render(doc: dict, console: Console) -> None:
    """Prints a `summary()` document as a table with strace -c's columns and two more."""
    table = Table(title=f"{' '.join(doc['argv']) or doc['program']}: {doc['wall_ns'] / 1e6:.1f} ms, "
                        f"{doc['threads']} thread(s), system share p = {doc['p']:.3%}")
    for col in ("% time", "seconds", "usecs/call", "calls", "errors", "% of wall", "syscall"):
        table.add_column(col, justify="left" if col == "syscall" else "right")
    for r in doc["rows"]:
        table.add_row(f"{r['share_of_syscall_time'] * 100:.2f}", f"{r['total_ns'] / 1e9:.6f}",
                      f"{r['mean_ns'] / 1e3:.2f}", str(r["calls"]), str(r["errors"] or ""),
                      f"{r['share_of_wall'] * 100:.3f}", r["name"])
    t = doc["total"]
    table.add_row("100.00", f"{t['total_ns'] / 1e9:.6f}", f"{t['mean_ns'] / 1e3:.2f}", str(t["calls"]),
                  str(t["errors"] or ""), f"{t['share_of_wall'] * 100:.3f}", "total", style="bold")
    console.print(table)
    for lost in doc["unprofiled_processes"]:
        # Their files could not be made (the program closed the profile directory's descriptor
        # where its path is not there) or mapped: their calls are not counted.
        who = f"process {lost['pid']}" if lost["pid"] is not None else f"{lost['more']} more processes"
        console.print(f"note: {who} not profiled ({WHY_UNPROFILED[lost['at']]})")
