"""The isolation report's reading of the kernel command line (pure: no cell, no root)."""

import pytest

from coreplane.cell.status import cmdline_cpus

CMDLINE = ("BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro isolcpus=nohz,domain,managed_irq,2-3,6 nohz_full=2-3 "
           "rcu_nocb_poll rcu_nocbs=1-3,5 quiet")


@pytest.mark.parametrize("param,cpus", [
    ("nohz_full", [2, 3]),
    ("rcu_nocbs", [1, 2, 3, 5]),
    ("isolcpus", [2, 3, 6]),        # housekeeping flags before the list are not CPUs
    ("irqaffinity", []),            # absent
    ("rcu_nocb_poll", []),          # a flag without a list
])
def test_cpu_lists_of_kernel_parameters(param, cpus):
    assert cmdline_cpus(CMDLINE, param) == cpus


@pytest.mark.parametrize("value,cpus", [
    ("2-3", [2, 3]),
    ("domain,2-3", [2, 3]),
    ("managed_irq,domain,4,6-7", [4, 6, 7]),
    ("nohz,0", [0]),
])
def test_every_isolcpus_form(value, cpus):
    assert cmdline_cpus(f"isolcpus={value}", "isolcpus") == cpus
