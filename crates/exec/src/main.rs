//! coreplane-exec: runs one program under coreplane-rt and outlives it. It turns the options
//! into the runtime's configuration, starts the program, passes signals sent to it on, merges
//! the per-process profile files into one JSON profile, and exits as the program did.

mod abstract_socket;
mod cores;
mod mapping;
mod growth;
mod memory;
mod merge;
mod policy;
mod program;
mod shootdowns;
mod signals;
mod syscalls;
mod tsc;

use clap::Parser;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "coreplane-exec", version, about = "Run a program with every syscall intercepted by coreplane-rt")]
struct Args {
    /// Delegation policy: none | all | mckernel | mos | NAME,NAME,... | @FILE
    #[arg(long, default_value = "none")]
    delegate: String,
    /// Calls kept local whatever the policy says (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    local: Vec<String>,
    /// Artificial delay spent on the control core per direction of a delegated call, in ns
    /// (a round trip costs twice this, as 2·f_c in paper 002).
    #[arg(long, default_value_t = 0)]
    forward_cost: u64,
    /// Cores for the program's threads (default: all allowed but the control cores).
    #[arg(long)]
    compute_cores: Option<String>,
    /// Cores for the delegate threads (default: the lowest allowed core when delegating).
    #[arg(long)]
    control_cores: Option<String>,
    /// Delegate threads started at the first delegated call (the pool grows when all block).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    delegate_threads: u32,
    /// Thread placement by clone-tree key, `KEY:CPULIST|KEY:CPULIST...` (from `coreplane run --map`).
    #[arg(long)]
    placement: Option<String>,
    /// Place the program's tasks as they appear by the run-time greedy on this topology
    /// (mesh:XxY, torus:XxY, tree:A,B,...; core i = the i-th allowed CPU, modulo). Needs
    /// CAP_NET_ADMIN; not with --placement or a delegation policy (delegates are pinned by the runtime).
    #[arg(long, conflicts_with = "placement")]
    online_map: Option<String>,
    /// Profile: time one local call in N on average at rewritten sites, after the first 8 of
    /// each syscall per thread (1: time every call). Counts are always exact.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=coreplane_runtime::config::TIME_EVERY_MAX))]
    time_every: u64,
    /// Fast path through a sled at address 0 instead of relocated sites (the default, page 0
    /// unmapped): a NULL call then enters the runtime, and without protection keys page 0 reads
    /// as sled bytes.
    #[arg(long)]
    null_page_sled: bool,
    /// A syscall site is rewritten for the fast path at its Nth trap (1: at its first). Until
    /// then its calls trap (≈ 2 µs each); a rewrite costs about as much as several traps.
    #[arg(long, default_value_t = coreplane_runtime::config::DEFAULT_REWRITE_AT,
          value_parser = clap::value_parser!(u32).range(1..=coreplane_runtime::config::REWRITE_AT_MAX as i64))]
    rewrite_at: u32,
    /// vDSO calls (clock_gettime, gettimeofday, time, getcpu, clock_getres): `native` leaves them
    /// to the kernel's vDSO, unseen; `intercept` profiles them under their syscall names and lets
    /// the delegation policy delegate them or keep them local (then made through the real vDSO).
    #[arg(long, value_enum, default_value_t = Vdso::Native)]
    vdso: Vdso,
    /// Anonymous private memory: served by the kernel (`linux`) or by the runtime in user space
    /// from a pool of --memory-budget bytes, its pages filled at first touch by the kernel
    /// (`pool`) or by the runtime's userfaultfd handler (`pool-demand`; see
    /// docs/architecture.md, memory service).
    #[arg(long, value_enum, default_value_t = memory::Memory::Linux)]
    memory: memory::Memory,
    /// Size of the memory pool (K, M, G suffixes); an mmap beyond it fails with ENOMEM.
    #[arg(long, default_value = "1G", value_parser = memory::parse_size)]
    memory_budget: u64,
    /// The pool's scrubber: an ordinary task on the control cores (`normal`), or under SCHED_FIFO
    /// priority 1 (`fifo`: ahead of ordinary tasks there, such as a memory-hungry neighbour;
    /// needs CAP_SYS_NICE or RLIMIT_RTPRIO, checked before the program starts).
    #[arg(long, value_enum, default_value_t = memory::ScrubberPriority::Normal)]
    scrubber_priority: memory::ScrubberPriority,
    /// How much the run's pools may grow beyond their budgets altogether (K, M, G), granted by
    /// coreplane-exec as each pool reaches its budget (0: a pool never grows; see growth.rs).
    #[arg(long, default_value = "0", value_parser = growth::parse_allowance)]
    memory_grow: u64,
    /// Profile: count the TLB flushes of the program's own address spaces (the model charges each
    /// once a delegate polls). Enabling the kernel tracepoint costs ≈ 40 ms per run here (the
    /// kernel patches its code), outside the profile's wall time.
    #[arg(long)]
    count_tlb_flushes: bool,
    /// Write the profile (JSON, format coreplane-profile/1) here.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Print the syscall table (number, name) as JSON and exit.
    #[arg(long)]
    list_syscalls: bool,
    /// Check the options and the program, print the resolved configuration as JSON, exit.
    #[arg(long)]
    check: bool,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Vdso {
    Native,
    Intercept,
}


