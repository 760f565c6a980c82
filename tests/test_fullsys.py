"""Full-system inputs and the osact plugin's counts without booting anything: unknown suites, node
and thread counts out of range, kernel shares summed over vCPUs and over nodes, kernel blocks named
and put into parts of the kernel, a region of interest never closed, the console line an error
quotes, the nodes' scripts and TCP counters, the study's INFOFILE."""

import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from conftest import REPO, run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.dse.metrics import json_field
from coreplane.dse.specfile import load as load_spec
from coreplane.fullsys import kernelparts
from coreplane.fullsys.activity import summarise
from coreplane.fullsys import guest
from coreplane.fullsys.guest import console_tail
from coreplane.fullsys.image import MMDEBSTRAP_OPTIONS, cache_key, mmdebstrap_options
from coreplane.fullsys.paths import PROGRAMS, check_suite, variant_packages
from coreplane.fullsys.run import Link, common_region, node_script, tcp_counters, totals, workload_flags, workload_name


def counts(tmp_path, closed=True, memory=True):
    """An osact output file: two vCPUs, the second idle in the kernel."""
    doc = {"plugin": "osact", "format": 1, "memory_counted": memory,
           "roi": {"opened": True, "closed": closed, "opened_by_vcpu": 0, "wall_ns": 2_000_000_000,
                   "cpu_ns": 1_000_000_000},
           "run_wall_ns": 10_000_000_000, "run_cpu_ns": 5_000_000_000,
           "vcpus": [{"vcpu": 0, "run_insns": 900_000_000, "insns": {"kernel": 10, "user": 80},
                      "loads": {"kernel": 5, "user": 30}, "stores": {"kernel": 5, "user": 10}},
                     {"vcpu": 1, "run_insns": 100_000_000, "insns": {"kernel": 10, "user": 0},
                      "loads": {"kernel": 0, "user": 0}, "stores": {"kernel": 0, "user": 0}}]}
    path = tmp_path / "osact.json"
    path.write_text(json.dumps(doc))
    return path


def test_shares_and_speed_sum_over_vcpus(tmp_path):
    s = summarise(counts(tmp_path))
    assert s["roi"]["insns"] == {"kernel": 20, "user": 80}
    assert s["roi"]["kernel_share_insns"] == pytest.approx(0.2)
    assert s["roi"]["kernel_share_memory"] == pytest.approx(10 / 50)
    assert s["roi"]["mips"] == pytest.approx(100 / 2e6)
    assert s["run"]["mips"] == pytest.approx(100.0)
    assert s["run"]["mips_cpu"] == pytest.approx(200.0)


def test_memory_share_absent_when_not_counted(tmp_path):
    assert summarise(counts(tmp_path, memory=False))["roi"]["kernel_share_memory"] is None


def test_region_never_closed_is_an_error(tmp_path):
    with pytest.raises(CoreplaneError, match="region of interest was opened but not closed"):
        summarise(counts(tmp_path, closed=False))


def test_unknown_suite_is_one_line():
    proc = run_cli("fullsys", "image", "etch")
    assert proc.returncode != 0
    assert proc.stderr.strip() == ("coreplane: error: unknown suite 'etch': one of bullseye, bookworm, trixie, sid "
                                   "(or minimal), optionally +openmpi")


@pytest.mark.parametrize("name", ["bookworm+mpich", "minimal+openmpi", "etch+openmpi"])
def test_unknown_variant_is_an_error(name):
    with pytest.raises(CoreplaneError, match=f"unknown suite '{re.escape(name)}'"):
        check_suite(name)


def test_openmpi_variant_adds_its_package_and_keys_its_own_image():
    assert variant_packages("bookworm+openmpi") == ("openmpi-bin",)
    assert "--include=openmpi-bin" in mmdebstrap_options("bookworm+openmpi")
    assert mmdebstrap_options("bookworm") == MMDEBSTRAP_OPTIONS  # the plain suites' cached images stay valid
    assert cache_key("bookworm+openmpi") != cache_key("bookworm")


