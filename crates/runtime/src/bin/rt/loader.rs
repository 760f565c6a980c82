//! The ELF loader: maps the program and its ELF interpreter, then enters the program.
//! It follows `#!` lines like the kernel, rebuilds argv/envp/auxv for the program and enters it
//! with the runtime armed (`init`).

use crate::sys::{self, *};
use core::arch::global_asm;
use coreplane_runtime::elf::{self, Ehdr, Phdr, PF_R, PF_W, PF_X, PHDR_SIZE, PT_INTERP, PT_LOAD};

const AT_NULL: usize = 0;
const AT_PHDR: usize = 3;
const AT_PHENT: usize = 4;
const AT_PHNUM: usize = 5;
const AT_BASE: usize = 7;
const AT_ENTRY: usize = 9;
const AT_EXECFN: usize = 31;
const AT_SYSINFO_EHDR: usize = 33;
const MAX_PHDRS: usize = 64;
const MAX_SHEBANG_DEPTH: usize = 4;

global_asm!(
    // coreplane_enter(new_sp, words, nwords, entry): copy the new stack vector, clear the
    // registers as the kernel does at exec, and jump to the entry point.
    ".globl coreplane_enter",
    "coreplane_enter:",
    "mov rax, rcx",
    "mov rcx, rdx",
    "mov rsp, rdi",
    "cld",
    "rep movsq",
    "xor ebx, ebx", "xor ecx, ecx", "xor edx, edx", "xor esi, esi", "xor edi, edi", "xor ebp, ebp",
    "xor r8d, r8d", "xor r9d, r9d", "xor r10d, r10d", "xor r11d, r11d",
    "xor r12d, r12d", "xor r13d, r13d", "xor r14d, r14d", "xor r15d, r15d",
    "jmp rax",
);

extern "C" {
    fn coreplane_enter(new_sp: usize, words: *const usize, nwords: usize, entry: usize) -> !;
}

/// A mapped ELF object.
struct Image {
    base: usize,
    entry: usize,
    phdr: usize,
    phnum: usize,
    /// Its code and data as the kernel's exec records them for /proc/PID/stat (`cmdline`).
    bounds: crate::cmdline::Bounds,
}

fn fail(path: &[u8], why: &[u8]) -> ! {
    sys::die(&[path, b": ", why])
}

fn open_read(path: *const u8) -> usize {
    let fd = sys::open(path, O_RDONLY | O_CLOEXEC);
    if fd < 0 {
        fail(unsafe { sys::cstr(path) }, b"cannot open");
    }
    fd as usize
}

fn pread(fd: usize, buf: &mut [u8], off: usize) -> usize {
    let n = unsafe { syscall6(PREAD64, fd, buf.as_mut_ptr() as usize, buf.len(), off, 0, 0) };
    if n < 0 { 0 } else { n as usize }
}

fn prot_of(flags: u32) -> usize {
    (if flags & PF_R != 0 { PROT_READ } else { 0 })
        | (if flags & PF_W != 0 { PROT_WRITE } else { 0 })
        | (if flags & PF_X != 0 { PROT_EXEC } else { 0 })
}

fn mmap(addr: usize, len: usize, prot: usize, flags: usize, fd: usize, off: usize) -> usize {
    let p = unsafe { syscall6(MMAP, addr, len, prot, flags, fd, off) };
    if (-4095..0).contains(&p) {
        sys::die(&[b"mmap failed while loading the program"]);
    }
    p as usize
}

/// Maps every PT_LOAD segment of `fd` (position-independent ones at a kernel-chosen base).
fn map_image(path: *const u8, fd: usize, eh: &Ehdr, phs: &[Phdr]) -> Image {
    let loads = || phs.iter().filter(|p| p.kind == PT_LOAD);
    let lo = loads().map(|p| page_down(p.vaddr as usize)).min().unwrap_or(0);
    let hi = loads().map(|p| page_up((p.vaddr + p.memsz) as usize)).max().unwrap_or(0);
    if hi <= lo {
        fail(unsafe { sys::cstr(path) }, b"no loadable segment");
    }
    let base = if eh.kind == elf::ET_DYN {
        mmap(0, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, usize::MAX, 0) - lo
    } else {
        0
    };
    for p in loads() {
        let prot = prot_of(p.flags);
        let start = base + page_down(p.vaddr as usize);
        let file_end = base + (p.vaddr + p.filesz) as usize;
        let mem_end = base + (p.vaddr + p.memsz) as usize;
        let off = page_down(p.offset as usize);
        if p.filesz > 0 {
            mmap(start, file_end - start, prot | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, off);
            // Like the kernel, zero the rest of the last file page of a writable segment: the
            // bss may start there, and ld.so's early allocator uses the slack after it.
            if prot & PROT_WRITE != 0 {
                unsafe { core::ptr::write_bytes(file_end as *mut u8, 0, page_up(file_end) - file_end) };
            }
            if prot & PROT_WRITE == 0 {
                unsafe { syscall3(MPROTECT, start, page_up(file_end) - start, prot) };
            }
            if prot == PROT_READ | PROT_EXEC {
                crate::textmap::loading(start, page_up(file_end));
            }
        }
        let anon_start = if p.filesz > 0 { page_up(file_end) } else { start };
        if mem_end > anon_start {
            mmap(anon_start, page_up(mem_end) - anon_start, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, usize::MAX, 0);
        }
    }
    let phdr = loads()
        .find(|p| p.offset <= eh.phoff && eh.phoff < p.offset + p.filesz)
        .map(|p| base + (p.vaddr + eh.phoff - p.offset) as usize)
        .unwrap_or(0);
    Image { base, entry: base + eh.entry as usize, phdr, phnum: eh.phnum as usize, bounds: bounds(base, phs) }
}

