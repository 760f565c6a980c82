"""The `coreplane fullsys` commands: image (build and boot-check a suite's image) and run (OS activity of the workload under QEMU/TCG)."""

import typer

from coreplane.core import options as o
from coreplane.core.output import console, emit
from coreplane.fullsys import image as images
from coreplane.fullsys import run as runs

app = typer.Typer(help="Full-system OS activity (paper 001): Debian images under QEMU/TCG with coreplane's plugins.",
                  no_args_is_help=True)
JSON_OPT = o.json_flag()


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def _render_image(doc: dict) -> None:
    how = (f"built in {doc['wall_s']:.0f} s (mmdebstrap {doc['bootstrap_s']:.0f} s, mkfs {doc['mkfs_s']:.0f} s, "
           f"boot check {doc['boot_check_s']:.0f} s)" if doc["built_now"] else "cached")
    console.print(f"[bold]{doc['suite']}[/] (debian {doc['debian_version']}, kernel {doc['kernel']}): {how}")
    console.print(f"  {doc['path']}: rootfs {_mib(doc['bytes']['rootfs.ext4'])} "
                  f"({_mib(doc['allocated_bytes'])} allocated), kernel {_mib(doc['bytes']['vmlinuz'])}, "
                  f"initrd {_mib(doc['bytes']['initrd.img'])}")
    console.print(f"  boot check: {doc['boot_banner']}", highlight=False)


def _percent(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def _speed(part: dict) -> str:
    return (f"{part['wall_s']:.1f} s wall, {part['cpu_s']:.1f} s QEMU CPU: {part['mips']:.0f} MIPS wall, "
            f"{part['mips_cpu']:.0f} MIPS per CPU second")


def _render_run(doc: dict) -> None:
    roi = doc["roi"]
    console.print(f"[bold]{doc['suite']}[/] (kernel {doc['kernel']}), {doc['size']}×{doc['size']} matmul, "
                  f"{doc['threads']} thread(s), checksum {doc['checksum']:.1f}")
    console.print(f"  region of interest: {roi['insns']['kernel'] + roi['insns']['user']:,} instructions, kernel "
                  f"share {_percent(roi['kernel_share_insns'])}; memory accesses kernel share "
                  f"{_percent(roi['kernel_share_memory'])}; {_speed(roi)}")
    console.print(f"  whole run (boot included): {doc['run']['insns']:,} instructions, {_speed(doc['run'])}; "
                  f"output {doc['out']}")


@app.command()
def image(suite: str = typer.Argument(..., help="Debian suite: bullseye, bookworm, trixie or sid."),
          as_json: bool = JSON_OPT) -> None:
    """Build (or take from the cache) a suite's bootable image and check that it boots."""
    emit(images.ensure(suite), as_json, _render_image)


@app.command()
def run(suite: str = typer.Option(..., "--image", help="The suite whose image to boot."),
        nodes: int = typer.Option(1, "--nodes", help="Simulated nodes (1 so far)."),
        size: int = typer.Option(128, "--size", help="The matrices are SIZE×SIZE doubles."),
        threads: int = typer.Option(1, "--threads", help="Workload threads, one vCPU each."),
        memory: bool = typer.Option(True, "--memory/--no-memory", help="Count memory accesses (slower)."),
        icount: bool = typer.Option(True, "--icount/--no-icount",
                                    help="Deterministic instruction counting (-icount); off is faster, not repeatable."),
        timeout: float = typer.Option(900, "--timeout", help="Seconds before the guest is stopped."),
        as_json: bool = JSON_OPT) -> None:
    """Boot a node under QEMU/TCG with the osact plugin, run the matrix multiply, report the kernel/user
    split of its region of interest and the simulation speed."""
    emit(runs.run(suite, nodes, size, threads, memory, icount, timeout), as_json, _render_run)
