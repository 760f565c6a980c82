"""`fullsys run`: boots N nodes of a suite's image under TCG with the osact plugin, networked together, runs the matrix multiply across them and reports the OS activity of its region of interest per node and in total, the kernel's part split by function."""

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from coreplane.core import machine
from coreplane.core.documents import read_json
from coreplane.core.errors import CoreplaneError
from coreplane.fullsys import activity, guest, image, kernelparts, snapshot, timing, workdisk
from coreplane.fullsys.paths import (GUEST_PROGRAMS, LOCKSTEP_PLUGIN, MINIMAL, MPI_PROGRAMS, OPENMPI, PLUGIN, PROGRAMS,
                                     RUNS, built)

RESULT = re.compile(r"coreplane-(?:matmul|dmm|dfmm|mpimm) n=(\d+) .*checksum=(\S+)")
# The distributed multiplies' region on the guest's monotonic clock (virtual ns), start and end.
REGION_CLOCK = re.compile(r"coreplane-(?:dmm|dfmm|mpimm) .*roi_ns=(\d+)-(\d+) ")
# A common clock (plugins/lockstep.c): the nodes meet at every multiple of this much virtual time,
# so their clocks differ by less than it (0.1 ms: 100,000 instructions at -icount shift=0).
QUANTUM_NS = 100_000
MAX_NODES = 8
# The workloads a run may select (`--workload`): the multiply over the nodes' own TCP sockets (or,
# with --threads on one node, matmul's threads), the dataflow-threads one (frames on every node,
# remote twrites over TCP), the OpenMPI baseline.
WORKLOADS = ("dmm", "dfmm", "mpimm")
# The dataflow multiply's tile (its default; a node count above N / TILE takes smaller tiles).
DFMM_TILE = 32
MEMORY_MB = 1024
SUBNET = "10.16.0."
# Every node's NIC is on one QEMU multicast socket network (an Ethernet segment through the
# host's loopback); the port is the run's own so that concurrent runs do not share a segment.
MCAST_GROUP = "230.0.16.1"
MCAST_PORTS = (41000, 8000)


def address(rank: int) -> str:
    """Node `rank`'s IPv4 address on the guests' network."""
    return f"{SUBNET}{rank + 1}"


def mac(rank: int) -> str:
    """Node `rank`'s MAC address (set by the guest too: restored guests start with the snapshot's)."""
    return f"52:54:00:16:00:{rank + 1:02x}"


# The OpenMPI baseline's mpirun options: ranks started through coreplane's remote-shell agent
# (mpirsh, no ssh in the images), each node's orted started by node 0 itself (no tree of agents);
# the ob1 messaging layer over TCP (the conventional stack; UCX and the like left out), and with
# several nodes the guests' network for both MPI's messages and its daemons' (the loopback too
# would otherwise be tried).
MPIRUN_OPTIONS = ("--mca plm_rsh_agent /mnt/mpirsh --mca plm_rsh_no_tree_spawn 1 --mca pml ob1 "
                  "--mca btl tcp,self")
# What Open MPI needs of a guest whose root file system is read-only and whose user is root: a
# writable /tmp for its session directories and /dev/shm, a home, permission to run as root, each
# node a host name of its own (restored guests all have the snapshot's).
MPI_ENVIRONMENT = ("mount -t tmpfs tmpfs /tmp\nmkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm\n"
                   "export HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n")


def mpi_work(rank: int, nodes: int, size: int) -> str:
    """The OpenMPI baseline's part of node `rank`'s script: node 0 starts one mpimm rank per node
    with mpirun, the others serve its remote-shell agent; each node then prints its rank's result."""
    setup = f"{MPI_ENVIRONMENT}hostname node{rank}\n"
    if rank > 0:
        return f"{setup}./mpirsh serve {address(rank)}\nstatus=$?\ncat out/result\n(exit $status)"
    network = f"--mca btl_tcp_if_include {SUBNET}0/24 --mca oob_tcp_if_include {SUBNET}0/24"
    hosts = ",".join(address(r) for r in range(nodes))
    return (f"{setup}mpirun {MPIRUN_OPTIONS} {network} --host {hosts} -np {nodes} /mnt/mpimm {size} /mnt/out/result\n"
            "status=$?\ncat out/result\n(exit $status)")