/// The code and data bounds binfmt_elf gives a program (mm->start_code and the rest): over the
/// PT_LOAD segments, code from the lowest executable one's start to the furthest executable
/// file end, data from the highest segment start to the furthest file end.
fn bounds(base: usize, phs: &[Phdr]) -> crate::cmdline::Bounds {
    let loads = || phs.iter().filter(|p| p.kind == PT_LOAD);
    let code = || loads().filter(|p| p.flags & elf::PF_X != 0);
    crate::cmdline::Bounds {
        start_code: base + code().map(|p| p.vaddr as usize).min().unwrap_or(0),
        end_code: base + code().map(|p| (p.vaddr + p.filesz) as usize).max().unwrap_or(0),
        start_data: base + loads().map(|p| p.vaddr as usize).max().unwrap_or(0),
        end_data: base + loads().map(|p| (p.vaddr + p.filesz) as usize).max().unwrap_or(0),
    }
}

/// Reads the ELF header and program headers of an open file.
fn read_headers(path: *const u8, fd: usize, phs: &mut [Phdr; MAX_PHDRS]) -> (Ehdr, usize) {
    let mut head = [0u8; elf::EHDR_SIZE];
    pread(fd, &mut head, 0);
    let eh = match elf::parse_ehdr(&head) {
        Ok(eh) => eh,
        Err(elf::ElfError::NotX86_64) => fail(unsafe { sys::cstr(path) }, b"not an x86-64 program"),
        Err(_) => fail(unsafe { sys::cstr(path) }, b"not an executable ELF file"),
    };
    let n = (eh.phnum as usize).min(MAX_PHDRS);
    let mut raw = [0u8; MAX_PHDRS * PHDR_SIZE];
    pread(fd, &mut raw[..n * PHDR_SIZE], eh.phoff as usize);
    for (i, ph) in phs.iter_mut().take(n).enumerate() {
        *ph = elf::parse_phdr(&raw[i * PHDR_SIZE..]);
    }
    (eh, n)
}

/// argv under construction: the program's path may be replaced by `#!` interpreters.
struct Argv {
    ptrs: *mut *const u8,
    len: usize,
}

/// Follows `#!` lines: returns the ELF path to load, rewriting argv as the kernel does.
fn resolve_script(mut path: *const u8, argv: &mut Argv) -> *const u8 {
    for _ in 0..MAX_SHEBANG_DEPTH {
        let fd = open_read(path);
        let buf = sys::map_anon(PAGE).unwrap_or_else(|| sys::die(&[b"out of memory"]));
        let line = unsafe { core::slice::from_raw_parts_mut(buf, 256) };
        let n = pread(fd, &mut line[..255], 0);
        unsafe { syscall3(CLOSE, fd, 0, 0) };
        if n < 2 || &line[..2] != b"#!" {
            return path;
        }
        let end = line[..n].iter().position(|&c| c == b'\n').unwrap_or(n);
        let text = &mut line[2..end];
        let is_space = |c: &u8| *c == b' ' || *c == b'\t';
        let start = text.iter().position(|c| !is_space(c)).unwrap_or(text.len());
        let interp_end = start + text[start..].iter().position(is_space).unwrap_or(text.len() - start);
        if interp_end == start {
            fail(unsafe { sys::cstr(path) }, b"empty #! line");
        }
        let arg_start = interp_end + text[interp_end..].iter().position(|c| !is_space(c)).unwrap_or(text.len() - interp_end);
        let mut arg_end = text.len();
        while arg_end > arg_start && is_space(&text[arg_end - 1]) {
            arg_end -= 1;
        }
        let has_arg = arg_end > arg_start;
        let text_ptr = text.as_mut_ptr();
        unsafe {
            *text_ptr.add(interp_end) = 0;
            if has_arg {
                *text_ptr.add(arg_end) = 0;
            }
            // argv: [interp, arg?, path, argv[1..]]
            let extra = if has_arg { 2 } else { 1 };
            core::ptr::copy(argv.ptrs.add(1), argv.ptrs.add(1 + extra), argv.len - 1);
            *argv.ptrs = text_ptr.add(start);
            if has_arg {
                *argv.ptrs.add(1) = text_ptr.add(arg_start);
            }
            *argv.ptrs.add(extra) = path;
            argv.len += extra;
            path = text_ptr.add(start);
        }
    }
    fail(unsafe { sys::cstr(path) }, b"too many levels of #! interpreters")
}

