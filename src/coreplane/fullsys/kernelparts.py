"""Kernel code in the region of interest by function and by part of the kernel (the link model's netem, polling, network stack, device queues, data copies, memory management, scheduling, interrupts and timers, kernel entry and locks), from the osact plugin's kernel blocks named with the guest's own /proc/kallsyms."""

import bisect
import re
from collections import defaultdict
from pathlib import Path

from coreplane.core.errors import CoreplaneError

# A function belongs to the first part whose pattern its name matches (module functions are
# matched as "module:name"). Names, not source files, are what kallsyms has: the patterns follow
# the kernel's prefixes (net/ and drivers/net/ functions carry tcp_, ip_, sock, skb, netif, napi...),
# so a few functions may land in a neighbouring part; the top functions are listed to check.
PARTS = (
    # The link model's own work (fullsys run --link-latency/--link-rate: netem in the guest's
    # kernel): not the OS's activity but the simulated wire's, kept apart to be subtracted.
    ("link model (netem)", re.compile(r"^sch_netem:|netem_")),
    # Waiting for file descriptors (poll, select, epoll and the sockets' poll methods): what a
    # busy-polling progress engine such as Open MPI's costs; NAPI's receive polling is not this.
    ("polling", re.compile(
        r"^_*(do_sys_poll|do_poll|do_select|core_sys_select|do_pselect|poll_|pollwake|pollwait|ep_|do_epoll|"
        r"x64_sys_(poll|ppoll|select|pselect6|epoll\w*))|^_*(tcp|sock|datagram|unix|pipe|eventfd|udp)_poll$")),
    ("network stack", re.compile(
        r"^(virtio_net|net_failover|failover):|skb|sock|_xmit|napi|netif|netdev|process_backlog|"
        r"^_*(tcp|tcp4|udp|inet|ip|ipv4|net|neigh|eth|arp|dst|fib|gro|dev_gro|qdisc|sch|pfifo|csum|rt)_|"
        r"sys_(sendto|recvfrom|sendmsg|recvmsg|accept4?|connect|listen|bind|socket)")),
    ("device queues (virtio)", re.compile(r"virtqueue|vring|^_*virtio|vp_notify|vp_interrupt")),
    ("data copies", re.compile(r"copy_(to|from)_user|copy_user|_copy_(to|from)_iter|copy_page|iov_iter|rep_movs|"
                               r"memcpy|memmove|memset|clear_user|copyout|copyin|check_object_size|usercopy")),
    ("memory management", re.compile(r"page|fault|folio|pte|pmd|pud|lru|^_*mm_|vma|alloc|free|kmem_cache|kmalloc|"
                                     r"slab|zone|rmqueue|mem_cgroup|mmap|brk|tlb|mtree|mt_find|mas_|extfrag|compact")),
    ("scheduling, idle", re.compile(r"sched|switch|task|idle|ttwu|wake|enqueue|dequeue|pick_next|update_curr|"
                                    r"futex|rcu|balance|hlt|mwait|psi_|load_avg")),
    ("interrupts, timers", re.compile(r"irq|apic|timer|tick|clock|time|jiffies|sysvec|interrupt|vsyscall|delay")),
    ("kernel entry, locks", re.compile(r"entry|syscall|exit_to_user|^_*x64_sys|ksys_|fdget|fget|fput|thunk|spin_|"
                                       r"mutex|rwsem|_lock|_unlock")),
)
OTHER = "other"
TOP_FUNCTIONS = 12


def load_symbols(path: Path) -> tuple[list[int], list[str]]:
    """The guest's text symbols, sorted by address: addresses and names ("module:name" for modules)."""
    symbols = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        raise CoreplaneError(f"{path}: no kernel symbols from the guest ({e.strerror})") from None
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if len(fields) < 3 or fields[1] not in "tT":
            continue
        try:
            address = int(fields[0], 16)
        except ValueError:
            raise CoreplaneError(f"{path}:{number}: not a kallsyms line: {line[:80]!r}") from None
        module = fields[3].strip("[]") + ":" if len(fields) > 3 else ""
        symbols.append((address, module + fields[2]))
    if not symbols or all(address == 0 for address, _ in symbols):
        raise CoreplaneError(f"{path}: no kernel text addresses (kallsyms hidden by kptr_restrict?)")
    symbols.sort()
    return [a for a, _ in symbols], [n for _, n in symbols]


def part_of(function: str) -> str:
    """The part of the kernel `function` belongs to (PARTS' first matching pattern), else OTHER."""
    return next((part for part, pattern in PARTS if pattern.search(function)), OTHER)


def attribute(blocks: list[list[int]], symbols: tuple[list[int], list[str]], region_insns: int) -> dict:
    """Kernel instructions and memory accesses of the region per part (with its share of the kernel's
    and of the whole region's instructions) and the functions with the most instructions. `blocks` are the plugin's
    [address, instructions, executions, memory accesses]; a block is named by its first address."""
    addresses, names = symbols
    functions = defaultdict(lambda: [0, 0])
    for address, n_insns, execs, memory in blocks:
        index = bisect.bisect_right(addresses, address) - 1
        name = names[index] if index >= 0 else "?"
        functions[name][0] += n_insns * execs
        functions[name][1] += memory
    # Every part, also those with nothing: a sweep's metric must exist in every run.
    parts = {part: {"insns": 0, "memory": 0} for part in [*(p for p, _ in PARTS), OTHER]}
    for name, (insns, memory) in functions.items():
        part = parts[part_of(name)]
        part["insns"] += insns
        part["memory"] += memory
    kernel = sum(p["insns"] for p in parts.values())
    for part in parts.values():
        part["share_of_kernel"] = part["insns"] / kernel if kernel else None
        part["share_of_region"] = part["insns"] / region_insns if region_insns else None
    top = sorted(functions.items(), key=lambda item: -item[1][0])[:TOP_FUNCTIONS]
    return {"parts": dict(sorted(parts.items(), key=lambda item: -item[1]["insns"])),
            "top_functions": [{"function": name, "part": part_of(name), "insns": insns, "memory": memory}
                              for name, (insns, memory) in top]}