@dataclass(frozen=True)
class Link:
    """A link of fixed latency and bandwidth on every node's NIC (netem in the guest's kernel, set
    up by netup): each frame leaves `latency_us` after it was queued on the sender's virtual clock,
    and no faster than `rate_mbit` (0: no limit)."""

    latency_us: float = 0.0
    rate_mbit: float = 0.0

    def netup_arguments(self) -> str:
        """netup's LATENCY_NS RATE_BYTES_PER_S."""
        return f"{round(self.latency_us * 1000)} {round(self.rate_mbit * 1e6 / 8)}"


def workload_flags(workload: str | None, dataflow: bool, mpi: bool) -> tuple[bool, bool]:
    """(dataflow, mpi) for `--workload NAME` (one of WORKLOADS; None: as the flags say), a one-line
    error when the flags --dataflow or --mpi say otherwise."""
    if workload is None:
        return dataflow, mpi
    if workload not in WORKLOADS:
        raise CoreplaneError(f"--workload {workload}: one of {', '.join(WORKLOADS)}")
    chosen = (workload == "dfmm", workload == "mpimm")
    if (dataflow and not chosen[0]) or (mpi and not chosen[1]):
        raise CoreplaneError(f"--workload {workload} with {'--dataflow' if dataflow else '--mpi'}: choose one")
    return chosen


def workload_name(nodes: int, threads: int, dataflow: bool, mpi: bool) -> str:
    """The guest program a run's nodes run: mpimm, dfmm, matmul (threads on one node) or dmm."""
    return "mpimm" if mpi else "dfmm" if dataflow else "matmul" if threads > 1 and nodes == 1 else "dmm"


def dataflow_work(rank: int, nodes: int, size: int, threads: int) -> str:
    """The dataflow multiply's command on node `rank`: `threads` workers, and with several nodes its
    tile, rank and node 0's address (where the packs and the reduce frame live)."""
    alone = f"./dfmm {size} {threads}"
    return alone if nodes == 1 else f"{alone} {DFMM_TILE} {rank} {nodes} {address(0)}"


def node_script(rank: int, nodes: int, size: int, threads: int, dataflow: bool = False, mpi: bool = False,
                link: Link | None = None) -> str:
    """What node `rank` runs from its workload disk: the network up (several nodes; with `link`, its
    NIC sending through netem, which the sch_netem module gives), the multiply
    (the distributed one, its OpenMPI baseline, the threaded one on a single node, or the
    dataflow-threads one with `threads` workers), then, outside the region, the kernel's text
    symbols (to name the kernel blocks), TCP's counters (retransmissions), the kernel log."""
    if mpi:
        work = mpi_work(rank, nodes, size)
    elif dataflow:
        work = dataflow_work(rank, nodes, size, threads)
    elif threads > 1:
        work = f"./matmul {size} {threads}"
    else:
        work = f"./dmm {size} {rank} {nodes} {address(0)}"
    networked = nodes > 1 or mpi  # Open MPI's daemons need an interface besides the loopback even alone
    netem = f"modprobe sch_netem\n" if link else ""
    link_arguments = f" {link.netup_arguments()}" if link else ""
    network = (f"modprobe virtio_net 2>/dev/null\n{netem}./netup {address(rank)}/24 {mac(rank)}{link_arguments} || exit 1\n"
               if networked else "")
    return (f"# coreplane fullsys: node {rank} of {nodes}\nexport PATH=/usr/sbin:/usr/bin:/sbin:/bin\ncd /mnt\n"
            f"{network}{work}\nstatus=$?\ngrep ' [tT] ' /proc/kallsyms > out/kallsyms\n"
            "cat /proc/net/snmp > out/snmp\ndmesg > out/dmesg\nexit $status\n")