/// Loads the program named by argv[1] and enters it; never returns.
pub unsafe fn load_and_run(sp: *mut usize) -> ! {
    let argc = *sp;
    let kargv = sp.add(1) as *const *const u8;
    let envp = kargv.add(argc + 1);
    let mut n_env = 0;
    while !(*envp.add(n_env)).is_null() {
        n_env += 1;
    }
    let auxv = envp.add(n_env + 1) as *const usize;
    let mut n_aux = 0;
    while *auxv.add(2 * n_aux) != AT_NULL {
        n_aux += 1;
    }

    // Program argv with room for interpreter insertions.
    let prog_argc = argc - 2;
    let argv_buf = sys::map_anon(page_up((prog_argc + 2 * MAX_SHEBANG_DEPTH + 1) * 8)).unwrap_or_else(|| sys::die(&[b"out of memory"])) as *mut *const u8;
    core::ptr::copy_nonoverlapping(kargv.add(2), argv_buf, prog_argc);
    let mut argv = Argv { ptrs: argv_buf, len: prog_argc };
    let given = crate::exe::given_fd(*kargv);
    let exec_path = if given.is_some() { *kargv.add(1) } else { resolve_script(*kargv.add(1), &mut argv) };

    let mut phs = [Phdr::default(); MAX_PHDRS];
    let fd = given.unwrap_or_else(|| open_read(exec_path));
    let (eh, nph) = read_headers(exec_path, fd, &mut phs);
    let prog = map_image(exec_path, fd, &eh, &phs[..nph]);
    crate::exe::remember_exe(fd);
    let mut interp_base = 0;
    let mut entry = prog.entry;
    if let Some(ip) = phs[..nph].iter().find(|p| p.kind == PT_INTERP) {
        let mut name = [0u8; 256];
        let len = (ip.filesz as usize).min(255);
        pread(fd, &mut name[..len], ip.offset as usize);
        name[len] = 0;
        let ifd = open_read(name.as_ptr());
        let mut iphs = [Phdr::default(); MAX_PHDRS];
        let (ieh, inph) = read_headers(name.as_ptr(), ifd, &mut iphs);
        let interp = map_image(name.as_ptr(), ifd, &ieh, &iphs[..inph]);
        syscall3(CLOSE, ifd, 0, 0);
        interp_base = interp.base;
        entry = interp.entry;
    }
    syscall3(CLOSE, fd, 0, 0);
    crate::textmap::loaded();

    // New stack vector: argc, argv, NULL, envp (without COREPLANE_RT), NULL, auxv.
    let words = 1 + argv.len + 1 + n_env + 1 + 2 * (n_aux + 1);
    let vec = sys::map_anon(page_up(words * 8)).unwrap_or_else(|| sys::die(&[b"out of memory"])) as *mut usize;
    let mut w = 0;
    let mut push = |v: usize| {
        *vec.add(w) = v;
        w += 1;
    };
    push(argv.len);
    for i in 0..argv.len {
        push(*argv.ptrs.add(i) as usize);
    }
    push(0);
    let mut kept_env = 0;
    for i in 0..n_env {
        let e = *envp.add(i);
        if e != crate::env::CONFIG_ENV && e != crate::env::TASK_ENV {
            push(e as usize);
            kept_env += 1;
        }
    }
    push(0);
    for i in 0..n_aux {
        let (key, val) = (*auxv.add(2 * i), *auxv.add(2 * i + 1));
        let val = match key {
            AT_PHDR => prog.phdr,
            AT_PHENT => PHDR_SIZE,
            AT_PHNUM => prog.phnum,
            AT_BASE => interp_base,
            AT_ENTRY => prog.entry,
            AT_EXECFN => exec_path as usize,
            AT_SYSINFO_EHDR if crate::env::config().vdso_intercept => crate::vdso::intercepted(val),
            _ => val,
        };
        push(key);
        push(val);
    }
    push(AT_NULL);
    push(0);
    crate::cmdline::name(sys::cstr(*kargv.add(1)));
    let env_at = argv.len + 2;
    let aux_at = env_at + kept_env + 1;
    crate::cmdline::publish(vec.add(1) as *mut *const u8, argv.len, vec.add(env_at) as *mut *const u8, kept_env,
                            vec.add(aux_at), w - aux_at, &prog.bounds, sp as usize);
    let old_end = auxv.add(2 * (n_aux + 1)) as usize;
    let new_sp = (old_end - w * 8) & !15;
    crate::exe::adopt_runtime(*kargv);
    crate::profile::adopt_dir(crate::exe::given_profile_dir(*kargv));
    crate::init::start();
    coreplane_enter(new_sp, vec, w, entry)
}
