"""Cell inputs and the cgroup layer without touching the machine: spec checks, hierarchy
detection on captured hosts, the cgroup v2 partition set-up on a fixture tree, masks."""

import shutil
from pathlib import Path

import pytest

from coreplane.cell.cgroups import CpusetV1, CpusetV2, detect
from coreplane.cell.spec import CellSpec, validate
from coreplane.cell.steering import cpus_to_mask, mask_to_cpus
from coreplane.core.errors import CoreplaneError

ONLINE = list(range(8))


def test_valid_spec_is_sorted():
    spec = validate(CellSpec(compute=[3, 2], control=[0]), ONLINE, {})
    assert (spec.compute, spec.control) == ([2, 3], [0])


@pytest.mark.parametrize("compute, control, taken, message", [
    ("9", "0", {}, "--compute-cores 9: core 9 does not exist (online: 0-7)"),
    ("1-2", "2", {}, "--compute-cores and --control-cores overlap on core 2"),
    ("0-7", "0", {}, "--compute-cores and --control-cores overlap on core 0"),
    ("1-7", "8", {}, "--control-cores 8: core 8 does not exist (online: 0-7)"),
    ("1,1", "0", {}, "--compute-cores 1,1: a core is listed twice"),
    ("a", "0", {}, "--compute-cores 'a': not a CPU list such as 1 or 0-3,8"),
    ("2", "0", {"other": ([2], [1])}, "core 2 is a compute core of live cell 'other'"),
    ("1", "0", {"other": ([2], [1])}, "--compute-cores 1: core 1 is a control core of live cell 'other'"),
])
def test_bad_specs_give_one_line(compute, control, taken, message):
    with pytest.raises(CoreplaneError) as err:
        validate(CellSpec(compute=compute, control=control), ONLINE, taken)
    assert str(err.value) == message


def test_bad_name():
    with pytest.raises(CoreplaneError, match="--name 'a/b'"):
        validate(CellSpec(compute=[1], control=[0], name="a/b"), ONLINE, {})


def test_detect_v1_hybrid_and_v2(hosts):
    v1 = detect(hosts / "kvm-epyc-v1-hybrid")
    assert isinstance(v1, CpusetV1) and v1.root == hosts / "kvm-epyc-v1-hybrid/sys/fs/cgroup/cpuset"
    v2 = detect(hosts / "baremetal-v2-isolated")
    assert isinstance(v2, CpusetV2) and v2.root == hosts / "baremetal-v2-isolated/sys/fs/cgroup"


def test_detect_v2_without_cpuset(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(
        "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n")
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cgroup.controllers").write_text("cpu io memory pids\n")
    with pytest.raises(CoreplaneError) as err:
        detect(tmp_path)
    assert str(err.value) == ("cannot make a cell: cgroup2 at /sys/fs/cgroup lacks the cpuset controller "
                              "and no cgroup v1 hierarchy has it")


def _v2_tree(tmp_path: Path, hosts: Path) -> CpusetV2:
    root = tmp_path / "host"
    shutil.copytree(hosts / "baremetal-v2-isolated", root)
    cg = root / "sys/fs/cgroup"
    (cg / "coreplane").mkdir()
    for d in (cg, cg / "coreplane"):  # the kernel makes these files on mkdir; here the test does
        (d / "cgroup.subtree_control").write_text("")
    (cg / "cpuset.cpus.effective").write_text("0-7\n")
    return detect(root)


def test_v2_without_partition_support_keeps_a_plain_cell(tmp_path, hosts):
    cpuset = _v2_tree(tmp_path, hosts)
    info = cpuset.create_cell("a", [2, 3], [0], ONLINE, [])
    cell = cpuset.root / "coreplane/cell-a"
    assert info["partition"] == "unsupported by this kernel"
    assert (cell / "cpuset.cpus").read_text() == "0,2-3"
    assert (cpuset.root / "cgroup.subtree_control").read_text() == "+cpuset"
    assert not (cell / "compute").exists()


def test_v2_partition_is_a_remote_isolated_threaded_child(tmp_path, hosts):
    """The order of writes a v2 kernel with cpuset partitions needs; files stand in for the
    kernel's (which creates them on mkdir), so the written values are what is checked."""
    cpuset = _v2_tree(tmp_path, hosts)
    cell = cpuset.root / "coreplane/cell-a"
    cell.mkdir(parents=True)
    for f in ("cpuset.cpus.partition", "cpuset.cpus.exclusive", "cgroup.subtree_control"):
        (cell / f).write_text("")
    info = cpuset.create_cell("a", [2, 3], [0], ONLINE, [5])
    assert info["partition"] == "isolated"
    assert (cpuset.root / "coreplane/cpuset.cpus.exclusive").read_text() == "2-3,5"
    assert (cell / "cpuset.cpus.exclusive").read_text() == "2-3"
    assert (cell / "compute/cgroup.type").read_text() == "threaded"
    assert (cell / "compute/cpuset.cpus").read_text() == "2-3"
    assert (cell / "cgroup.subtree_control").read_text() == "+cpuset"
    cpuset.place_thread("a", 4242, compute=True)
    assert (cell / "compute/cgroup.threads").read_text() == "4242"


@pytest.mark.parametrize("cpus, mask", [([0, 1], "3"), ([], "0"), ([0, 33], "2,00000001"), ([4], "10")])
def test_cpu_masks_round_trip(cpus, mask):
    assert cpus_to_mask(cpus) == mask
    assert mask_to_cpus(mask) == cpus
