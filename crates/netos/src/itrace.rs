//! Layer 0: a ptrace single-stepper that records every dynamic instruction of a program (all
//! threads and processes) in windows, decodes it with iced-x86, and links it to the instructions
//! whose register or memory results it reads (the paper's dest/src/dep containers, Sec. II-A).
//!
//! Output, next to `--out PREFIX`:
//!   PREFIX.nodes  little-endian records {pc: u64, task: u32, window: u32}, one per instruction
//!   PREFIX.edges  records {src: u32, dst: u32, weight: f32, kind: u32}, kind 1 = register, 2 = memory
//!   PREFIX.static TSV "pc<TAB>length<TAB>intel disassembly" per distinct instruction address
//!   PREFIX.handoffs TSV "from_task<TAB>to_task<TAB>count": 64-byte lines written by one task and
//!                   then accessed by another (cache-line hand-offs)
//!   PREFIX.json   the summary: tasks with their clone-tree keys, counts, cost per step

use iced_x86::{Decoder, DecoderOptions, Formatter, Instruction, InstructionInfoFactory, IntelFormatter, OpAccess, Register};
use serde_json::json;
use std::collections::HashMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

pub struct Options {
    pub out: String,
    pub window: u64,
    pub windows: u32,
    pub start_ms: u64,
    pub period_ms: u64,
    pub argv: Vec<String>,
}

struct Task {
    pid: i32, // thread-group id: the address space
    key: String,
    children: u32,
    regs_last: [u32; 256], // last writer (global instruction index + 1) per full register
    flags_last: u32,
    executed: u64,
}

struct Decoded {
    len: u8,
    reads: Vec<Register>,
    writes: Vec<Register>,
    rflags_read: bool,
    rflags_written: bool,
    instr: Instruction,
}

const KIND_REG: u32 = 1;
const KIND_MEM: u32 = 2;

fn errno_msg(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> usize {
    let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut _, iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as *mut _, iov_len: buf.len() };
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n > 0 {
        return n as usize;
    }
    // the instruction may end at a page boundary: fall back to word-sized peeks
    let mut got = 0;
    while got + 8 <= buf.len() {
        unsafe { *libc::__errno_location() = 0 };
        let word = unsafe { libc::ptrace(libc::PTRACE_PEEKTEXT, pid, (addr + got as u64) as *mut libc::c_void, 0) };
        if word == -1 && unsafe { *libc::__errno_location() } != 0 {
            break;
        }
        buf[got..got + 8].copy_from_slice(&word.to_le_bytes());
        got += 8;
    }
    got
}

fn reg_value(regs: &libc::user_regs_struct, reg: Register) -> Option<u64> {
    use Register::*;
    let full = reg.full_register();
    let v = match full {
        RAX => regs.rax, RBX => regs.rbx, RCX => regs.rcx, RDX => regs.rdx,
        RSI => regs.rsi, RDI => regs.rdi, RBP => regs.rbp, RSP => regs.rsp,
        R8 => regs.r8, R9 => regs.r9, R10 => regs.r10, R11 => regs.r11,
        R12 => regs.r12, R13 => regs.r13, R14 => regs.r14, R15 => regs.r15,
        RIP => regs.rip,
        FS => return Some(regs.fs_base),
        GS => return Some(regs.gs_base),
        ES | CS | SS | DS => return Some(0),
        _ => return Option::None,
    };
    let size = reg.size();
    Some(match size {
        8 => v,
        4 => v & 0xffff_ffff,
        2 => v & 0xffff,
        1 if matches!(reg, AH | BH | CH | DH) => (v >> 8) & 0xff,
        1 => v & 0xff,
        _ => v,
    })
}

fn decode(pid: i32, rip: u64, factory: &mut InstructionInfoFactory) -> Option<Decoded> {
    let mut bytes = [0u8; 16];
    let n = read_mem(pid, rip, &mut bytes);
    if n == 0 {
        return None;
    }
    let mut decoder = Decoder::with_ip(64, &bytes[..n], rip, DecoderOptions::NONE);
    let instr = decoder.decode();
    if instr.is_invalid() {
        return None;
    }
    let info = factory.info(&instr);
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for used in info.used_registers() {
        let reg = used.register().full_register();
        match used.access() {
            OpAccess::Read | OpAccess::CondRead => reads.push(reg),
            OpAccess::Write | OpAccess::CondWrite => writes.push(reg),
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                reads.push(reg);
                writes.push(reg);
            }
            _ => {}
        }
    }
    Some(Decoded {
        len: instr.len() as u8,
        reads,
        writes,
        rflags_read: instr.rflags_read() != 0,
        rflags_written: instr.rflags_modified() != 0,
        instr,
    })
}