@pytest.mark.parametrize("args, message", [
    (["--nodes", "9"], "--nodes 9: between 1 and 8"),
    (["--nodes", "4", "--size", "3"], "the size must be at least the number of nodes"),
    (["--nodes", "2", "--threads", "2"], "threads are for a single node's multiply"),
    (["--workload", "dfmm", "--mpi"], "--workload dfmm with --mpi: choose one"),
    (["--workload", "mpi"], "--workload mpi: one of dmm, dfmm, mpimm"),
    (["--nodes", "2", "--dataflow", "--threads", "2", "--common-clock"], "one thread per node"),
    (["--nodes", "2", "--common-clock", "--idle-sleep"], "--common-clock needs -icount, idle clocks that leap"),
    (["--mpi", "--dataflow"], "--mpi runs one rank per node"),
    (["--link-interval", "100"], "--link-interval 100: a positive number of µs, with several nodes"),
    (["--link-latency", "50"], "--link-latency 50 --link-rate 0: not negative, with several nodes"),
    (["--nodes", "2", "--link-rate", "-1"], "--link-latency 0 --link-rate -1: not negative"),
])
def test_bad_node_counts_are_one_line(args, message):
    proc = run_cli("fullsys", "run", "--image", "bookworm", *args)
    assert proc.returncode != 0
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_link_interval_holds_received_frames_on_the_virtual_clock(tmp_path):
    if shutil.which(guest.QEMU) is None:
        pytest.skip(f"{guest.QEMU} is installed by `make fullsys-setup`")
    def objects(interval):
        extras = guest.Extras(netdev="hubport,hubid=0", mac="52:54:00:16:00:01", link_interval_us=interval)
        cmd = guest.command(tmp_path, 1024, 1, "", None, True, extras)
        return [cmd[i + 1] for i, word in enumerate(cmd) if word == "-object"]
    assert objects(250) == ["filter-buffer,id=link0,netdev=net0,queue=rx,interval=250"]
    assert objects(0) == []


class FrozenOnce:
    """A guest process that never ends, waited for on a fake clock; the first wait's slice lasts
    `stall` seconds more than asked, as when a cgroup freezer stops the waiting process."""

    def __init__(self, stall):
        self.now, self.stall, self.waits = 1000.0, stall, 0

    def monotonic(self):
        return self.now

    def wait(self, timeout):
        self.now += timeout + (self.stall if self.waits == 0 else 0)
        self.waits += 1
        raise subprocess.TimeoutExpired("qemu", timeout)

    def poll(self):
        return None


@pytest.mark.parametrize("stall, waits, stalled", [(600, 10, 600), (3, 7, 0)])
def test_deadline_does_not_count_time_the_waiter_was_stopped(monkeypatch, stall, waits, stalled):
    proc = FrozenOnce(stall)
    monkeypatch.setattr(guest.time, "monotonic", proc.monotonic)
    deadline = guest.Deadline(10, start=1000.0)
    assert not deadline.wait(proc)
    # a 600 s stop is not counted: the 10 s still pass in slices after it; a 3 s overshoot (load)
    # is under STALL_S and counts
    assert deadline.stalled_s == stalled and proc.waits == waits
    assert proc.now == pytest.approx(1010 + stalled)


def test_node_scripts():
    worker = node_script(1, 3, 96, 1)
    assert "./netup 10.16.0.2/24 52:54:00:16:00:02 || exit 1" in worker and "./dmm 96 1 3 10.16.0.1" in worker
    alone = node_script(0, 1, 64, 4)
    assert "netup" not in alone and "./matmul 64 4" in alone
    assert "/proc/kallsyms > out/kallsyms" in alone  # after the work: outside the region
    assert "./dfmm 64 2\n" in node_script(0, 1, 64, 2, dataflow=True)
    # across nodes: the tile, the rank, the node count and node 0's address (packs and reduce there)
    dataflow = node_script(2, 3, 96, 1, dataflow=True)
    assert "./netup 10.16.0.3/24" in dataflow and "./dfmm 96 1 32 2 3 10.16.0.1\n" in dataflow


