//! What the kernel's execve of a file gives the caller beyond running it: the privileges of a
//! set-user-ID or set-group-ID file or of file capabilities, which a program the runtime loads
//! (the runtime is exec'd, not the program) does not get. One rule for the launcher, which warns,
//! and for the runtime's execve, which leaves such a file to the kernel.

/// The privileges the exec of a regular file of `mode`, owned by `owner` and `group`, would give
/// a caller of effective ids `euid` and `egid` (`caps`: whether it has file capabilities, asked
/// only where they would count): set-user-ID of another user, set-group-ID of another group
/// (with group execute, as the kernel asks), or file capabilities for a caller other than root,
/// who has them all. The caller checks no_new_privs, under which the kernel gives none.
pub fn privileges(mode: u32, owner: u32, group: u32, euid: u32, egid: u32, caps: impl FnOnce() -> bool) -> Option<&'static str> {
    const S_ISUID: u32 = 0o4000;
    const S_ISGID: u32 = 0o2000;
    const S_IXGRP: u32 = 0o010;
    if mode & S_ISUID != 0 && owner != euid {
        Some("set-user-ID")
    } else if mode & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP && group != egid {
        Some("set-group-ID")
    } else if euid != 0 && caps() {
        Some("given file capabilities")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_kernel_would_give_counts() {
        let no_caps = || false;
        assert_eq!(privileges(0o4755, 0, 0, 1000, 1000, no_caps), Some("set-user-ID"));
        assert_eq!(privileges(0o4755, 1000, 0, 1000, 1000, no_caps), None); // one's own
        assert_eq!(privileges(0o2755, 0, 5, 1000, 1000, no_caps), Some("set-group-ID"));
        assert_eq!(privileges(0o2745, 0, 5, 1000, 1000, no_caps), None); // mandatory locking, no x
        assert_eq!(privileges(0o755, 0, 0, 1000, 1000, || true), Some("given file capabilities"));
        assert_eq!(privileges(0o755, 0, 0, 0, 0, || panic!("root is not asked")), None);
    }
}
