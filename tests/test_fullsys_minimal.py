"""The full-system regression run in `make test` (issue 16, MYINSTALL's step), on the minimal image
(Debian's kernel with busybox, made in seconds from the package registry): the kernel boots under
QEMU/TCG, the osact plugin built against Debian's qemu-plugin.h loads, the matrix multiply's
region of interest is counted kernel and user apart, its result is right, the cache model and
analytic timing model answer as caches must (a smaller L2 misses more), a run restored from the
booted snapshot does the same work without booting, the dataflow-threads multiply runs on a
guest of two vCPUs and across two nodes (remote frames over the network), and two nodes keep a
common clock. A broken plugin, a kernel that no longer boots or a workload that no longer
reaches its region fails here."""

import json
import shutil
import subprocess

import pytest

from conftest import run_cli
from coreplane.core.errors import CoreplaneError
from coreplane.fullsys import guest, image
from coreplane.fullsys.paths import LOCKSTEP_PLUGIN, MINIMAL, PLUGIN, PROGRAMS, TURNS_PLUGIN

SIZE = 48
# A booting guest gets a fraction of a CPU on loaded 2-vCPU machines (20 s idle, 80 s at load 9).
TIMEOUT_S = 900

pytestmark = pytest.mark.skipif(shutil.which(guest.QEMU) is None
                                or not all(p.exists() for p in (PLUGIN, TURNS_PLUGIN, LOCKSTEP_PLUGIN)),
                                reason="QEMU or coreplane's plugins missing: `make test` installs and builds them "
                                       "(make fullsys-setup)")


