//! vDSO calls made visible (`--vdso intercept`): the program is shown a copy of the vDSO.
//! clock_gettime, gettimeofday, time, getcpu and clock_getres never enter the kernel, so
//! neither Syscall User Dispatch nor the fast path sees them. At load the runtime copies the
//! vDSO image (its ELF headers and symbol tables), points every function symbol of the copy
//! back at the real code except those five, which now name the runtime's functions below, and
//! gives the program the copy in AT_SYSINFO_EHDR. glibc, musl and Go all find the vDSO through
//! that entry and its dynamic symbols, and relocate a symbol as load address + st_value, which
//! wraps, so a symbol of the copy can name any address. A call is then delegated when the
//! delegation policy names its syscall, and otherwise made through the real vDSO; either way it
//! is counted and timed in the profile under its syscall's name.
//! What changes: the [vdso] mapping the link map names is the copy, which holds no code, so an
//! unwinder walking out of a signal handler that interrupted the real vDSO finds no unwind
//! tables for it (the copy's tables describe addresses that run nothing).

use crate::sys::{self, *};
use crate::{dispatch, env, profile, thread};

const GETTIMEOFDAY: usize = 96;
const TIME: usize = 201;
const GETCPU: usize = 309;

const PT_LOAD: u32 = 1;
const SHT_DYNSYM: u32 = 11;
const STT_FUNC: u8 = 2;
const SYM_SIZE: usize = 24;
const SHDR_SIZE: usize = 64;
/// Largest vDSO image copied (today's kernels: 2 pages).
const MAX_IMAGE: usize = 64 << 10;

/// The calls the vDSO answers, by the name its symbols use (with or without `__vdso_`).
const CALLS: [(&[u8], usize); 5] =
    [(b"clock_gettime", CLOCK_GETTIME), (b"gettimeofday", GETTIMEOFDAY), (b"time", TIME), (b"getcpu", GETCPU), (b"clock_getres", CLOCK_GETRES)];

/// The real vDSO's functions, by the order of CALLS (0: the kernel has none).
static mut REAL: [usize; 5] = [0; 5];

type VdsoFn = extern "C" fn(usize, usize, usize) -> isize;

/// One intercepted call: delegated when the policy says so, else made through the real vDSO;
/// recorded once (a vDSO function that falls back to the syscall traps, and that trap already
/// recorded it).
fn call(i: usize, a: [usize; 3]) -> isize {
    let nr = CALLS[i].1;
    let args = [a[0], a[1], a[2], 0, 0, 0];
    let real = unsafe { REAL[i] };
    if real == 0 || env::config().delegated.contains(nr) {
        return dispatch::handle(nr, &args);
    }
    let t = thread::current();
    let before = profile::count_of(t.prof, nr);
    let t0 = sys::rdtsc();
    let f: VdsoFn = unsafe { core::mem::transmute(real) };
    let r = f(a[0], a[1], a[2]);
    let ticks = sys::rdtsc() - t0;
    if profile::count_of(t.prof, nr) == before {
        profile::record(t.prof, nr, r, t0, ticks, None);
    }
    r
}

extern "C" fn clock_gettime(clock: usize, ts: usize) -> isize {
    call(0, [clock, ts, 0])
}
extern "C" fn gettimeofday(tv: usize, tz: usize) -> isize {
    call(1, [tv, tz, 0])
}
extern "C" fn time(t: usize) -> isize {
    call(2, [t, 0, 0])
}
extern "C" fn getcpu(cpu: usize, node: usize, cache: usize) -> isize {
    call(3, [cpu, node, cache])
}
extern "C" fn clock_getres(clock: usize, res: usize) -> isize {
    call(4, [clock, res, 0])
}

/// The runtime's replacement for CALLS[i].
fn replacement(i: usize) -> usize {
    match i {
        0 => clock_gettime as *const () as usize,
        1 => gettimeofday as *const () as usize,
        2 => time as *const () as usize,
        3 => getcpu as *const () as usize,
        _ => clock_getres as *const () as usize,
    }
}

unsafe fn u16_at(p: usize) -> usize {
    (p as *const u16).read_unaligned() as usize
}
unsafe fn u32_at(p: usize) -> u32 {
    (p as *const u32).read_unaligned()
}
unsafe fn u64_at(p: usize) -> usize {
    (p as *const u64).read_unaligned() as usize
}

/// Which of CALLS a dynamic symbol name is.
fn which(name: &[u8]) -> Option<usize> {
    let name = name.strip_prefix(b"__vdso_").unwrap_or(name);
    CALLS.iter().position(|(n, _)| *n == name)
}

/// The address to give the program as AT_SYSINFO_EHDR in place of the vDSO at `real`: a copy
/// whose five calls are the runtime's; `real` itself when the image is not one this code reads.
pub fn intercepted(real: usize) -> usize {
    unsafe { copy(real).unwrap_or(real) }
}

unsafe fn copy(real: usize) -> Option<usize> {
    if real == 0 || u32_at(real) != 0x464c_457f {
        return None;
    }
    // The image's extent and its load bias (the vDSO is linked at 0 today, but need not be).
    let (phoff, phnum) = (u64_at(real + 0x20), u16_at(real + 0x38));
    let (shoff, shnum) = (u64_at(real + 0x28), u16_at(real + 0x3c));
    let mut first_vaddr = None;
    let mut size = shoff + shnum * SHDR_SIZE;
    for k in 0..phnum {
        let ph = real + phoff + k * 56;
        if u32_at(ph) == PT_LOAD {
            let (offset, vaddr, filesz) = (u64_at(ph + 8), u64_at(ph + 16), u64_at(ph + 32));
            first_vaddr.get_or_insert(vaddr.wrapping_sub(offset));
            size = size.max(offset + filesz);
        }
    }
    let bias = real.wrapping_sub(first_vaddr?);
    if size > MAX_IMAGE {
        return None;
    }
    let len = page_up(size);
    let image = sys::map_anon(len)? as usize;
    core::ptr::copy_nonoverlapping(real as *const u8, image as *mut u8, size);
    let copy_bias = image.wrapping_sub(first_vaddr?);
    for k in 0..shnum {
        let sh = image + shoff + k * SHDR_SIZE;
        if u32_at(sh + 4) != SHT_DYNSYM {
            continue;
        }
        let (symoff, symsize) = (u64_at(sh + 24), u64_at(sh + 32));
        let strtab = image + shoff + u32_at(sh + 40) as usize * SHDR_SIZE;
        let stroff = u64_at(strtab + 24);
        for s in (symoff..symoff + symsize).step_by(SYM_SIZE) {
            let sym = image + s;
            if *((sym + 4) as *const u8) & 0xf != STT_FUNC || u16_at(sym + 6) == 0 {
                continue;
            }
            let code = bias.wrapping_add(u64_at(sym + 8));
            let target = match which(sys::cstr((image + stroff + u32_at(sym) as usize) as *const u8)) {
                Some(i) => {
                    REAL[i] = code;
                    replacement(i)
                }
                None => code,
            };
            ((sym + 8) as *mut u64).write_unaligned(target.wrapping_sub(copy_bias) as u64);
        }
    }
    syscall3(MPROTECT, image, len, PROT_READ);
    Some(image)
}