def tcp_counters(snmp_text: str) -> dict:
    """The Tcp: line pair of /proc/net/snmp as {name: value}."""
    rows = [line.split()[1:] for line in snmp_text.splitlines() if line.startswith("Tcp:")]
    return dict(zip(rows[0], map(int, rows[1]))) if len(rows) == 2 else {}


def _check(nodes: int, size: int, threads: int, dataflow: bool, mpi: bool = False) -> None:
    if not 1 <= nodes <= MAX_NODES:
        raise CoreplaneError(f"--nodes {nodes}: between 1 and {MAX_NODES}")
    if size < nodes or threads < 1:
        raise CoreplaneError(f"--size {size} --threads {threads}: the size must be at least the number of nodes "
                             "and the threads positive")
    if mpi and (dataflow or threads > 1):
        raise CoreplaneError("--mpi runs one rank per node, one thread each, without --dataflow")
    if threads > 1 and nodes > 1 and not dataflow:
        raise CoreplaneError(f"--threads {threads} with --nodes {nodes}: threads are for a single node's "
                             "multiply or the dataflow one's workers; several nodes run one thread each")


def plugin_arguments(counts: Path, memory_counted: bool, caches: dict | None) -> str:
    """The osact plugin's arguments: its output file, memory counting, the cache model's geometry
    ({"l1i"|"l1d"|"l2": "SIZE:ASSOC:LINE"}, None for no cache model)."""
    arguments = f"out={counts},mem={'on' if memory_counted else 'off'}"
    if caches:
        arguments += ",cache=on" + "".join(f",{level}={spec}" for level, spec in caches.items())
    return arguments


def _node_result(rank: int, booted: guest.Boot, node_dir, disk, model: timing.Timing) -> dict:
    result = RESULT.search(booted.console)
    if result is None or "workload exit 0" not in booted.console:
        raise CoreplaneError(f"the workload failed on node {rank}: console ends "
                             f"'{guest.console_tail(booted.console)}' (full log {booted.console_path})")
    out = workdisk.read_back(disk, node_dir)
    counts = activity.summarise(node_dir / "osact.json")
    blocks = counts.pop("kernel_blocks")
    events, caches = counts.pop("cache_events"), counts.pop("caches")
    if events is not None:
        counts["cache"] = timing.model(counts["roi"]["insns"], events, caches, model)
    region = counts["roi"]["insns"]["kernel"] + counts["roi"]["insns"]["user"]
    snmp = out / "snmp"
    clock = REGION_CLOCK.search(booted.console)
    lockstep = node_dir / "lockstep.json"
    return {"node": rank, "checksum": float(result.group(2)), "wall_s": round(booted.wall_s, 2),
            "kernel_parts": kernelparts.attribute(blocks, kernelparts.load_symbols(out / "kallsyms"), region),
            "tcp": tcp_counters(snmp.read_text()) if snmp.exists() else {},
            "region_clock_ns": [int(clock.group(1)), int(clock.group(2))] if clock else None,
            "lockstep": read_json(lockstep) if lockstep.exists() else None, **counts}


def common_region(per_node: list[dict], quantum_ns: int) -> dict:
    """The region of interest on the nodes' common clock (virtual ns, simulated): from the first
    node's start to the last node's end, each node's start and end relative to the first start,
    and what keeping the clock cost (barriers passed, host seconds spent waiting at them)."""
    spans = [n["region_clock_ns"] for n in per_node]
    origin = min(begin for begin, _ in spans)
    return {"quantum_ns": quantum_ns, "region_ns": max(end for _, end in spans) - origin,
            "nodes_ns": [[begin - origin, end - origin] for begin, end in spans],
            "barriers": [n["lockstep"]["barriers"] for n in per_node],
            "wait_s": [round(n["lockstep"]["wait_ns"] / 1e9, 2) for n in per_node]}


