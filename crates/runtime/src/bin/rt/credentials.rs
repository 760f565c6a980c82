//! What a thread's credentials are, to tell a credential call that changed them from one that did not.
//! Delegates keep the credentials they were started with (`delegate::credentials_changed`), so a
//! change retires them (milliseconds); a call that changes nothing (setresuid(-1, -1, -1), a
//! daemon setting the user it already is) leaves them.

use crate::sys::{syscall3, SETFSGID, SETFSUID};

const GETGROUPS: usize = 115;
const GETRESUID: usize = 118;
const GETRESGID: usize = 120;
const CAPGET: usize = 125;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Supplementary groups compared; a thread with more is taken as changed at every call.
const MAX_GROUPS: usize = 64;

/// A thread's user and group ids (real, effective, saved, file system), capability sets and
/// supplementary groups.
#[derive(PartialEq, Eq)]
pub struct Credentials {
    ids: [u32; 8],
    caps: [u32; 6],
    groups: [u32; MAX_GROUPS],
    ngroups: isize,
}

impl Credentials {
    /// The calling thread's; None where one of them cannot be read.
    pub fn now() -> Option<Credentials> {
        let mut c = Credentials { ids: [0; 8], caps: [0; 6], groups: [0; MAX_GROUPS], ngroups: 0 };
        let [ru, eu, su, rg, eg, sg, fu, fg] = &mut c.ids;
        let header = [LINUX_CAPABILITY_VERSION_3, 0];
        unsafe {
            let ok = syscall3(GETRESUID, ru as *mut u32 as usize, eu as *mut u32 as usize, su as *mut u32 as usize) == 0
                && syscall3(GETRESGID, rg as *mut u32 as usize, eg as *mut u32 as usize, sg as *mut u32 as usize) == 0
                && syscall3(CAPGET, header.as_ptr() as usize, c.caps.as_mut_ptr() as usize, 0) == 0;
            // An id of -1 changes nothing; the call returns the current one.
            *fu = syscall3(SETFSUID, u32::MAX as usize, 0, 0) as u32;
            *fg = syscall3(SETFSGID, u32::MAX as usize, 0, 0) as u32;
            c.ngroups = syscall3(GETGROUPS, MAX_GROUPS, c.groups.as_mut_ptr() as usize, 0);
            (ok && c.ngroups >= 0).then_some(c)
        }
    }
}