/// Set by `coreplane run` when it hands the run over to this launcher: errors then read as the
/// CLI's own (`coreplane: error: ...`). Taken out of the environment before the program starts.
const PREFIX_VARIABLE: &str = "COREPLANE_ERROR_PREFIX";
/// Set to 1 by `coreplane cell exec` in a cell made with `--mlock`: the runtime then locks the
/// program's memory (mlockall), which no launcher outside the new image can do (locks end at
/// execve). Taken out of the environment before the program starts.
const CELL_MLOCK_VARIABLE: &str = "COREPLANE_CELL_MLOCK";
static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Prints one line, `PREFIX message`, on stderr.
fn error_line(msg: impl std::fmt::Display) {
    eprintln!("{}{msg}", PREFIX.get().map_or("coreplane-exec: ", String::as_str));
}

/// Prints one line, `PREFIX warning: message`, on stderr (the front end's prefix says "error: ",
/// which a warning does not).
fn warning_line(msg: impl std::fmt::Display) {
    let prefix = PREFIX.get().map_or("coreplane-exec: ", String::as_str);
    eprintln!("{}warning: {msg}", prefix.strip_suffix("error: ").unwrap_or(prefix));
}

fn fail(msg: impl std::fmt::Display) -> ! {
    error_line(msg);
    std::process::exit(2);
}

/// The options, or a one-line usage error naming the option (status 2); help and version as clap prints them.
fn parse_args() -> Args {
    Args::try_parse().unwrap_or_else(|e| {
        if !e.use_stderr() {
            e.exit();
        }
        // One line: clap's first, and the values an option takes where clap lists them below it.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        match text.lines().find_map(|l| l.trim().strip_prefix("[possible values: ")) {
            Some(values) => fail(format!("{first} (possible values: {})", values.trim_end_matches(']'))),
            None => fail(first),
        }
    })
}

fn runtime_path() -> PathBuf {
    let me = std::env::current_exe().unwrap_or_else(|e| fail(format!("cannot locate myself: {e}")));
    let rt = me.with_file_name("coreplane-rt");
    if !rt.is_file() {
        fail(format!("{}: runtime not found next to coreplane-exec (build with `make`)", rt.display()));
    }
    rt
}

