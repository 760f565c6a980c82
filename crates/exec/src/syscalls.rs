//! Syscall names and numbers (x86-64), generated from the kernel's uapi header at build time.

include!(concat!(env!("OUT_DIR"), "/syscall_table.rs"));

/// Number of a syscall by name.
pub fn number(name: &str) -> Option<usize> {
    SYSCALLS.iter().find(|(_, n)| *n == name).map(|(nr, _)| *nr)
}

/// Name of a syscall by number ("syscall_N" if the header has none).
pub fn name(nr: usize) -> String {
    SYSCALLS.iter().find(|(n, _)| *n == nr).map_or_else(|| format!("syscall_{nr}"), |(_, s)| s.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_numbers() {
        assert_eq!(super::number("read"), Some(0));
        assert_eq!(super::number("getppid"), Some(110));
        assert_eq!(super::name(231), "exit_group");
        assert_eq!(super::number("no_such_call"), None);
    }
}