struct Recorder {
    nodes: BufWriter<File>,
    edges: BufWriter<File>,
    count: u32,
    edge_count: u64,
    mem_last: HashMap<(i32, u64), u32>,  // (address space, 8-byte word) -> last writer + 1
    line_last: HashMap<(i32, u64), u32>, // (address space, 64-byte line) -> last writing task
    handoffs: HashMap<(u32, u32), u64>,
    factory: InstructionInfoFactory,
    cache: HashMap<(i32, u64), Option<Decoded>>,
}

impl Recorder {
    fn edge(&mut self, deps: &mut Vec<(u32, u32)>, dst: u32) {
        deps.sort_unstable();
        let mut i = 0;
        while i < deps.len() {
            let (src, kind) = deps[i];
            let mut j = i;
            while j < deps.len() && deps[j] == (src, kind) {
                j += 1;
            }
            let mut rec = [0u8; 16];
            rec[0..4].copy_from_slice(&src.to_le_bytes());
            rec[4..8].copy_from_slice(&dst.to_le_bytes());
            rec[8..12].copy_from_slice(&((j - i) as f32).to_le_bytes());
            rec[12..16].copy_from_slice(&kind.to_le_bytes());
            self.edges.write_all(&rec).expect("write edges");
            self.edge_count += 1;
            i = j;
        }
        deps.clear();
    }

    /// Records the instruction `tid` is about to execute; its reads are linked to their writers.
    fn step(&mut self, task_index: u32, task: &mut Task, regs: &libc::user_regs_struct, window: u32, deps: &mut Vec<(u32, u32)>) {
        let key = (task.pid, regs.rip);
        if !self.cache.contains_key(&key) {
            let d = decode(task.pid, regs.rip, &mut self.factory);
            self.cache.insert(key, d);
        }
        let idx = self.count;
        let me = idx + 1;
        let mut rec = [0u8; 16];
        rec[0..8].copy_from_slice(&regs.rip.to_le_bytes());
        rec[8..12].copy_from_slice(&task_index.to_le_bytes());
        rec[12..16].copy_from_slice(&window.to_le_bytes());
        self.nodes.write_all(&rec).expect("write nodes");
        self.count += 1;
        let Some(Some(d)) = self.cache.get(&key) else { return };
        for reg in &d.reads {
            let last = task.regs_last[*reg as usize];
            if last != 0 {
                deps.push((last - 1, KIND_REG));
            }
        }
        if d.rflags_read && task.flags_last != 0 {
            deps.push((task.flags_last - 1, KIND_REG));
        }
        let info = self.factory.info(&d.instr);
        let mut stores: Vec<(u64, u64)> = Vec::new();
        for mem in info.used_memory() {
            let size = mem.memory_size().size().max(1) as u64;
            let Some(addr) = mem.virtual_address(0, |reg, _, _| reg_value(regs, reg)) else { continue };
            let (read, write) = match mem.access() {
                OpAccess::Read | OpAccess::CondRead => (true, false),
                OpAccess::Write | OpAccess::CondWrite => (false, true),
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => (true, true),
                _ => (false, false),
            };
            for line in (addr >> 6)..=((addr + size - 1) >> 6) {
                if let Some(&owner) = self.line_last.get(&(task.pid, line)) {
                    if owner != task_index {
                        *self.handoffs.entry((owner, task_index)).or_insert(0) += 1;
                        if !write {
                            self.line_last.remove(&(task.pid, line));
                        }
                    }
                }
                if write {
                    self.line_last.insert((task.pid, line), task_index);
                }
            }
            if read {
                for word in (addr >> 3)..=((addr + size - 1) >> 3) {
                    if let Some(&w) = self.mem_last.get(&(task.pid, word)) {
                        deps.push((w - 1, KIND_MEM));
                    }
                }
            }
            if write {
                stores.push((addr, size));
            }
        }
        let d = self.cache.get(&key).unwrap().as_ref().unwrap();
        for reg in &d.writes {
            task.regs_last[*reg as usize] = me;
        }
        if d.rflags_written {
            task.flags_last = me;
        }
        for (addr, size) in stores {
            for word in (addr >> 3)..=((addr + size - 1) >> 3) {
                self.mem_last.insert((task.pid, word), me);
            }
        }
        deps.retain(|(src, _)| *src != idx);
        self.edge(deps, idx);
    }
}