/// Exits with the program's status, or dies of the program's signal (without a core file).
fn mirror(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        unsafe {
            let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(libc::WEXITSTATUS(status));
}

fn main() {
    if let Some(prefix) = std::env::var_os(PREFIX_VARIABLE) {
        let _ = PREFIX.set(prefix.to_string_lossy().into_owned());
        std::env::remove_var(PREFIX_VARIABLE);
    }
    let args = parse_args();
    if args.list_syscalls {
        let table: Vec<_> = syscalls::SYSCALLS.iter().map(|(nr, n)| serde_json::json!({"nr": nr, "name": n})).collect();
        println!("{}", serde_json::to_string(&table).unwrap());
        return;
    }
    if args.command.is_empty() {
        fail("no program given (usage: coreplane-exec [OPTIONS] -- PROGRAM [ARGS...])");
    }
    let delegated = policy::delegated_set(&args.delegate, &args.local).unwrap_or_else(|e| fail(e));
    let delegating = delegated != coreplane_runtime::sysset::SysSet::EMPTY;
    let pool = args.memory != memory::Memory::Linux;
    let budget = if pool { memory::checked_budget(memory::within_cell(args.memory_budget)).unwrap_or_else(|e| fail(e)) } else { 0 };
    if args.memory == memory::Memory::PoolDemand {
        memory::check_userfaultfd().unwrap_or_else(|e| fail(e));
    }
    if pool && args.scrubber_priority == memory::ScrubberPriority::Fifo {
        memory::check_fifo().unwrap_or_else(|e| fail(e));
    }
    // Options of the memory service without it would be silently ignored.
    if !pool && args.scrubber_priority == memory::ScrubberPriority::Fifo {
        fail("--scrubber-priority fifo: there is no scrubber without --memory pool or pool-demand");
    }
    if !pool && args.memory_grow > 0 {
        fail("--memory-grow: only a pool grows; add --memory pool or pool-demand");
    }
    let layout = cores::layout(args.compute_cores.as_deref(), args.control_cores.as_deref(), delegating || pool)
        .unwrap_or_else(|e| fail(e));
    let placement = args.placement.as_deref().map(|p| cores::check_placement(p).unwrap_or_else(|e| fail(e)));
    let (program, start) = program::find(&args.command[0])
        .and_then(|p| program::check(&p).map(|start| (p, start)))
        .unwrap_or_else(|u| {
            error_line(format!("{}: {}", args.command[0].to_string_lossy(), u.why));
            std::process::exit(u.status)
        });
    if let Some(what) = program::privileges_lost(&program) {
        warning_line(format!("{} is {what}: under coreplane it runs without the privileges its exec would give \
                            (the runtime is exec'd, and loads it)", program.display()));
    }
    // execvp's way with a file of no known format: /bin/sh runs it, given the path it found.
    let (program, command) = match start {
        program::Start::Exec => (program, args.command.clone()),
        program::Start::Shell => {
            let command = [OsString::from(program::SHELL), program.clone().into_os_string()].into_iter()
                .chain(args.command[1..].iter().cloned()).collect();
            (PathBuf::from(program::SHELL), command)
        }
    };
    if let Some(out) = &args.profile {
        merge::check_destination(out).unwrap_or_else(|e| fail(e));
    }
    let rt = runtime_path();
    if args.check {
        let doc = serde_json::json!({
            "program": program.display().to_string(),
            "delegated": (0..coreplane_runtime::sysset::MAX_SYSCALLS).filter(|n| delegated.contains(*n)).map(syscalls::name).collect::<Vec<_>>(),
            "compute_cores": layout.compute_list(),
            "control_cores": layout.control_list(),
            "runtime": rt.display().to_string(),
            "memory": args.memory.name(),
            "memory_budget": budget,
            "scrubber_priority": args.scrubber_priority.name(),
        });
        println!("{doc}");
        return;
    }
    let argv: Vec<CString> = std::iter::once(CString::new("coreplane-rt").unwrap())
        .chain(std::iter::once(CString::new(program.as_os_str().as_bytes()).unwrap()))
        .chain(command.iter().map(|a| CString::new(a.as_bytes()).unwrap_or_else(|_| fail("argument contains NUL"))))
        .collect();
    if args.online_map.is_some() && (delegating || pool) {
        fail("--online-map: not with a delegation policy or --memory pool (the runtime pins its delegates and \
              the pool's scrubber on the control cores)");
    }
    let online = args.online_map.as_deref().map(|s| mapping::subscribe(s).unwrap_or_else(|e| fail(e)));
    // Made after every check that may fail, so that bad input leaves nothing behind.
    let profile_dir = args.profile.as_ref().map(|_| merge::make_dir().unwrap_or_else(|e| fail(e)));

    let mut hex = [0u8; 128];
    delegated.write_hex(&mut hex);
    let mut cfg = format!(
        "d={};fc={};khz={};nd={};te={}",
        std::str::from_utf8(&hex).unwrap(),
        args.forward_cost,
        tsc::khz(),
        args.delegate_threads,
        args.time_every
    );
    if let Some(c) = &layout.compute {
        cfg += &format!(";cmp={c}");
    }
    if let Some(c) = &layout.control {
        cfg += &format!(";ctl={c}");
    }
    if let Some(p) = placement {
        cfg += &format!(";map={p}");
    }
    if args.rewrite_at != coreplane_runtime::config::DEFAULT_REWRITE_AT {
        cfg += &format!(";rwat={}", args.rewrite_at);
    }
    if args.null_page_sled {
        cfg += ";sled=1";
        // Asked for, so given; but the program should not learn of it from a crash.
        if !coreplane_runtime::config::protection_keys() {
            warning_line("--null-page-sled on a CPU without protection keys: page 0 is readable, so a NULL \
                        read returns sled bytes instead of faulting (a JVM's implicit null checks then crash)");
        } else {
            warning_line("--null-page-sled: a call through a NULL pointer enters the sled, and so the \
                        runtime, instead of faulting (NULL reads and writes fault)");
        }
    }
    if args.vdso == Vdso::Intercept {
        cfg += ";vdso=1";
    }
    if pool {
        cfg += &format!(";mem={budget};give={}", memory::give_back_threshold());
    }
    if args.memory == memory::Memory::PoolDemand {
        cfg += ";memd=1";
    }
    if pool && args.scrubber_priority == memory::ScrubberPriority::Fifo {
        cfg += ";scrf=1";
    }
    let growth = (pool && args.memory_grow > 0).then(|| growth::listen().unwrap_or_else(|e| fail(e)));
    if growth.is_some() {
        cfg += &format!(";grow={};gsup={}", args.memory_grow, std::process::id());
    }
    if std::env::var_os(CELL_MLOCK_VARIABLE).is_some_and(|v| v == "1") {
        std::env::remove_var(CELL_MLOCK_VARIABLE);
        cfg += ";lock=1";
    }
    // The program (this launcher's child, not its descendants) notes the signals it gets.
    cfg += &format!(";lpid={}", std::process::id());
    // Last: the profile directory runs to the end of the entry.
    if let Some(d) = &profile_dir {
        cfg += &format!(";prof={}", d.display());
    }

    let rt_c = CString::new(rt.as_os_str().as_bytes()).unwrap();
    std::env::set_var("COREPLANE_RT", &cfg);
    // Opened before the fork, so that the program and every process it starts inherit it.
    let flushes = (args.count_tlb_flushes && args.profile.is_some()).then(shootdowns::open);
    let started = Instant::now();
    signals::install();
    // Made before the fork: the launcher has threads by now, and the child allocates nothing.
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let launcher = std::process::id() as libc::pid_t;
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        fail(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        signals::as_inherited();
        // Killed with the launcher, even when SIGKILL ends it (which it cannot pass on), as the
        // program would be natively; the program's own PR_SET_PDEATHSIG replaces it.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            if libc::getppid() != launcher {
                libc::_exit(128 + libc::SIGKILL);
            }
        }
        unsafe { libc::execv(rt_c.as_ptr(), ptrs.as_ptr()) };
        error_line(format!("{}: {}", rt.display(), std::io::Error::last_os_error()));
        unsafe { libc::_exit(127) };
    }
    if let Some(growth) = growth {
        growth.serve(args.memory_grow);
    }
    if let Some(online) = online {
        online.follow(pid);
    }
    signals::program_started(pid);
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, libc::WUNTRACED, &mut usage) };
        if r == pid && libc::WIFSTOPPED(status) {
            signals::program_stopped(status);
            continue;
        }
        if r == pid {
            signals::program_ended();
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            fail(format!("wait4: {}", std::io::Error::last_os_error()));
        }
    }
    let wall = started.elapsed();
    if let (Some(out), Some(dir)) = (&args.profile, &profile_dir) {
        let run = merge::Run {
            program: program.display().to_string(),
            argv: args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            policy: args.delegate.clone(),
            delegated: (0..coreplane_runtime::sysset::MAX_SYSCALLS).filter(|n| delegated.contains(*n)).map(syscalls::name).collect(),
            forward_cost_ns: args.forward_cost,
            compute: layout.compute_list(),
            control: layout.control_list(),
            delegates: args.delegate_threads,
            time_every: args.time_every,
            vdso_intercepted: args.vdso == Vdso::Intercept,
            memory: args.memory.name(),
            memory_budget: budget,
            scrubber_priority: pool.then(|| args.scrubber_priority.name()),
            wall_ns: wall.as_nanos() as u64,
            user_ns: (usage.ru_utime.tv_sec as u64) * 1_000_000_000 + usage.ru_utime.tv_usec as u64 * 1000,
            sys_ns: (usage.ru_stime.tv_sec as u64) * 1_000_000_000 + usage.ru_stime.tv_usec as u64 * 1000,
            status,
            tlb_shootdowns: flushes.as_ref().map_or_else(|| Err("not counted (coreplane-exec --count-tlb-flushes)".into()), |c| c.total()),
        };
        if let Err(e) = merge::write_profile(dir, &run, out) {
            error_line(format!("profile: {e}"));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
    mirror(status)
}
