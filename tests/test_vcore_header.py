"""The C header's procinfo (coreplane/vcore.h, written by hand for C programs) against the layout's
one owner, crates/vcore/src/abi.rs, which layout.rs's test checks against the Rust structs: a
program built against the header prints its offsets and constants."""

import math
import re
import subprocess

from conftest import REPO

ABI = REPO / "crates" / "vcore" / "src" / "abi.rs"
INCLUDE = REPO / "crates" / "vcore" / "include"

PROGRAM = r"""
#include <coreplane/vcore.h>
#include <stddef.h>
#include <stdio.h>
int main(void) {
    printf("OFFSET_HELD %zu\n", offsetof(struct cp_procinfo, held));
    printf("OFFSET_FREE_CORES %zu\n", offsetof(struct cp_procinfo, free_cores));
    printf("OFFSET_GENERATION %zu\n", offsetof(struct cp_procinfo, generation));
    printf("OFFSET_VCORES %zu\n", offsetof(struct cp_procinfo, vcores));
    printf("VCORE_INFO_SIZE %zu\n", sizeof(struct cp_vcore_info));
    printf("OFFSET_VCORE_STATE %zu\n", offsetof(struct cp_vcore_info, state));
    printf("MAX_VCORES %d\n", CP_MAX_VCORES);
    printf("VCORE_FREE %d\nVCORE_HELD %d\nVCORE_PREEMPT_PENDING %d\n", CP_VCORE_FREE, CP_VCORE_HELD,
           CP_VCORE_PREEMPT_PENDING);
    printf("PROCINFO_FITS %d\n", sizeof(struct cp_procinfo) <= 4096);
    return 0;
}
"""


def abi_constants() -> dict[str, int]:
    """abi.rs's integer constants (`pub const NAME: type = expression;`, evaluated)."""
    found = re.findall(r"pub const (\w+): (?:usize|u32) = ([0-9_ *]+);", ABI.read_text())
    return {name: math.prod(int(factor.replace("_", "")) for factor in value.split("*")) for name, value in found}


def test_the_c_header_matches_the_layouts_owner(tmp_path):
    source, exe = tmp_path / "procinfo.c", tmp_path / "procinfo"
    source.write_text(PROGRAM)
    subprocess.run(["cc", "-O0", "-I", str(INCLUDE), "-o", str(exe), str(source)], check=True)
    printed = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                          check=True).stdout.splitlines())
    printed = {name: int(value) for name, value in printed.items()}
    assert printed.pop("PROCINFO_FITS") == 1
    abi = abi_constants()
    assert printed == {name: abi[name] for name in printed}
