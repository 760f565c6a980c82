"""The `coreplane fullsys` commands: image (build and boot-check a suite's image), run (OS activity of the workload on N nodes under QEMU/TCG) and figures (paper 001's, from a sweep)."""

from pathlib import Path

import typer

from coreplane.core import options as o
from coreplane.core.output import console, emit
from coreplane.fullsys import image as images
from coreplane.fullsys import run as runs
from coreplane.fullsys import timing
from coreplane.fullsys.paths import MINIMAL

app = typer.Typer(help="Full-system OS activity (paper 001): Debian images under QEMU/TCG with coreplane's plugins.",
                  no_args_is_help=True)
JSON_OPT = o.json_flag()


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def _render_image(doc: dict) -> None:
    how = (f"built in {doc['wall_s']:.0f} s ({'kernel and busybox' if doc['suite'] == MINIMAL else 'mmdebstrap'} "
           f"{doc['bootstrap_s']:.0f} s, mkfs {doc['mkfs_s']:.0f} s, "
           f"boot check {doc['boot_check_s']:.0f} s)" if doc["built_now"] else "cached")
    console.print(f"[bold]{doc['suite']}[/] (debian {doc['debian_version']}, kernel {doc['kernel']}): {how}")
    if doc.get("packages_added"):
        console.print(f"  with {', '.join(doc['packages_added'])}", highlight=False)
    if doc.get("release_validity_checked") is False:
        console.print("  built with the suite's Release file past its Valid-Until accepted (--allow-expired-release)")
    console.print(f"  {doc['path']}: rootfs {_mib(doc['bytes']['rootfs.ext4'])} "
                  f"({_mib(doc['allocated_bytes'])} allocated), kernel {_mib(doc['bytes']['vmlinuz'])}, "
                  f"initrd {_mib(doc['bytes']['initrd.img'])}")
    console.print(f"  boot check: {doc['boot_banner']}", highlight=False)


