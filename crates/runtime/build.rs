//! coreplane-rt is a libc-free static PIE: it relocates itself and is the program's loader.
fn main() {
    for arg in ["-nostartfiles", "-nostdlib", "-static-pie", "-Wl,--no-dynamic-linker", "-Wl,-z,noexecstack"] {
        println!("cargo:rustc-link-arg-bin=coreplane-rt={arg}");
    }
}
