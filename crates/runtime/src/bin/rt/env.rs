//! The runtime's environment entries: COREPLANE_RT (the configuration) and COREPLANE_TASK.
//! The configuration is parsed once at start; the task entry carries the task's place in the
//! clone tree, and whether it runs under a filter the program installed, across an execve. Both
//! are hidden from the program and passed on at its execve.
//! A leaf, because every layer reads the configuration.

use crate::sys;
use coreplane_runtime::config::{self, Config};

/// Name of the entry that carries a task's place across execve (see `placement`).
pub const TASK_NAME: &[u8] = b"COREPLANE_TASK";

/// The configuration, parsed once at start (it borrows the environment string, which stays
/// on the original stack for the life of the process).
static mut CONFIG: Option<Config<'static>> = None;
/// The raw `COREPLANE_RT=...` environment entry, re-added to the environment on execve.
pub static mut CONFIG_ENV: *const u8 = core::ptr::null();
/// The `COREPLANE_TASK=...` entry an execve'd task came with (null for the program's start).
pub static mut TASK_ENV: *const u8 = core::ptr::null();
/// The end of the task entry of an image exec'd by a thread under a filter the program installed
/// itself (`thread::Thread::is_sandboxed`): filters survive execve, and the new image's runtime
/// cannot tell the program's filter from one it started under (a container's) by itself.
const SANDBOXED_MARK: &[u8] = b",sandboxed";
/// The image's environment as the kernel gave it; its pointer array is overwritten when the
/// program's stack is built, so `at_start` reads it only until then (its strings stay).
static mut START_ENVP: *const *const u8 = core::ptr::null();

/// True if the environment entry `entry` is `name=...`.
pub fn is_env(entry: &[u8], name: &[u8]) -> bool {
    entry.len() > name.len() && entry.starts_with(name) && entry[name.len()] == b'='
}

/// The configuration; `read` has succeeded before anything asks.
pub fn config() -> &'static Config<'static> {
    unsafe { (*core::ptr::addr_of!(CONFIG)).as_ref().unwrap_unchecked() }
}

/// Finds the runtime's entries in the NULL-terminated environment `envp` and parses the
/// configuration; exits when it is missing or malformed.
pub unsafe fn read(envp: *const *const u8) {
    START_ENVP = envp;
    let mut e = envp;
    while !(*e).is_null() {
        let entry = sys::cstr(*e);
        if is_env(entry, config::ENV_NAME) {
            CONFIG_ENV = *e;
            CONFIG = config::parse(&entry[config::ENV_NAME.len() + 1..]);
        } else if is_env(entry, TASK_NAME) {
            TASK_ENV = *e;
        }
        e = e.add(1);
    }
    if (*core::ptr::addr_of!(CONFIG)).is_none() {
        sys::die(&[b"COREPLANE_RT is missing or malformed (start programs with coreplane run)"]);
    }
}

/// The task entry's tail for an execve from a thread that `sandboxed` or not (`SANDBOXED_MARK`).
pub fn task_mark(sandboxed: bool) -> &'static [u8] {
    if sandboxed { SANDBOXED_MARK } else { b"" }
}

/// The task entry this image came with, as its place's value ("KEY,CHILDREN", for
/// `placement::from_env`) and whether the thread that exec'd it was sandboxed; None at the
/// program's start.
pub fn task() -> Option<(&'static [u8], bool)> {
    let p = unsafe { TASK_ENV };
    if p.is_null() {
        return None;
    }
    let value = &unsafe { sys::cstr(p) }[TASK_NAME.len() + 1..];
    Some(match value.strip_suffix(SANDBOXED_MARK) {
        Some(place) => (place, true),
        None => (value, false),
    })
}

/// The value of the image's environment entry `name`, for a start-up step (`init::start`) that
/// needs one of the program's own entries: the environment as the kernel gave it, without the
/// read of /proc/self/environ (≈ 20 µs a process) this used to take.
pub fn at_start(name: &[u8]) -> Option<&'static [u8]> {
    let mut e = unsafe { START_ENVP };
    while !e.is_null() && !unsafe { *e }.is_null() {
        let entry = unsafe { sys::cstr(*e) };
        if is_env(entry, name) {
            return Some(&entry[name.len() + 1..]);
        }
        e = unsafe { e.add(1) };
    }
    None
}
