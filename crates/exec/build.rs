//! Generates the x86-64 syscall name table from the kernel's uapi header.
use std::{env, fs, path::Path};

const HEADER: &str = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";

fn main() {
    println!("cargo:rerun-if-changed={HEADER}");
    let text = fs::read_to_string(HEADER).unwrap_or_else(|e| panic!("{HEADER}: {e} (install linux-libc-dev)"));
    let mut rows = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some("#define"), Some(name), Some(nr)) = (it.next(), it.next(), it.next()) {
            if let (Some(name), Ok(nr)) = (name.strip_prefix("__NR_"), nr.parse::<usize>()) {
                rows.push(format!("    ({nr}, \"{name}\"),\n"));
            }
        }
    }
    assert!(rows.len() > 300, "{HEADER}: too few syscalls");
    let out = Path::new(&env::var("OUT_DIR").unwrap()).join("syscall_table.rs");
    fs::write(out, format!("pub static SYSCALLS: &[(usize, &str)] = &[\n{}];\n", rows.concat())).unwrap();
}
