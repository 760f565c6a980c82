//! What /proc/PID/comm, cmdline, environ and auxv show of a loaded program: the program's, as
//! after a native execve, not the runtime's (`coreplane-rt PATH ARGV...`, its configuration,
//! "exe", and its own entry point and program headers).
//! ps, pgrep -x, pkill -f, killall and pidof find the program by these; setproctitle (postgres,
//! nginx) overwrites argv's strings and expects /proc/PID/cmdline to follow.

use crate::sys::{self, *};

const PR_SET_NAME: usize = 15;
const PR_SET_MM: usize = 35;
const PR_SET_MM_MAP: usize = 14;
/// The kernel keeps 15 bytes of a task's name (TASK_COMM_LEN − 1).
const COMM_LEN: usize = 15;

/// struct prctl_mm_map (linux/prctl.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct MmMap {
    start_code: u64,
    end_code: u64,
    start_data: u64,
    end_data: u64,
    start_brk: u64,
    brk: u64,
    start_stack: u64,
    arg_start: u64,
    arg_end: u64,
    env_start: u64,
    env_end: u64,
    auxv: u64,
    auxv_size: u32,
    exe_fd: u32,
}

impl MmMap {
    /// Nothing set: no auxv, and the executable file left alone (exe_fd -1).
    const UNSET: MmMap = MmMap {
        start_code: 0,
        end_code: 0,
        start_data: 0,
        end_data: 0,
        start_brk: 0,
        brk: 0,
        start_stack: 0,
        arg_start: 0,
        arg_end: 0,
        env_start: 0,
        env_end: 0,
        auxv: 0,
        auxv_size: 0,
        exe_fd: u32::MAX,
    };
}

/// A program's code and data as the kernel's exec records them (mm->start_code and the rest).
pub struct Bounds {
    pub start_code: usize,
    pub end_code: usize,
    pub start_data: usize,
    pub end_data: usize,
}

/// Names the process as execve names it: the last component of the path it was given.
pub fn name(path: &[u8]) {
    let base = path.rsplit(|&c| c == b'/').next().unwrap_or(path);
    let mut comm = [0u8; COMM_LEN + 1];
    let n = base.len().min(COMM_LEN);
    comm[..n].copy_from_slice(&base[..n]);
    unsafe { syscall3(PRCTL, PR_SET_NAME, comm.as_ptr() as usize, 0) };
}

/// Copies the program's argument and environment strings (argv[0..argc], env[0..envc]) back to
/// back into a mapping of their own, as the kernel lays them out, points the vectors at the
/// copies, and makes them the process's argument and environment areas, `auxv` (`aux_words`
/// words, AT_NULL's pair last) its /proc/PID/auxv, and `program`'s code and data its code and data
/// (/proc/PID/stat, VmExe): PR_SET_MM_MAP, which needs no privilege. The stack's start (the
/// runtime's entry stack pointer, `start_stack`) and the break (none moved it yet) stay as the
/// kernel set them; where the kernel refuses these, its own fields from /proc/self/stat are
/// kept (with that read, publish took 27.9 µs a process under perf, 4.6 µs without it). Where it
/// refuses the call (built without CONFIG_CHECKPOINT_RESTORE), /proc keeps showing the runtime's.
pub unsafe fn publish(argv: *mut *const u8, argc: usize, env: *mut *const u8, envc: usize, auxv: *const usize,
                      aux_words: usize, program: &Bounds, start_stack: usize) {
    let total: usize = (0..argc).map(|i| sys::cstr(*argv.add(i)).len() + 1).sum::<usize>()
        + (0..envc).map(|i| sys::cstr(*env.add(i)).len() + 1).sum::<usize>();
    let Some(area) = sys::map_anon(page_up(total.max(1))) else { return };
    let mut at = area as *mut u8;
    let mut copy = |v: *mut *const u8, n: usize| {
        for i in 0..n {
            let s = sys::cstr(*v.add(i));
            core::ptr::copy_nonoverlapping(s.as_ptr(), at, s.len());
            *at.add(s.len()) = 0;
            *v.add(i) = at;
            at = at.add(s.len() + 1);
        }
        at as u64
    };
    let arg_start = area as u64;
    let arg_end = copy(argv, argc);
    let env_end = copy(env, envc);
    let brk = syscall3(BRK, 0, 0, 0) as u64;
    let ours = MmMap {
        start_code: program.start_code as u64,
        end_code: program.end_code as u64,
        start_data: program.start_data as u64,
        end_data: program.end_data as u64,
        start_brk: brk,
        brk,
        start_stack: start_stack as u64,
        ..MmMap::UNSET
    };
    let set = |mut map: MmMap| {
        (map.arg_start, map.arg_end, map.env_start, map.env_end) = (arg_start, arg_end, arg_end, env_end);
        (map.auxv, map.auxv_size) = (auxv as u64, (aux_words * 8) as u32);
        let call = |map: &MmMap| syscall6(PRCTL, PR_SET_MM, PR_SET_MM_MAP, map as *const MmMap as usize, core::mem::size_of::<MmMap>(), 0, 0);
        // A vector longer than the kernel keeps (mm->saved_auxv) is refused: the areas alone, then.
        call(&map) == 0 || {
            (map.auxv, map.auxv_size) = (0, 0);
            call(&map) == 0
        }
    };
    if !set(ours) {
        if let Some(kernels) = current_map() {
            set(kernels);
        }
    }
}

/// The process's memory layout as the kernel has it (/proc/self/stat fields 26–28 and 45–51, and
/// the break), with no change of auxv or exe.
fn current_map() -> Option<MmMap> {
    let mut buf = [0u8; 1024];
    let text = sys::read_once(b"/proc/self/stat\0", &mut buf)?;
    // Fields from 3 on follow the last ')' (the name before it may hold spaces).
    let rest = &text[text.iter().rposition(|&c| c == b')')? + 2..];
    let mut field = [0u64; 52];
    for (i, word) in rest.split(|&c| c == b' ').enumerate().take(field.len() - 3) {
        field[i + 3] = coreplane_runtime::config::parse_u64(word.strip_suffix(b"\n").unwrap_or(word)).unwrap_or(0);
    }
    let brk = unsafe { syscall3(BRK, 0, 0, 0) } as u64;
    Some(MmMap {
        start_code: field[26],
        end_code: field[27],
        start_data: field[45],
        end_data: field[46],
        start_brk: field[47],
        brk,
        start_stack: field[28],
        arg_start: field[48],
        arg_end: field[49],
        env_start: field[50],
        env_end: field[51],
        ..MmMap::UNSET
    })
}