def _percent(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def _speed(part: dict) -> str:
    return (f"{part['wall_s']:.1f} s wall, {part['cpu_s']:.1f} s QEMU CPU: {part['mips']:.0f} MIPS wall, "
            f"{part['mips_cpu']:.0f} MIPS per CPU second")


def _render_cache(what: str, cache: dict) -> None:
    caches = ", ".join(f"{level} {g['size'] >> 10} KiB {g['assoc']}-way {g['line']} B" for level, g in cache["caches"].items())
    rows = []
    for side in ("kernel", "user", "total"):
        m = cache[side]
        latency = "—" if m["data_access_latency"] is None else f"{m['data_access_latency']:.2f}"
        rows.append(f"{side} {m['cycles']:,.0f} cycles (CPI {m['cpi'] or 0:.2f}), data-access latency {latency} cycles, "
                    f"L2 miss rate {_percent(m['l2_miss_rate'])}")
    console.print(f"{what} ({caches}; simulated): kernel share of cycles {_percent(cache['kernel_share_cycles'])}",
                  highlight=False)
    for row in rows:
        console.print(f"    {row}", highlight=False)


def _render_run(doc: dict) -> None:
    total = doc["total"]
    console.print(f"[bold]{doc['suite']}[/] (kernel {doc['kernel']}), {doc['size']}×{doc['size']} {'dataflow ' if doc['dataflow'] else 'MPI (Open MPI) ' if doc.get('mpi') else ''}matmul ({doc['workload']}) on "
                  f"{doc['nodes']} node(s), {doc['threads']} thread(s) each, checksum {doc['checksum']:.1f}")
    console.print(f"  region of interest, all nodes: {sum(total['insns'].values()):,} instructions, kernel share "
                  f"{_percent(total['kernel_share_insns'])}; memory accesses kernel share "
                  f"{_percent(total['kernel_share_memory'])}")
    if total["cache"]:
        _render_cache("  analytic timing, all nodes", total["cache"])
    console.print("  kernel parts (share of all instructions): " + ", ".join(
        f"{part} {_percent(x)}" for part, x in total["kernel_parts_share_of_region"].items()), highlight=False)
    for node in doc["per_node"]:
        roi = node["roi"]
        console.print(f"  node {node['node']}: {roi['insns']['kernel'] + roi['insns']['user']:,} instructions, "
                      f"kernel share {_percent(roi['kernel_share_insns'])} (memory "
                      f"{_percent(roi['kernel_share_memory'])}), TCP segments out "
                      f"{node['tcp'].get('OutSegs', 0)}, retransmitted {node['tcp'].get('RetransSegs', 0)}; "
                      f"region {_speed(roi)}")
        start = "from the booted snapshot" if doc["from_snapshot"] else "boot included"
        console.print(f"    whole run ({start}): {node['run']['insns']:,} instructions, {_speed(node['run'])}")
    if doc.get("link_interval_us"):
        console.print(f"  link: received frames released every {doc['link_interval_us']} µs of virtual time "
                      "(up to that much delay, no bandwidth limit)")
    if doc.get("link"):
        rate = doc["link"]["rate_mbit"]
        console.print(f"  link (netem in every guest): {doc['link']['latency_us']:g} µs per frame, "
                      f"{f'{rate:g} Mbit/s' if rate else 'no bandwidth limit'}")
    clock = doc["common_clock"]
    if clock:
        starts = ", ".join(f"{begin / 1e6:.3f}-{end / 1e6:.3f}" for begin, end in clock["nodes_ns"])
        console.print(f"  common clock (lockstep every {clock['quantum_ns'] / 1e3:g} µs of virtual time; simulated): "
                      f"region {clock['region_ns'] / 1e6:.3f} ms from the first node's start to the last one's end; "
                      f"per node {starts} ms; {max(clock['barriers'])} barriers, "
                      f"{max(clock['wait_s']):.1f} s waiting at most", highlight=False)
    console.print(f"  output {doc['out']}")


@app.command()
def image(suite: str = typer.Argument(..., help="Debian suite: bullseye, bookworm, trixie or sid; SUITE+openmpi "
                                                "adds openmpi-bin (the MPI baseline's image)."),
          allow_expired_release: bool = typer.Option(False, "--allow-expired-release",
                                                     help="Let mmdebstrap's apt take a Release file past its "
                                                          "Valid-Until (a stale mirror; signatures still checked)."),
          as_json: bool = JSON_OPT) -> None:
    """Build (or take from the cache) a suite's bootable image and check that it boots."""
    emit(images.ensure(suite, allow_expired_release), as_json, _render_image)


@app.command()
def run(suite: str = typer.Option(..., "--image", help="The suite whose image to boot."),
        nodes: int = typer.Option(1, "--nodes", help="Simulated nodes, each its own guest, on one network."),
        size: int = typer.Option(128, "--size", help="The matrices are SIZE×SIZE doubles."),
        threads: int = typer.Option(1, "--threads", help="Workload threads, one vCPU each (a single node only)."),
        memory: bool = typer.Option(True, "--memory/--no-memory", help="Count memory accesses (slower)."),
        icount: bool = typer.Option(True, "--icount/--no-icount",
                                    help="Deterministic instruction counting (-icount); off is faster, not repeatable."),
        idle_sleep: bool | None = typer.Option(None, "--idle-sleep/--idle-leap", show_default=False,
                                        help="An idle guest's clock follows the host's (sleep=on; default with "
                                             "several nodes) or leaps to its next timer (sleep=off; default on one)."),
        timeout: float = typer.Option(900, "--timeout", help="Seconds before the guests are stopped."),
        cache: bool = typer.Option(False, "--cache/--no-cache",
                                   help="Run the cache model (L1I, L1D, unified L2 per vCPU) and the analytic "
                                        "in-order timing model in the region of interest (slower)."),
        l1i: str = typer.Option("32K:8:64", "--l1i", help="L1 instruction cache SIZE:ASSOC:LINE (with --cache)."),
        l1d: str = typer.Option("32K:8:64", "--l1d", help="L1 data cache SIZE:ASSOC:LINE (with --cache)."),
        l2: str = typer.Option("1M:16:64", "--l2", help="Unified L2 SIZE:ASSOC:LINE (with --cache)."),
        cpi: float = typer.Option(timing.Timing.cpi, "--cpi", help="Cycles per instruction, L1 hits included."),
        l1_latency: float = typer.Option(timing.Timing.l1_latency, "--l1-latency",
                                         help="Cycles of a load or store that hits the L1."),
        l2_latency: float = typer.Option(timing.Timing.l2_latency, "--l2-latency",
                                         help="Cycles an L1 miss served by the L2 adds."),
        memory_latency: float = typer.Option(timing.Timing.memory_latency, "--memory-latency",
                                             help="Cycles an L2 miss adds."),
        from_snapshot: bool = typer.Option(False, "--from-snapshot/--boot",
                                           help="Start every guest from the image's booted state (saved once per "
                                                "image, memory and vCPUs) instead of booting it."),
        workload: str | None = typer.Option(None, "--workload", show_default=False,
                                            help=f"The multiply to run: {', '.join(runs.WORKLOADS)} (dmm: own TCP "
                                                 "sockets, or matmul's threads with --threads on one node; dfmm: "
                                                 "--dataflow; mpimm: --mpi)."),
        dataflow: bool = typer.Option(False, "--dataflow",
                                      help="The dataflow-threads multiply (DF-Threads style: frames with "
                                           "synchronisation counts, a scheduler with --threads workers per node, "
                                           "twrites to another node's frames over TCP)."),
        common_clock: bool = typer.Option(False, "--common-clock",
                                          help="The nodes' virtual clocks advance in lockstep (they meet every "
                                               "--quantum ns): the region is reported on that one clock."),
        quantum: int = typer.Option(runs.QUANTUM_NS, "--quantum",
                                    help="Virtual ns between the nodes' meetings (with --common-clock)."),
        mpi: bool = typer.Option(False, "--mpi/--sockets",
                                 help="The OpenMPI baseline: the distributed multiply through Debian's Open MPI, "
                                      "one rank per node started by mpirun, on the SUITE+openmpi image "
                                      "(`make fullsys-mpi-setup` builds it); or through its own TCP sockets."),
        link_interval: int = typer.Option(0, "--link-interval",
                                          help="Every NIC releases the frames it received at each multiple of "
                                               "this many µs of its guest's virtual time (a link delay of up to "
                                               "that; 0: at once). Several nodes only."),
        link_latency: float = typer.Option(0.0, "--link-latency",
                                           help="Every node's NIC sends each frame this many µs of its virtual "
                                                "time after it was queued (netem in the guest's kernel; with "
                                                "--common-clock, a --quantum well below it). Several nodes only."),
        link_rate: float = typer.Option(0.0, "--link-rate",
                                        help="And no faster than this many Mbit/s (0: no limit)."),
        as_json: bool = JSON_OPT) -> None:
    """Boot N nodes under QEMU/TCG with the osact plugin on one network, run the (distributed) matrix
    multiply, report the kernel/user split of its region of interest per node and in total, the
    kernel's part by function (network stack, copies, ...), and the simulation speed; with --cache
    also simulated cycles, data-access latency and L2 miss rate (an analytic model, not a pipeline)."""
    caches = {"l1i": l1i, "l1d": l1d, "l2": l2} if cache else None
    dataflow, mpi = runs.workload_flags(workload, dataflow, mpi)
    link = runs.Link(link_latency, link_rate) if link_latency or link_rate else None
    model = timing.Timing(cpi, l1_latency, l2_latency, memory_latency)
    emit(runs.run(suite, nodes, size, threads, memory, icount, timeout, idle_sleep, caches, model, from_snapshot,
                  dataflow, common_clock, quantum, mpi, link_interval, link), as_json, _render_run)


@app.command()
def figures(sweep: Path = typer.Argument(..., help="A fullsys sweep's directory (examples/sweeps/fullsys.info)."),
            out: Path = typer.Option(Path("docs/figures"), "--out", help="Where the PNGs go."),
            note: str = typer.Option("", "--note", help="Machine and load, for the figures' titles."),
            as_json: bool = JSON_OPT) -> None:
    """Paper 001's figures from a sweep (simulated): kernel share against nodes per suite and size,
    the kernel's parts; prints the medians as a Markdown table."""
    from coreplane.fullsys import figures as drawing  # matplotlib and pandas only for this command
    emit(drawing.draw(sweep, out, note), as_json, lambda doc: console.print(doc["table"], highlight=False))