def test_link_model_in_the_node_scripts():
    link = Link(latency_us=12.5, rate_mbit=1000)
    assert link.netup_arguments() == "12500 125000000"
    script = node_script(1, 2, 64, 1, link=link)
    assert "modprobe sch_netem\n./netup 10.16.0.2/24 52:54:00:16:00:02 12500 125000000 || exit 1" in script
    assert "netem" not in node_script(1, 2, 64, 1) and "./netup 10.16.0.2/24 52:54:00:16:00:02 ||" in node_script(1, 2, 64, 1)
    # netem's own instructions are the simulated wire's, kept apart from the network stack's
    assert kernelparts.part_of("sch_netem:netem_enqueue") == "link model (netem)"
    assert kernelparts.part_of("netem_dequeue") == "link model (netem)"
    assert kernelparts.part_of("qdisc_watchdog") == "network stack"


def test_workload_selection():
    assert workload_flags("dfmm", True, False) == (True, False) and workload_flags("mpimm", False, False) == (False, True)
    assert workload_flags("dmm", False, False) == (False, False) and workload_flags(None, True, False) == (True, False)
    assert [workload_name(1, 4, False, False), workload_name(2, 1, False, False), workload_name(4, 2, True, False),
            workload_name(2, 1, False, True)] == ["matmul", "dmm", "dfmm", "mpimm"]


def test_mpi_node_scripts():
    node0 = node_script(0, 3, 96, 1, mpi=True)
    assert "./netup 10.16.0.1/24" in node0 and "hostname node0" in node0 and "mount -t tmpfs tmpfs /tmp" in node0
    assert "--mca plm_rsh_agent /mnt/mpirsh" in node0
    assert "--host 10.16.0.1,10.16.0.2,10.16.0.3 -np 3 /mnt/mpimm 96 /mnt/out/result" in node0
    assert "--mca btl_tcp_if_include 10.16.0.0/24" in node0
    worker = node_script(2, 3, 96, 1, mpi=True)
    assert "./mpirsh serve 10.16.0.3" in worker and "mpirun" not in worker and "cat out/result" in worker
    alone = node_script(0, 1, 64, 1, mpi=True)  # Open MPI wants a network interface even alone
    assert "./netup 10.16.0.1/24" in alone and "--host 10.16.0.1 -np 1 /mnt/mpimm 64" in alone


