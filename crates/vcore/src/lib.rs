//! The vcore API (C ABI, `coreplane/vcore.h`): a program of a many-core process asks the arbiter
//! for vcores, yields them, and reads its procinfo page and per-vcore notification queues.

pub mod abi;
pub mod layout;
pub mod wire;

use layout::{ProcData, ProcInfo, MAX_VCORES, VCORE_PREEMPT_PENDING};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// The process's one connection to the arbiter and its two mapped pages.
struct Client {
    fd: c_int,
    procinfo: *const ProcInfo,
    procdata: *const ProcData,
}

// SAFETY: the mappings live until cp_vcore_close and are only read through atomics.
unsafe impl Send for Client {}

static CLIENT: Mutex<Option<Client>> = Mutex::new(None);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(message: String) -> c_int {
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(message.replace('\0', " ")).unwrap_or_default());
    -1
}

fn with_client<T>(f: impl FnOnce(&Client) -> Result<T, String>) -> Result<T, String> {
    let guard = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    match guard.as_ref() {
        Some(client) => f(client),
        None => Err("not attached to the arbiter (cp_vcore_open first)".into()),
    }
}

fn procinfo() -> Option<&'static ProcInfo> {
    let guard = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: the page stays mapped until cp_vcore_close; callers must not use it after.
    guard.as_ref().map(|c| unsafe { &*c.procinfo })
}

fn map(fd: c_int, size: usize, prot: c_int) -> Result<*mut libc::c_void, String> {
    // SAFETY: a fresh shared mapping of a memfd the arbiter sealed against shrinking.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    Ok(p)
}

/// How long cp_vcore_open waits for this process's provision by default, ms
/// ($COREPLANE_VCORE_ATTACH_MS overrides it).
const DEFAULT_ATTACH_WAIT_MS: c_int = 5000;

