//! Thread placement (`coreplane run --map`): each task is pinned to the CPUs its name maps to.
//! Every task is named by its place in the clone tree ("0" the program, "0.N" the N-th thread
//! or process it created, ...), the naming of `coreplane graph`, and pinned when it appears.
//! The name survives execve in the COREPLANE_TASK environment entry, which the program never sees.

use crate::sys::{self, *};

pub const KEY_MAX: usize = 48;

/// A clone-tree key.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Key {
    bytes: [u8; KEY_MAX],
    len: usize,
}

impl Key {
    pub const ROOT: Key = Key { bytes: root_bytes(), len: 1 };

    /// The name as text ("0.2.1").
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

const fn root_bytes() -> [u8; KEY_MAX] {
    let mut b = [0u8; KEY_MAX];
    b[0] = b'0';
    b
}

/// A task's place in the clone tree: its name, and the tasks it has created so far.
#[repr(C)]
pub struct Place {
    pub key: Key,
    pub children: u32,
}

/// The key of the next task `parent` creates (its children are counted from 0).
pub fn child_key(parent: &mut Place) -> Key {
    let mut key = parent.key;
    let mut digits = [0u8; 20];
    let n = sys::fmt_u64(parent.children as u64, &mut digits);
    if key.len + 1 + n.len() <= KEY_MAX {
        key.bytes[key.len] = b'.';
        key.bytes[key.len + 1..key.len + 1 + n.len()].copy_from_slice(n);
        key.len += 1 + n.len();
    }
    parent.children += 1;
    key
}

/// Makes `key` the calling thread's name (`place` is that thread's) and applies its
/// placement, if the mapping has one.
pub fn adopt(place: &mut Place, key: &Key, children: u32) {
    place.key = *key;
    place.children = children;
    if let Some(mask) = crate::env::config().placement_of(key.as_bytes()) {
        unsafe { syscall3(SCHED_SETAFFINITY, 0, core::mem::size_of_val(&mask.0), mask.0.as_ptr() as usize) };
    }
}

/// Parses "KEY,CHILDREN" from the environment entry's value.
pub fn from_env(value: &[u8]) -> (Key, u32) {
    let comma = value.iter().rposition(|&c| c == b',').unwrap_or(value.len());
    let mut key = Key::ROOT;
    if comma > 0 && comma <= KEY_MAX {
        key.bytes[..comma].copy_from_slice(&value[..comma]);
        key.len = comma;
    }
    let children = coreplane_runtime::config::parse_u64(value.get(comma + 1..).unwrap_or(b"")).unwrap_or(0);
    (key, children as u32)
}

/// Writes "COREPLANE_TASK=KEY,CHILDREN" and `tail` (NUL-terminated) for an execve into `buf`.
pub fn env_entry(place: &Place, tail: &[u8], buf: &mut [u8; 96]) {
    let mut digits = [0u8; 20];
    sys::concat(&[crate::env::TASK_NAME, b"=", place.key.as_bytes(), b",", sys::fmt_u64(place.children as u64, &mut digits), tail], buf);
}