@pytest.fixture
def mpirsh():
    path = PROGRAMS / "mpirsh"
    if not path.exists():
        pytest.skip(f"{path} is built by `make fullsys-setup`")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mpirsh_runs_a_command_and_waits_for_what_it_left(mpirsh, tmp_path):
    env = {**os.environ, "MPIRSH_PORT": str(free_port())}
    marker = tmp_path / "orphan"
    server = subprocess.Popen([str(mpirsh), "serve", "127.0.0.1"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        # the agent retries until the server listens: no sleep needed before it
        client = subprocess.run([str(mpirsh), "127.0.0.1", "echo", "hello", "$((6*7));",
                                 "(sleep 0.3; echo left >", str(marker), ") &", "exit 3"],
                                env=env, capture_output=True, text=True, timeout=60)
        status = server.wait(timeout=60)
    finally:
        server.kill()
        server.wait()
    # both exit with the command's status (the agent as ssh does), and only after the command's
    # orphan has ended
    assert client.returncode == 3 and client.stdout == "hello 42\n", client.stderr
    assert status == 3 and marker.read_text() == "left\n"


def run_dfmm(size: int, nodes: int, workers: int = 1) -> list[dict]:
    """dfmm's nodes as host processes on the loopback (node 0 on a free port): each node's result
    line as {field: value}, by rank."""
    address = f"127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([str(PROGRAMS / "dfmm"), str(size), str(workers), "32", str(rank), str(nodes), address],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(nodes)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    return [dict(field.split("=", 1) for field in out.split()[1:]) for out, _ in outs]


def dmm_checksum(size: int) -> str:
    out = subprocess.run([str(PROGRAMS / "dmm"), str(size), "0", "1", "-"], capture_output=True, text=True, check=True)
    return out.stdout.split("checksum=")[1].strip()


@pytest.mark.parametrize("size, nodes, tile", [(100, 1, 32), (256, 2, 32), (100, 3, 32), (257, 4, 32), (64, 4, 16),
                                               (5, 4, 1)])
def test_dataflow_frames_across_nodes(size, nodes, tile):
    """The packs and the reduce frame on node 0, row panels' tile frames in blocks over the nodes:
    every remote twrite arrives and counts down a frame, and node 0 gathers dmm's product."""
    if not (PROGRAMS / "dfmm").exists():
        pytest.skip(f"{PROGRAMS / 'dfmm'} is built by `make fullsys-setup`")
    results = run_dfmm(size, nodes, workers=2)
    assert results[0]["checksum"] == dmm_checksum(size)
    tiles = -(-size // tile)
    held = [sum(1 for p in range(tiles) if p * nodes // tiles == r) for r in range(nodes)]
    assert min(held) >= 1 and [int(r["tile"]) for r in results] == [tile] * nodes
    # node 0 runs the 2·tiles packs, its tiles and the reduce, and receives every other tile's product
    assert int(results[0]["dfthreads"]) == 2 * tiles + held[0] * tiles + 1
    assert int(results[0]["remote_twrites"]) == (tiles - held[0]) * tiles
    for rank in range(1, nodes):  # each of its tiles takes A's panel and B's from node 0
        assert int(results[rank]["dfthreads"]) == held[rank] * tiles
        assert int(results[rank]["remote_twrites"]) == 2 * held[rank] * tiles


def test_tcp_counters():
    snmp = ("Ip: Forwarding DefaultTTL\nIp: 2 64\nTcp: RtoAlgorithm OutSegs RetransSegs\n"
            "Tcp: 1 147 3\nUdp: InDatagrams\nUdp: 0\n")
    assert tcp_counters(snmp) == {"RtoAlgorithm": 1, "OutSegs": 147, "RetransSegs": 3}
    assert tcp_counters("") == {}


KALLSYMS = ("ffffffff81000000 T _stext\nffffffff81000100 t tcp_sendmsg\nffffffff81000200 T clear_page_rep\n"
            "ffffffff81000300 d some_data\nffffffff81000400 t schedule\n"
            "ffffffffc0000000 t receive_buf\t[virtio_net]\n")


def test_kernel_blocks_named_and_split_into_parts(tmp_path):
    path = tmp_path / "kallsyms"
    path.write_text(KALLSYMS)
    symbols = kernelparts.load_symbols(path)
    # [address, instructions, executions, memory accesses]: two blocks in tcp_sendmsg, one in the
    # page clearing, one in the module's function, one in schedule (the data symbol is no function)
    blocks = [[0xffffffff81000110, 10, 3, 7], [0xffffffff81000180, 5, 2, 1], [0xffffffff81000210, 20, 1, 0],
              [0xffffffffc0000040, 4, 5, 2], [0xffffffff81000410, 50, 1, 9]]
    prof = kernelparts.attribute(blocks, symbols, region_insns=1000)
    parts = prof["parts"]
    assert parts["network stack"]["insns"] == 10 * 3 + 5 * 2 + 4 * 5
    assert parts["network stack"]["memory"] == 10
    assert parts["memory management"]["insns"] == 20
    assert parts["scheduling, idle"]["insns"] == 50
    assert parts["network stack"]["share_of_region"] == pytest.approx(60 / 1000)
    assert parts["network stack"]["share_of_kernel"] == pytest.approx(60 / 130)
    assert prof["top_functions"][:2] == [{"function": "schedule", "part": "scheduling, idle", "insns": 50, "memory": 9},
                                         {"function": "tcp_sendmsg", "part": "network stack", "insns": 40, "memory": 8}]
    assert {"function": "virtio_net:receive_buf", "part": "network stack", "insns": 20, "memory": 2} in prof["top_functions"]


def test_kallsyms_without_addresses_is_an_error(tmp_path):
    path = tmp_path / "kallsyms"
    path.write_text("0000000000000000 T _stext\n0000000000000000 t tcp_sendmsg\n")
    with pytest.raises(CoreplaneError, match="kptr_restrict"):
        kernelparts.load_symbols(path)
    path.write_text("zzzz T _stext\n")
    with pytest.raises(CoreplaneError, match=r"kallsyms:1: not a kallsyms line"):
        kernelparts.load_symbols(path)


def test_totals_over_nodes(tmp_path):
    node = summarise(counts(tmp_path))
    node["kernel_parts"] = {"parts": {"network stack": {"insns": 15}, "other": {"insns": 5}}}
    total = totals([node, node])
    assert total["insns"] == {"kernel": 40, "user": 160}
    assert total["kernel_share_insns"] == pytest.approx(0.2)
    assert total["kernel_parts_share_of_region"] == {"network stack": pytest.approx(30 / 200),
                                                     "other": pytest.approx(10 / 200)}


def test_console_tail_prefers_the_panic_line():
    console = ("[ 1.5] VFS: Cannot open root device\n[ 1.5] Kernel panic - not syncing: VFS: Unable to mount root fs"
               " on unknown-block(0,0)\n[ 1.5] Call Trace:\n[ 1.5]  <TASK>\n[ 1.5] </TASK>\n")
    assert console_tail(console) == "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
    assert console_tail("a\n b  c\n") == "a b c"
    assert console_tail("") == "(empty)"



def test_the_study_infofile_reads_what_a_run_reports(tmp_path):
    spec = load_spec(REPO / "examples" / "sweeps" / "fullsys.info")
    assert spec.parameters == {"distro": ["bullseye", "bookworm", "trixie", "sid"], "nodes": [1, 2, 4],
                               "size": [64, 256]}
    assert spec.repetitions >= 2
    fields = {name: path for m in spec.metrics if m.source == "json" for name, path in m.fields.items()}
    assert fields["network_share"] == "total.kernel_parts_share_of_region.network stack"
    # a single node has no network code in its region: the part is there, with 0
    (tmp_path / "kallsyms").write_text(KALLSYMS)
    node = summarise(counts(tmp_path))
    node["kernel_parts"] = kernelparts.attribute([[0xffffffff81000210, 20, 1, 0]],
                                                 kernelparts.load_symbols(tmp_path / "kallsyms"), 100)
    doc = {"wall_s": 60.0, "total": totals([node]), "per_node": [node]}
    assert {name: json_field(doc, path) for name, path in fields.items()}["network_share"] == 0


def test_figures_table_gives_medians_with_their_spread():
    import pandas as pd
    from coreplane.fullsys.figures import markdown
    rows = [{"distro": d, "nodes": n, "size": 256, "metric": m, "n": 2, "median": v, "min": v - 0.01, "max": v + 0.01}
            for d, n, m, v in [("bookworm", 1, "kernel_share", 0.02), ("bookworm", 1, "network_share", 0.0),
                               ("bookworm", 4, "kernel_share", 0.12), ("bookworm", 4, "network_share", 0.05)]]
    table = markdown(pd.DataFrame(rows)).splitlines()
    assert table[0] == "| suite | nodes | kernel share, 256×256 | network stack, 256×256 |"
    assert table[3] == "| bookworm | 4 | 12.00 % (11.00–13.00, n=2) | 5.00 % (4.00–6.00, n=2) |"


def test_the_mpi_infofile_compares_the_stacks_with_polling_apart():
    spec = load_spec(REPO / "examples" / "sweeps" / "fullsys-mpi.info")
    assert spec.parameters["stack"] == ["--sockets", "--mpi"]
    fields = {name: path for m in spec.metrics if m.source == "json" for name, path in m.fields.items()}
    assert fields["polling_share"] == "total.kernel_parts_share_of_region.polling"
    assert kernelparts.part_of("do_sys_poll") == "polling" and kernelparts.part_of("tcp_poll") == "polling"
    assert kernelparts.part_of("napi_poll") == "network stack"  # NAPI's receive polling is the network's


def test_stacks_table_gives_mpi_as_ratios_to_sockets():
    import pandas as pd
    from coreplane.fullsys.figures import stack_markdown
    values = {("--sockets", "kernel_share"): 0.10, ("--mpi", "kernel_share"): 0.20, ("--sockets", "kernel_insns"): 100,
              ("--mpi", "kernel_insns"): 180, ("--sockets", "user_insns"): 1000, ("--mpi", "user_insns"): 1010,
              ("--sockets", "polling_share"): 0.0, ("--mpi", "polling_share"): 0.05, ("--sockets", "network_share"): 0.04,
              ("--mpi", "network_share"): 0.05, ("--sockets", "region_ns"): 44e6, ("--mpi", "region_ns"): 46e6}
    rows = [{"stack": stack, "size": 256, "nodes": 4, "metric": m, "median": v} for (stack, m), v in values.items()]
    table = stack_markdown(pd.DataFrame(rows)).splitlines()
    assert len(table) == 3
    assert table[2] == ("| 256 | 4 | 10.00 % | 20.00 % | 1.80 | 0.00 / 5.00 % | 4.00 / 5.00 % | 1.01 | "
                        "44.00 / 46.00 |")


def test_workload_table_puts_dataflow_between_the_stacks():
    import pandas as pd
    from coreplane.fullsys.figures import workload_markdown
    values = {"kernel_share": 0.12, "network_share": 0.05, "polling_share": 0.01, "region_ns": 45e6}
    rows = [{"workload": w, "size": 256, "nodes": 4, "metric": m, "median": (3 if w == "mpimm" else 1) * v,
             "min": v, "max": 4 * v, "n": 2} for w in ("mpimm", "dmm", "dfmm") for m, v in values.items()]
    rows = [r for r in rows if not (r["workload"] == "dfmm" and r["metric"] == "polling_share")]
    table = workload_markdown(pd.DataFrame(rows)).splitlines()
    assert table[0].startswith("| size | nodes | kernel share, dmm | network stack / polling, dmm | region (ms), dmm | "
                               "kernel share, dfmm |") and table[0].endswith("region (ms), mpimm |")
    assert table[2] == ("| 256 | 4 | 12.00 % (12.00–48.00, n=2) | 5.00 / 1.00 % | 45.00 | 12.00 % (12.00–48.00, n=2) "
                        "| — | 45.00 | 36.00 % (12.00–48.00, n=2) | 15.00 / 3.00 % | 135.00 |")


def test_link_table_per_stack_and_interval():
    import pandas as pd
    from coreplane.fullsys.figures import link_markdown
    rows = [{"stack": stack, "link": link, "metric": m, "median": v}
            for stack in ("--mpi", "--sockets") for link in (0, 1000)
            for m, v in (("region_ns", 44e6 + 1000 * link), ("kernel_share", 0.1), ("polling_share", 0.0),
                         ("network_share", 0.05), ("tcp_retransmitted", 0))]
    table = link_markdown(pd.DataFrame(rows)).splitlines()
    assert table[2] == "| own TCP sockets (dmm) | 0 | 44.00 | 10.00 % | 0.00 % | 5.00 % | 0 |"
    assert table[5] == "| Open MPI (mpimm) | 1000 | 45.00 | 10.00 % | 0.00 % | 5.00 % | 0 |"


def test_latency_table_per_workload_shows_netem_apart():
    import pandas as pd
    from coreplane.fullsys.figures import LATENCY, link_markdown
    rows = [{"workload": w, "latency": link, "metric": m, "median": v}
            for w in ("mpimm", "dfmm") for link in (0, 100)
            for m, v in (("region_ns", 44e6 + 1000 * link), ("kernel_share", 0.1), ("polling_share", 0.0),
                         ("network_share", 0.05), ("netem_share", 0.002), ("tcp_retransmitted", 3))]
    table = link_markdown(pd.DataFrame(rows), LATENCY).splitlines()
    assert table[0] == ("| workload | link latency (µs) | region (ms, common clock) | kernel share | polling | network stack | "
                        "netem (the link model) | node 0's TCP retransmissions |")
    assert table[2] == "| dataflow frames (dfmm) | 0 | 44.00 | 10.00 % | 0.00 % | 5.00 % | 0.20 % | 3 |"
    assert table[5] == "| Open MPI (mpimm) | 100 | 44.10 | 10.00 % | 0.00 % | 5.00 % | 0.20 % | 3 |"


def test_speedups_on_the_common_clock():
    import pandas as pd
    from coreplane.fullsys.figures import speedups
    rows = [{"distro": "bookworm", "size": 256, "nodes": n, "metric": m, "median": v}
            for n, m, v in [(1, "region_ns", 120e6), (4, "region_ns", 40e6), (1, "kernel_share", 0.005),
                            (4, "kernel_share", 0.11), (2, "region_ns", 70e6), (2, "kernel_share", 0.05)]]
    table = speedups(pd.DataFrame(rows))
    assert [(r["nodes"], round(r["speedup"], 3), r["region_ms"]) for r in table] == [(1, 1.0, 120.0), (2, 1.714, 70.0),
                                                                                        (4, 3.0, 40.0)]
    assert table[2]["kernel_share"] == 0.11


def test_analytic_timing_model():
    from coreplane.fullsys.timing import Timing, estimate, model
    events = {"l1i_accesses": 100, "l1i_misses": 10, "l2i_misses": 2,
              "l1d_accesses": 400, "l1d_misses": 40, "l2d_misses": 8}
    t = Timing(cpi=1.0, l1_latency=4, l2_latency=12, memory_latency=200)
    m = estimate(1000, events, t)
    assert m["cycles"] == 1000 + 50 * 12 + 10 * 200
    assert m["cpi"] == pytest.approx(3.6)
    assert m["data_access_latency"] == pytest.approx((400 * 4 + 40 * 12 + 8 * 200) / 400)
    assert m["l2_miss_rate"] == pytest.approx(10 / 50)
    assert estimate(0, dict.fromkeys(events, 0), t)["l2_miss_rate"] is None
    both = model({"kernel": 1000, "user": 1000}, {e: {"kernel": n, "user": n} for e, n in events.items()},
                 {"l2": {"size": 1 << 20, "assoc": 16, "line": 64}}, t)
    assert both["kernel_share_cycles"] == pytest.approx(0.5)
    assert both["total"]["cycles"] == 2 * m["cycles"]


def test_common_region_on_the_first_start():
    nodes = [{"region_clock_ns": [1_000, 9_000], "lockstep": {"barriers": 90, "wait_ns": 2_500_000_000}},
             {"region_clock_ns": [1_500, 9_400], "lockstep": {"barriers": 89, "wait_ns": 0}}]
    region = common_region(nodes, 100)
    assert region["region_ns"] == 8_400 and region["nodes_ns"] == [[0, 8_000], [500, 8_400]]
    assert region["barriers"] == [90, 89] and region["wait_s"] == [2.5, 0.0]
    # the common-clock sweep's metrics are numbers of such a document
    spec = load_spec(REPO / "examples" / "sweeps" / "fullsys-clock.info")
    fields = {name: path for m in spec.metrics if m.source == "json" for name, path in m.fields.items()}
    doc = {"common_clock": region, "wall_s": 30.0,
           "total": {"kernel_share_insns": 0.1, "kernel_parts_share_of_region": {"network stack": 0.05}}}
    assert {name: json_field(doc, path) for name, path in fields.items()} == {
        "region_ns": 8_400, "kernel_share": 0.1, "network_share": 0.05, "node0_barrier_wait_s": 2.5,
        "guest_wall_s": 30.0}