/// Attaches this process to its many-core process at the arbiter (socket from
/// $COREPLANE_ARBITER_SOCKET, else /run/coreplane/arbiter.sock), waiting up to
/// $COREPLANE_VCORE_ATTACH_MS (default 5000) for it to be provisioned. 0 or -1 (see cp_vcore_error).
#[no_mangle]
pub extern "C" fn cp_vcore_open() -> c_int {
    let wait_ms = std::env::var("COREPLANE_VCORE_ATTACH_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_ATTACH_WAIT_MS);
    cp_vcore_open_wait(wait_ms)
}

/// cp_vcore_open waiting up to `wait_ms` (0: not at all) for a provision that has not come yet:
/// a program started by whoever provisions it may run this before the provision arrives.
#[no_mangle]
pub extern "C" fn cp_vcore_open_wait(wait_ms: c_int) -> c_int {
    let path = std::env::var(abi::ENV_SOCKET).unwrap_or_else(|_| abi::DEFAULT_SOCKET.into());
    let result = (|| {
        let fd = wire::connect(&path)?;
        let request = serde_json::json!({"op": "attach", "wait_ms": wait_ms.max(0)});
        let (reply, fds) = wire::call(fd, &request, true).inspect_err(|_| unsafe {
            libc::close(fd);
        })?;
        if fds.len() != 2 {
            unsafe { libc::close(fd) };
            return Err(format!("attach: {}", reply["error"].as_str().unwrap_or("no shared pages received")));
        }
        let procinfo = map(fds[0], layout::PROCINFO_SIZE, libc::PROT_READ)? as *const ProcInfo;
        let procdata = map(fds[1], layout::PROCDATA_SIZE, libc::PROT_READ | libc::PROT_WRITE)? as *const ProcData;
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        Ok(Client { fd, procinfo, procdata })
    })();
    match result {
        Ok(client) => {
            let old = CLIENT.lock().unwrap_or_else(|p| p.into_inner()).replace(client);
            if let Some(old) = old {
                unmap(old);
            }
            0
        }
        Err(e) => fail(e),
    }
}

fn unmap(client: Client) {
    unsafe {
        libc::munmap(client.procinfo as *mut _, layout::PROCINFO_SIZE);
        libc::munmap(client.procdata as *mut _, layout::PROCDATA_SIZE);
        libc::close(client.fd);
    }
}

/// Detaches; the vcores held stay held until yielded or until the process exits.
#[no_mangle]
pub extern "C" fn cp_vcore_close() {
    if let Some(client) = CLIENT.lock().unwrap_or_else(|p| p.into_inner()).take() {
        unmap(client);
    }
}

fn op(doc: serde_json::Value) -> Result<serde_json::Value, String> {
    with_client(|c| {
        let (reply, _) = wire::call(c.fd, &doc, false)?;
        match reply["error"].as_str() {
            Some(e) => Err(e.to_string()),
            None => Ok(reply),
        }
    })
}

/// Asks for `n` more vcores; returns how many were granted at once (those owed from a
/// provision but on loan arrive later as GRANTED notifications), or -1.
#[no_mangle]
pub extern "C" fn cp_vcore_request(n: c_int) -> c_int {
    match op(serde_json::json!({"op": "request", "n": n})) {
        Ok(reply) => reply["granted"].as_array().map_or(0, |g| g.len() as c_int),
        Err(e) => fail(e),
    }
}

/// Gives vcore `vcore` back (the caller stops running on it first). 0 or -1.
#[no_mangle]
pub extern "C" fn cp_vcore_yield(vcore: c_int) -> c_int {
    match op(serde_json::json!({"op": "yield", "vcore": vcore})) {
        Ok(_) => 0,
        Err(e) => fail(e),
    }
}

/// The vcore the calling thread runs on now (by its CPU), or -1 when that CPU is no vcore of ours.
#[no_mangle]
pub extern "C" fn cp_vcore_id() -> c_int {
    let Some(info) = procinfo() else { return -1 };
    let cpu = unsafe { libc::sched_getcpu() };
    (0..MAX_VCORES)
        .find(|&i| info.vcores[i].state.load(Ordering::Acquire) != 0 && info.vcores[i].cpu.load(Ordering::Relaxed) == cpu)
        .map_or(-1, |i| i as c_int)
}

/// The CPU of vcore `vcore`, or -1 when it is not held.
#[no_mangle]
pub extern "C" fn cp_vcore_cpu(vcore: c_int) -> c_int {
    let Some(info) = procinfo() else { return -1 };
    let Some(v) = info.vcores.get(vcore as usize) else { return -1 };
    if v.state.load(Ordering::Acquire) == 0 { -1 } else { v.cpu.load(Ordering::Relaxed) }
}

/// 1 when vcore `vcore` is to be preempted (its deadline, CLOCK_MONOTONIC ns, in *deadline_ns
/// if not null), else 0.
#[no_mangle]
pub extern "C" fn cp_vcore_preempt_pending(vcore: c_int, deadline_ns: *mut u64) -> c_int {
    let Some(info) = procinfo() else { return 0 };
    let Some(v) = info.vcores.get(vcore as usize) else { return 0 };
    if v.state.load(Ordering::Acquire) != VCORE_PREEMPT_PENDING {
        return 0;
    }
    if !deadline_ns.is_null() {
        unsafe { *deadline_ns = v.deadline_ns.load(Ordering::Relaxed) };
    }
    1
}

/// The next notification of vcore `vcore`'s queue: 1 and *kind/*arg filled, or 0 when empty.
#[no_mangle]
pub extern "C" fn cp_vcore_next_event(vcore: c_int, kind: *mut u32, arg: *mut u64) -> c_int {
    let guard = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(client) = guard.as_ref() else { return 0 };
    let Some(queue) = (unsafe { &*client.procdata }).queues.get(vcore as usize) else { return 0 };
    match queue.take() {
        Some((k, _, a)) => {
            unsafe {
                if !kind.is_null() { *kind = k; }
                if !arg.is_null() { *arg = a; }
            }
            1
        }
        None => 0,
    }
}

/// The read-only procinfo page (struct cp_procinfo in vcore.h), or null when not attached.
#[no_mangle]
pub extern "C" fn cp_vcore_procinfo() -> *const ProcInfo {
    procinfo().map_or(std::ptr::null(), |p| p as *const ProcInfo)
}

/// The calling thread's last error, one line.
#[no_mangle]
pub extern "C" fn cp_vcore_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
