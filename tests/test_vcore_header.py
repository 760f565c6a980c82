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


WIRE = r"""
#include <coreplane/wire.h>
#include <stdio.h>
int main(void) {
    printf("%s %s\n", CP_ARBITER_SOCKET_ENV, CP_ARBITER_SOCKET_DEFAULT);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    /* The far end answers two requests at once: a reply longer than the buffer, then a short one. */
    const char *replies = "{\"ok\": true, \"cores\": \"0123456789012345678901234567890123456789\"}\n{\"ok\": true}\n";
    if (write(sv[1], replies, strlen(replies)) != (ssize_t)strlen(replies)) return 2;
    char reply[16];
    int first = cp_wire_call(sv[0], "{\"op\": \"status\"}\n", reply, sizeof reply);
    printf("first %d %s %s\n", first, first ? strerror(errno) : "-", reply);
    int second = cp_wire_call(sv[0], "{\"op\": \"status\"}\n", reply, sizeof reply);
    printf("second %d %s", second, reply);
    return 0;
}
"""


def test_the_wire_header_names_the_socket_as_the_abi_and_never_splits_a_reply(tmp_path):
    # Before: cp_wire_connect(NULL) had no default socket (and its own copy of the variable's
    # name), and a reply longer than the buffer was cut and its rest read as the next reply.
    source, exe = tmp_path / "wire.c", tmp_path / "wire"
    source.write_text(WIRE)
    subprocess.run(["cc", "-O0", "-I", str(INCLUDE), "-o", str(exe), str(source)], check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    strings = dict(re.findall(r'pub const (\w+): &str = "([^"]*)";', ABI.read_text()))
    assert lines[0] == f"{strings['ENV_SOCKET']} {strings['DEFAULT_SOCKET']}"
    assert lines[1].startswith("first -1 Message too long {\"ok\": true, ")
    assert lines[2] == 'second 0 {"ok": true}'