def run_matmul(*options: str) -> dict:
    proc = run_cli("fullsys", "run", "--image", MINIMAL, "--size", str(SIZE), *options, "--json", timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def minimal_image() -> dict:
    """The minimal image, from the cache or built (and boot-checked) now."""
    return image.ensure(MINIMAL)


@pytest.fixture(scope="module")
def with_cache(minimal_image) -> dict:
    return run_matmul("--cache", "--l2", "1M:16:64")


def native_checksum() -> str:
    out = subprocess.run([str(PROGRAMS / "dmm"), str(SIZE), "0", "1", "-"], capture_output=True, text=True, check=True)
    return out.stdout.split("checksum=")[1].strip()


def test_minimal_image_boots_debian_kernel(minimal_image):
    assert minimal_image["boot_banner"].startswith(guest.BOOT_MARKER)
    assert minimal_image["kernel_package"].startswith("linux-image-")
    assert {"virtio_blk", "ext4", "virtio_net"} <= set(minimal_image["modules"])


def test_region_counted_and_result_right(with_cache):
    assert f"{with_cache['checksum']:.1f}" == native_checksum()
    roi = with_cache["per_node"][0]["roi"]
    # The inner loop alone executes SIZE³ iterations of at least a load, a multiply-add and a
    # store, all in user space; the single node's region makes few system calls.
    assert roi["insns"]["user"] >= 3 * SIZE**3
    assert roi["memory"]["user"] >= 2 * SIZE**3
    assert 0 <= roi["kernel_share_insns"] < 0.5
    assert with_cache["per_node"][0]["run"]["insns"] > 10 * roi["insns"]["user"]  # the boot is outside


def test_cache_and_timing_model(with_cache):
    cache = with_cache["total"]["cache"]
    assert cache["caches"]["l2"] == {"size": 1 << 20, "assoc": 16, "line": 64}
    events, user = cache["events"], cache["user"]
    roi = with_cache["total"]
    # Every load and store of the region (but I/O) went through the L1 data cache.
    accesses = events["l1d_accesses"]["kernel"] + events["l1d_accesses"]["user"]
    assert 0.99 * sum(roi["memory"].values()) <= accesses <= sum(roi["memory"].values())
    # Three 48×48 matrices (55 KiB) fit into the L2: after the first touch of each line it hits.
    assert events["l2d_misses"]["user"] <= 3 * SIZE * SIZE * 8 // 64 + 64
    assert user["cycles"] >= roi["insns"]["user"] * cache["timing"]["cpi"]
    assert cache["timing"]["l1_latency"] <= user["data_access_latency"] <= cache["timing"]["memory_latency"]
    assert cache["total"]["cycles"] == pytest.approx(cache["kernel"]["cycles"] + user["cycles"])


def test_smaller_l2_misses_more(with_cache):
    small = run_matmul("--cache", "--l2", "8K:4:64", "--l1d", "4K:2:64")
    big_l2, small_l2 = with_cache["total"]["cache"]["user"], small["total"]["cache"]["user"]
    # -icount: the same user instruction stream (to 1e-4, timer ticks fall elsewhere)
    assert small["total"]["insns"]["user"] == pytest.approx(with_cache["total"]["insns"]["user"], rel=1e-4)
    assert small_l2["l2_misses"] > 2 * big_l2["l2_misses"]
    assert small_l2["cycles"] > big_l2["cycles"]
    assert small_l2["data_access_latency"] > big_l2["data_access_latency"]


def test_run_from_the_booted_snapshot(with_cache):
    restored = run_matmul("--cache", "--l2", "1M:16:64", "--from-snapshot")
    assert restored["from_snapshot"] and f"{restored['checksum']:.1f}" == native_checksum()
    node, booted = restored["per_node"][0], with_cache["per_node"][0]
    assert node["roi"]["insns"]["user"] == pytest.approx(booted["roi"]["insns"]["user"], rel=1e-4)
    cache, booted_cache = restored["total"]["cache"]["user"], with_cache["total"]["cache"]["user"]
    assert cache["l2_misses"] == pytest.approx(booted_cache["l2_misses"], rel=0.05)
    # no boot: the whole run is the workload and what follows it, not the ~8 G instructions of a boot
    assert node["run"]["insns"] < booted["run"]["insns"] / 3
    console = (restored["out"] + "/node0/console.log")
    assert guest.BOOT_MARKER not in open(console).read()


def test_dataflow_threads_multiply_on_two_vcpus(minimal_image):
    # Two workers on a guest of two vCPUs: without the turns plugin its boot hangs under -icount.
    doc = run_matmul("--dataflow", "--threads", "2")
    assert f"{doc['checksum']:.1f}" == native_checksum()
    node = doc["per_node"][0]
    assert node["roi"]["insns"]["user"] >= 3 * SIZE**3  # the tiles' multiply, beside packing and scheduling
    assert [v["vcpu"] for v in node["vcpus"]] == [0, 1] and all(v["run_insns"] > 0 for v in node["vcpus"])
    # 48×48 in 32×32 tiles: 2 + 2 packs, 2 × 2 tiles, 1 reduce, each a DF-thread run once
    assert "workers=2 tile=32 dfthreads=9 " in open(doc["out"] + "/node0/console.log").read()


def test_dataflow_frames_across_two_nodes(minimal_image):
    # node 1 holds the tile frames of the second row panel: node 0's packs twrite A's panel and both
    # of B's into them over TCP, node 1's scheduler runs the tiles and twrites their products into
    # node 0's reduce frame (7 s from the snapshot, idle)
    doc = run_matmul("--nodes", "2", "--workload", "dfmm", "--from-snapshot", "--common-clock")
    assert doc["workload"] == "dfmm" and f"{doc['checksum']:.1f}" == native_checksum()
    lines = [open(f"{doc['out']}/node{rank}/console.log").read() for rank in (0, 1)]
    assert "rank=0 nodes=2 workers=1 tile=32 dfthreads=7 remote_twrites=2 " in lines[0]
    assert "rank=1 nodes=2 workers=1 tile=32 dfthreads=2 remote_twrites=4 " in lines[1]
    for node in doc["per_node"]:
        assert node["kernel_parts"]["parts"]["network stack"]["insns"] > 0 and node["tcp"]["OutSegs"] > 0
    (begin0, end0), (begin1, end1) = doc["common_clock"]["nodes_ns"]
    assert begin1 >= begin0 - doc["common_clock"]["quantum_ns"] and end1 <= end0 + doc["common_clock"]["quantum_ns"]


def test_two_nodes_on_a_common_clock(minimal_image):
    doc = run_matmul("--nodes", "2", "--from-snapshot", "--common-clock")
    assert f"{doc['checksum']:.1f}" == native_checksum()
    clock = doc["common_clock"]
    (begin0, end0), (begin1, end1) = clock["nodes_ns"]
    # On one clock cause precedes effect, to within a quantum: node 1's region starts with the first
    # byte node 0 sent in its region and ends with the block node 0 receives before its region ends.
    assert begin1 - begin0 >= -clock["quantum_ns"] and end1 - end0 <= clock["quantum_ns"]
    assert clock["region_ns"] == max(end0, end1) > 0
    # The nodes met at every quantum from the restore to their power-off (about a second of virtual time).
    assert min(clock["barriers"]) > 1000


def test_turns_plugin_only_for_several_vcpus_under_icount(minimal_image):
    def plugins(vcpus, icount):
        cmd = guest.command(image.image_dir(MINIMAL), 1024, vcpus, "", None, icount)
        return [cmd[i + 1] for i, word in enumerate(cmd) if word == "-plugin"]
    assert plugins(2, True) == [f"{TURNS_PLUGIN},turn={guest.TURN_INSTRUCTIONS}"]
    assert plugins(1, True) == [] and plugins(2, False) == []


def test_bad_cache_geometry_is_one_line(minimal_image):
    proc = run_cli("fullsys", "run", "--image", MINIMAL, "--size", str(SIZE), "--cache", "--l2", "1000:3:60",
                   timeout=TIMEOUT_S)
    assert proc.returncode != 0
    assert "failed to load: osact: l2=1000:3:60: the line must be a power of two" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_plugin_that_fails_to_load_is_one_line(minimal_image, tmp_path):
    bad = tmp_path / "libosact.so"
    bad.write_text("not a shared object\n")  # dlopen refuses it (a truncated ELF file crashes QEMU: SIGBUS)
    with pytest.raises(CoreplaneError, match=f"plugin {bad} failed to load"):
        guest.boot(image.image_dir(MINIMAL), tmp_path / "console.log", plugin=f"{bad},out={tmp_path}/x.json",
                   timeout_s=120)