def totals(per_node: list[dict], model: timing.Timing = timing.Timing()) -> dict:
    """The region of interest summed over nodes: kernel/user instructions and memory accesses, the
    kernel's shares, each part of the kernel's share of all instructions, and the timing model over
    all nodes' cache events when there are any."""
    pairs = {kind: {side: sum(n["roi"][kind][side] for n in per_node) for side in activity.SIDES}
             for kind in ("insns", "memory")}
    region = sum(pairs["insns"].values())
    parts = {}
    for node in per_node:
        for part, counts in node["kernel_parts"]["parts"].items():
            parts[part] = parts.get(part, 0) + counts["insns"]
    cache = None
    if "cache" in per_node[0]:
        events = timing.add_events([n["cache"]["events"] for n in per_node])
        cache = timing.model(pairs["insns"], events, per_node[0]["cache"]["caches"], model)
    return {**pairs, "kernel_share_insns": activity.share(pairs["insns"]),
            "kernel_share_memory": activity.share(pairs["memory"]) if per_node[0]["memory_counted"] else None,
            "kernel_parts_share_of_region": {p: n / region if region else None
                                             for p, n in sorted(parts.items(), key=lambda item: -item[1])},
            "cache": cache}


def run(suite: str, nodes: int, size: int, threads: int, memory_counted: bool, icount: bool, timeout_s: float,
        idle_sleep: bool | None = None, caches: dict | None = None, model: timing.Timing = timing.Timing(),
        from_snapshot: bool = False, dataflow: bool = False, common_clock: bool = False,
        quantum_ns: int = QUANTUM_NS, mpi: bool = False, link_interval_us: int = 0, link: Link | None = None) -> dict:
    """`nodes` guests of `suite` on one network multiplying N×N matrices (node 0 scatters and
    gathers over TCP), or one guest with `threads` threads on as many vCPUs. An idle guest's clock
    follows the host's when `idle_sleep` (default with several nodes: a guest waiting for its peer
    would otherwise leap through its timers: 1.4-2.3x the kernel share at 2 nodes, more as the
    host is busier, TCP retransmitting). With `caches` ({"l1i"|"l1d"|"l2": "SIZE:ASSOC:LINE"}) every
    guest also runs the cache model, and the analytic timing `model` turns its events into cycles.
    `from_snapshot`: every guest starts from the image's booted state (saved first when missing).
    `dataflow`: the dataflow-threads multiply (workloads/fullsys/dfmm.c) with `threads` workers on
    as many vCPUs per node, its tile frames spread over the nodes, remote twrites over TCP. `common_clock`: the nodes' virtual clocks advance in
    lockstep, meeting every `quantum_ns` (plugins/lockstep.c; idle clocks leap, as far as the next
    meeting), and the run reports its region on that one clock. `mpi`: the OpenMPI baseline
    (workloads/fullsys/mpimm.c, one rank per node started by mpirun) on the suite's +openmpi image.
    `link_interval_us`: every node's NIC releases what it receives at each multiple of this many
    µs of its virtual clock (a link delay of up to that, half on average; no bandwidth limit).
    `link`: every node's NIC sends through netem in its kernel, a fixed latency per frame and a
    bandwidth (not on the minimal image, which has no sch_netem)."""
    _check(nodes, size, threads, dataflow, mpi)
    if link_interval_us < 0 or (link_interval_us and nodes < 2):
        raise CoreplaneError(f"--link-interval {link_interval_us}: a positive number of µs, with several nodes")
    if link is not None and (link.latency_us < 0 or link.rate_mbit < 0 or nodes < 2 or suite == MINIMAL):
        raise CoreplaneError(f"--link-latency {link.latency_us:g} --link-rate {link.rate_mbit:g}: not negative, with "
                             f"several nodes, on a Debian suite's image (the {MINIMAL} image has no sch_netem)")
    suite = f"{suite}+{OPENMPI}" if mpi else suite
    if common_clock and (idle_sleep or not icount or quantum_ns < 1 or threads > 1):
        raise CoreplaneError("--common-clock needs -icount, idle clocks that leap (--idle-leap), a positive "
                             "--quantum and one thread per node")
    idle_sleep = nodes > 1 and not common_clock if idle_sleep is None else idle_sleep
    plugin = built(PLUGIN)
    for name in GUEST_PROGRAMS + (MPI_PROGRAMS if mpi else ()):
        built(PROGRAMS / name)   # before the image, whose build can take minutes
    img = image.ensure(suite)
    out = RUNS / f"{suite}-N{nodes}-n{size}-t{threads}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    port = MCAST_PORTS[0] + os.getpid() % MCAST_PORTS[1]
    netdev = f"socket,mcast={MCAST_GROUP}:{port},localaddr=127.0.0.1" if nodes > 1 or mpi else None
    if from_snapshot and netdev is None:  # a restored guest has the NIC it was saved with: on a hub alone
        netdev = snapshot.SAVE_NETDEV
    restore, saving_s = snapshot.ensure(image.image_dir(suite), MEMORY_MB, threads) if from_snapshot else (None, 0.0)
    barrier = out / "clock.barrier"
    if common_clock:
        out.mkdir(parents=True)
        barrier.write_bytes(bytes(4096))  # the lockstep plugin's shared barrier, zero: no node arrived
    guests, disks = [], []
    try:
        for rank in range(nodes):
            node_dir = out / f"node{rank}"
            node_dir.mkdir(parents=True)
            disks.append(workdisk.make(node_dir, node_script(rank, nodes, size, threads, dataflow, mpi, link),
                                       GUEST_PROGRAMS + (MPI_PROGRAMS if mpi else ())))
            lockstep = (f"{built(LOCKSTEP_PLUGIN)},barrier={barrier},nodes={nodes},quantum={quantum_ns},"
                        f"out={node_dir / 'lockstep.json'}",) if common_clock else ()
            extras = guest.Extras(disks[-1], netdev, mac(rank), incoming=restore, plugins=lockstep,
                                  link_interval_us=link_interval_us)
            guests.append(guest.start(image.image_dir(suite), node_dir / "console.log",
                                      plugin=f"{plugin},{plugin_arguments(node_dir / 'osact.json', memory_counted, caches)}",
                                      memory_mb=MEMORY_MB, vcpus=threads, icount=icount,
                                      expect=guest.WORKLOAD_MARKER, extras=extras, idle_sleep=idle_sleep,
                                      append=snapshot.APPEND if from_snapshot else ""))
        deadline = guest.Deadline(timeout_s, guests[0].started)
        booted = [guest.finish(g, deadline) for g in guests]
    finally:
        for g in guests:  # after a failure the other nodes would wait for their peer forever
            guest.stop(g)
    per_node = [_node_result(rank, b, out / f"node{rank}", disks[rank], model) for rank, b in enumerate(booted)]
    wall = max(b.wall_s for b in booted)
    return {"suite": suite, "nodes": nodes, "size": size, "threads": threads, "dataflow": dataflow, "mpi": mpi,
            "workload": workload_name(nodes, threads, dataflow, mpi),
            "link_interval_us": link_interval_us, "icount": icount,
            "link": {"latency_us": link.latency_us, "rate_mbit": link.rate_mbit} if link else None,
            "idle_sleep": idle_sleep, "image": img["path"], "from_snapshot": str(restore) if restore else None,
            "snapshot_saving_s": round(saving_s, 1),
            "kernel": img["kernel"], "debian_version": img["debian_version"], "checksum": per_node[0]["checksum"],
            "wall_s": round(wall, 2), "out": str(out), "machine": machine.describe(),
            "load_average": os.getloadavg(), "total": totals(per_node, model),
            "common_clock": common_region(per_node, quantum_ns) if common_clock else None, "per_node": per_node}