fn tgid_of(tid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Tgid:")).and_then(|l| l[5..].trim().parse().ok()))
        .unwrap_or(tid)
}

/// Runs the program under the single-stepper; returns the JSON summary.
pub fn run(opts: &Options) -> Result<serde_json::Value, String> {
    if opts.argv.is_empty() {
        return Err("no program given (usage: coreplane-itrace [options] -- PROGRAM [ARGS...])".into());
    }
    let cargs: Vec<CString> = opts.argv.iter().map(|a| CString::new(a.as_str()).unwrap()).collect();
    let mut argv: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(errno_msg("fork"));
    }
    if child == 0 {
        unsafe {
            libc::raise(libc::SIGSTOP);
            libc::execvp(argv[0], argv.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    unsafe { libc::waitpid(child, &mut status, libc::WUNTRACED) };
    let ptrace_opts = libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_TRACEFORK | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACEEXEC | libc::PTRACE_O_EXITKILL;
    if unsafe { libc::ptrace(libc::PTRACE_SEIZE, child, 0, ptrace_opts as usize) } < 0 {
        return Err(errno_msg("ptrace(PTRACE_SEIZE)"));
    }
    unsafe { libc::kill(child, libc::SIGCONT) };

    let file = |ext: &str| File::create(format!("{}.{ext}", opts.out)).map(BufWriter::new).map_err(|e| format!("{}.{ext}: {e}", opts.out));
    let mut rec = Recorder {
        nodes: file("nodes")?,
        edges: file("edges")?,
        count: 0,
        edge_count: 0,
        mem_last: HashMap::new(),
        line_last: HashMap::new(),
        handoffs: HashMap::new(),
        factory: InstructionInfoFactory::new(),
        cache: HashMap::new(),
    };
    let mut tasks: Vec<Task> = Vec::new();
    let mut index: HashMap<i32, u32> = HashMap::new();
    let new_task = |tasks: &mut Vec<Task>, index: &mut HashMap<i32, u32>, tid: i32, key: String| {
        index.insert(tid, tasks.len() as u32);
        tasks.push(Task { pid: tgid_of(tid), key, children: 0, regs_last: [0; 256], flags_last: 0, executed: 0 });
    };
    new_task(&mut tasks, &mut index, child, "0".into());

    let started = Instant::now();
    let mut exec_seen = false;
    let mut window: u32 = 0;
    let mut in_window = 0u64;
    let mut stepping = false;
    let mut next_window_at = Duration::from_millis(opts.start_ms);
    let mut step_time = Duration::ZERO;
    let mut exit_status: Option<i32> = None;
    let mut deps: Vec<(u32, u32)> = Vec::new();
    let mut live: Vec<i32> = vec![child];
    let mut interrupted = false;
    let mut exec_window_task: Option<i32> = None; // the task whose window opened at its exec stop
    let mut exec_rip = 0u64;

    loop {
        if !stepping && exec_seen && window < opts.windows && started.elapsed() >= next_window_at && !interrupted {
            for &tid in &live {
                unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
            }
            interrupted = true;
        }
        let flags = if stepping || !exec_seen || interrupted { libc::__WALL } else { libc::__WALL | libc::WNOHANG };
        let tid = unsafe { libc::waitpid(-1, &mut status, flags) };
        if tid == 0 {
            std::thread::sleep(Duration::from_micros(500));
            continue;
        }
        if tid < 0 {
            break; // no children left
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            live.retain(|&t| t != tid);
            if tid == child {
                exit_status = Some(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) });
            }
            if live.is_empty() {
                break;
            }
            continue;
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        if !index.contains_key(&tid) {
            // a new task reported its first stop before its parent's clone event
            new_task(&mut tasks, &mut index, tid, format!("?{tid}"));
            live.push(tid);
        }
        let mut inject = 0;
        match event {
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                let mut msg: libc::c_ulong = 0;
                unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, tid, 0, &mut msg as *mut _) };
                let new = msg as i32;
                let parent = index[&tid] as usize;
                let key = format!("{}.{}", tasks[parent].key, tasks[parent].children);
                tasks[parent].children += 1;
                if let Some(&i) = index.get(&new) {
                    tasks[i as usize].key = key;
                    tasks[i as usize].pid = tgid_of(new);
                } else {
                    new_task(&mut tasks, &mut index, new, key);
                    live.push(new);
                }
            }
            libc::PTRACE_EVENT_EXEC => {
                if tid == child && !exec_seen {
                    exec_seen = true;
                    // a first window at exec starts here: a short program would be gone before a
                    // PTRACE_INTERRUPT sent after PTRACE_CONT reached it (seen in CI: no nodes)
                    if opts.start_ms == 0 && opts.windows > 0 {
                        stepping = true;
                        in_window = 0;
                        exec_window_task = Some(tid);
                    }
                }
                let i = index[&tid] as usize;
                tasks[i].pid = tgid_of(tid);
            }
            libc::PTRACE_EVENT_STOP => {}
            _ => {
                if sig != libc::SIGTRAP {
                    inject = sig;
                }
            }
        }
        if interrupted && !stepping {
            // the first stop after PTRACE_INTERRUPT opens a window; the other tasks join as they stop
            stepping = true;
            interrupted = false;
            in_window = 0;
        }
        if stepping && exec_seen && in_window < opts.window {
            let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
            let got = unsafe { libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut _) } == 0;
            // the first step from the exec stop returns through the syscall exit, which reports a
            // step trap at the same address before the instruction has run: record it once
            let repeat = match exec_window_task {
                Some(t) if t == tid && event == 0 => {
                    exec_window_task = None;
                    exec_rip == regs.rip
                }
                Some(t) if t == tid => {
                    exec_rip = regs.rip;
                    false
                }
                _ => false,
            };
            if got && !repeat {
                let t0 = Instant::now();
                let ti = index[&tid];
                rec.step(ti, &mut tasks[ti as usize], &regs, window, &mut deps);
                tasks[ti as usize].executed += 1;
                step_time += t0.elapsed();
                in_window += 1;
            }
            if in_window >= opts.window {
                stepping = false;
                window += 1;
                next_window_at = started.elapsed() + Duration::from_millis(opts.period_ms);
            }
            if stepping {
                unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, tid, 0, inject as usize) };
                continue;
            }
        }
        unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, inject as usize) };
    }
    let total = started.elapsed();
    rec.nodes.flush().map_err(|e| e.to_string())?;
    rec.edges.flush().map_err(|e| e.to_string())?;
    let mut stat = BufWriter::new(File::create(format!("{}.static", opts.out)).map_err(|e| e.to_string())?);
    let mut fmt = IntelFormatter::new();
    let mut text = String::new();
    let mut keys: Vec<_> = rec.cache.iter().filter_map(|(k, v)| v.as_ref().map(|d| (k.1, d))).collect();
    keys.sort_by_key(|k| k.0);
    keys.dedup_by_key(|k| k.0);
    for (pc, d) in keys {
        text.clear();
        fmt.format(&d.instr, &mut text);
        writeln!(stat, "{pc:#x}\t{}\t{text}", d.len).map_err(|e| e.to_string())?;
    }
    stat.flush().map_err(|e| e.to_string())?;
    let mut hand = BufWriter::new(File::create(format!("{}.handoffs", opts.out)).map_err(|e| e.to_string())?);
    for ((a, b), n) in &rec.handoffs {
        writeln!(hand, "{a}\t{b}\t{n}").map_err(|e| e.to_string())?;
    }
    hand.flush().map_err(|e| e.to_string())?;
    let tasks_json: Vec<_> = tasks.iter().enumerate().map(|(i, t)| {
        let tid = index.iter().find(|(_, &v)| v as usize == i).map(|(k, _)| *k).unwrap_or(0);
        json!({"index": i, "tid": tid, "pid": t.pid, "key": t.key, "instructions": t.executed})
    }).collect();
    Ok(json!({
        "method": "ptrace single-step (PTRACE_SEIZE, all threads and children), iced-x86 decoding",
        "instructions": rec.count,
        "edges": rec.edge_count,
        "windows": window,
        "window": opts.window,
        "static_instructions": rec.cache.len(),
        "wall_s": total.as_secs_f64(),
        "record_ns_per_instruction": if rec.count > 0 { step_time.as_nanos() as f64 / rec.count as f64 } else { 0.0 },
        "exit_status": exit_status,
        "tasks": tasks_json,
    }))
}
