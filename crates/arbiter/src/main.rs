//! coreplane-arbiter: the daemon that owns the compute cores and arbitrates them between
//! many-core processes over a Unix socket (one JSON object per line, callers known by SO_PEERCRED).

mod arbiter;
mod cpuset;
mod freezer;
mod shm;

use arbiter::{now_ns, Arbiter, Counters};
use clap::Parser;
use coreplane_vcore::wire;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "coreplane-arbiter", about = "Arbitrates compute cores between many-core processes")]
struct Args {
    /// Directory of the socket (arbiter.sock).
    #[arg(long, default_value = "/run/coreplane")]
    state_dir: PathBuf,
    /// Compute cores to arbitrate (default: every CPU but the first).
    #[arg(long)]
    compute_cores: Option<String>,
    /// Name of the arbiter's cpuset group below the cpuset root.
    #[arg(long, default_value = "coreplane-arbiter")]
    cgroup_name: String,
    /// Where the arbiter's group goes: a delegated cgroup v2 directory offering the cpuset
    /// controller (or a v1 cpuset directory). Default: the v1 cpuset hierarchy if mounted, else
    /// the v2 root.
    #[arg(long)]
    cgroup_root: Option<PathBuf>,
    /// Users besides root who may create provisions (uids, comma-separated).
    #[arg(long, value_delimiter = ',')]
    trust_uid: Vec<u32>,
    /// Warning time before a revoked vcore is preempted, µs.
    #[arg(long, default_value_t = 1000)]
    warn_us: u64,
    /// Run the arbiter at this SCHED_FIFO priority (0: ordinary scheduling). By default 10 when
    /// the kernel allows it, else ordinary scheduling with a warning.
    #[arg(long)]
    fifo: Option<i32>,
    /// The gang stop: a many-core process holding no compute core is frozen whole (cgroup
    /// freezer) until a core is granted to it, instead of running on the control cores. The
    /// default for every MCP; one provisioned or registered with "gang_stop": false is exempt.
    #[arg(long)]
    gang_stop: bool,
}

/// The arbiter's SCHED_FIFO priority unless --fifo says otherwise.
const DEFAULT_FIFO: i32 = 10;

struct Conn {
    uid: u32,
    pid: u32,
    buf: Vec<u8>,
    /// The many-core process the peer belongs to, once found, and Arbiter::made then: finding it
    /// reads /proc for each ancestor (tens of µs in a runtime's yield).
    mcp: Option<(u32, u64)>,
}

/// The uid of process `pid` (real uid, from /proc).
pub fn proc_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().next()?.parse().ok())
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

fn die(message: String) -> ! {
    eprintln!("coreplane-arbiter: {message}");
    std::process::exit(1)
}

fn main() {
    let args = Args::parse();
    let online = cpuset::parse_cpus(&std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default())
        .unwrap_or_else(|e| die(e));
    let compute: BTreeSet<i32> = match &args.compute_cores {
        Some(list) => cpuset::parse_cpus(list).unwrap_or_else(|e| die(format!("--compute-cores: {e}"))),
        None => online.iter().skip(1).copied().collect(),
    };
    let control: BTreeSet<i32> = online.difference(&compute).copied().collect();
    if compute.is_empty() || control.is_empty() || !compute.is_subset(&online) {
        die(format!("--compute-cores must be online CPUs leaving at least one control core (online: {})", cpuset::format_cpus(&online)));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_else(|e| die(format!("/proc/self/mountinfo: {e}")));
    let (root, version) = cpuset::find_root(&mountinfo, args.cgroup_root.as_deref()).unwrap_or_else(|e| die(e));
    std::fs::create_dir_all(&args.state_dir).unwrap_or_else(|e| die(format!("{}: {e}", args.state_dir.display())));
    let socket = args.state_dir.join("arbiter.sock");
    let listener = listen(&socket).unwrap_or_else(|e| die(e));
    lock(&args.state_dir.join("arbiter.lock"));
    let cpusets = cpuset::Cpusets::create(root, version, &args.cgroup_name).unwrap_or_else(|e| die(e));
    let freezer = args.gang_stop.then(|| freezer::Freezer::create(&mountinfo, &cpusets, &args.cgroup_name).unwrap_or_else(|e| {
        cpusets.remove_all();
        die(e)
    }));
    let watchdog = start_watchdog(&cpusets, freezer.as_ref(), &socket, listener);
    // The arbiter itself runs on the control cores, off the cores it hands out.
    pin(&control);
    // Deadlines are kept to the µs: no timer slack (50 µs by default) on the arbiter's waits.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
    // A deadline is kept only if the arbiter runs when it comes: at ordinary priority it waits
    // its turn on a loaded control core (ms), at SCHED_FIFO it preempts the load (tens of µs).
    let priority = args.fifo.unwrap_or(DEFAULT_FIFO);
    if priority > 0 {
        let param = libc::sched_param { sched_priority: priority };
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            let e = std::io::Error::last_os_error();
            if args.fifo.is_some() {
                die(format!("--fifo {priority}: {e}"));
            }
            eprintln!("coreplane-arbiter: SCHED_FIFO {priority}: {e}: at ordinary priority, preemptions may come ms late under load");
        }
    }
    let mut arbiter = Arbiter {
        compute, control, cpusets, freezer, default_gang_stop: args.gang_stop, mcps: BTreeMap::new(), owner: HashMap::new(), batches: HashMap::new(),
        next_batch: 0, made: 0, counters: Counters::default(), trusted: args.trust_uid.clone(),
        default_warn_ns: args.warn_us * 1000, exits: vec![], deferred: vec![], attaches: vec![],
    };
    eprintln!("coreplane-arbiter: {} compute cores {}, socket {}, cpusets in {} (cgroup {:?})", arbiter.compute.len(),
        cpuset::format_cpus(&arbiter.compute), socket.display(), arbiter.cpusets.base.display(), arbiter.cpusets.version);
    serve(&mut arbiter, listener);
    if let Some(freezer) = &arbiter.freezer {
        freezer.remove_all();
    }
    arbiter.cpusets.remove_all();
    let _ = std::fs::remove_file(&socket);
    // Tells the watchdog all is clean: it must not touch what a next arbiter may already own.
    unsafe { libc::write(watchdog, b"x".as_ptr() as *const _, 1) };
}

/// Holds the state directory's lock for the arbiter's life and its watchdog's (they share the
/// open file): a new arbiter waits here while a dead one's watchdog is still cleaning up.
fn lock(path: &std::path::Path) {
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path)
        .unwrap_or_else(|e| die(format!("{}: {e}", path.display())));
    let fd = std::os::unix::io::IntoRawFd::into_raw_fd(file);
    if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
        die(format!("{}: flock: {}", path.display(), std::io::Error::last_os_error()));
    }
}

fn pin(cpus: &BTreeSet<i32>) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn listen(path: &std::path::Path) -> Result<i32, String> {
    // A live arbiter answers on the socket; a stale socket file from a dead one is replaced.
    if path.exists() {
        if let Ok(fd) = wire::connect(path.to_str().unwrap_or_default()) {
            unsafe { libc::close(fd) };
            return Err(format!("{}: another arbiter is running", path.display()));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Anyone may connect: what a caller may do is decided by its SO_PEERCRED.
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666));
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(std::os::unix::io::IntoRawFd::into_raw_fd(listener))
}

/// A child that outlives the arbiter by a moment: when the arbiter dies however it dies (its
/// end of the pipe closes), every program is thawed, goes back to the root cpuset and the groups go.
fn start_watchdog(cpusets: &cpuset::Cpusets, freezer: Option<&freezer::Freezer>, socket: &std::path::Path, listener: i32) -> i32 {
    let mut fds = [0i32; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        die(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    match unsafe { libc::fork() } {
        -1 => die(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            unsafe {
                libc::close(fds[1]);
                libc::close(listener);
                libc::setsid();
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                let mut byte = 0u8;
                loop {
                    match libc::read(fds[0], &mut byte as *mut u8 as *mut _, 1) {
                        1 => std::process::exit(0), // the arbiter cleaned up itself
                        0 => break,                 // it died
                        _ => continue,
                    }
                }
            }
            if let Some(freezer) = freezer {
                freezer.remove_all();
            }
            cpusets.remove_all();
            // Only a socket nobody answers on is ours to remove (a new arbiter may own it).
            if wire::connect(socket.to_str().unwrap_or_default()).is_err() {
                let _ = std::fs::remove_file(socket);
            }
            std::process::exit(0);
        }
        _ => unsafe { libc::close(fds[0]) },
    };
    fds[1]
}

fn signal_fd() -> i32 {
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::sigaddset(&mut mask, libc::SIGINT);
        libc::sigaddset(&mut mask, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        libc::signalfd(-1, &mask, libc::SFD_CLOEXEC)
    }
}

fn peer(fd: i32) -> Option<(u32, u32)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut _ as *mut _, &mut len) };
    (rc == 0).then_some((cred.pid as u32, cred.uid))
}

/// Writes a reply line without blocking; a client that does not read its replies is dropped.
fn send(fd: i32, reply: &Value) -> bool {
    let mut line = reply.to_string();
    line.push('\n');
    let n = unsafe { libc::send(fd, line.as_ptr() as *const _, line.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    n == line.len() as isize
}

fn serve(arbiter: &mut Arbiter, listener: i32) {
    let sfd = signal_fd();
    let mut conns: HashMap<i32, Conn> = HashMap::new();
    loop {
        let next = [arbiter.expire(), settle_attaches(arbiter, &mut conns)].into_iter().flatten().min();
        flush_deferred(arbiter, &mut conns);
        let mut pollfds = vec![libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: sfd, events: libc::POLLIN, revents: 0 }];
        pollfds.extend(conns.keys().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }));
        let first_pidfd = pollfds.len();
        let pids: Vec<u32> = arbiter.mcps.keys().copied().collect();
        pollfds.extend(pids.iter().map(|p| libc::pollfd { fd: arbiter.mcps[p].pidfd, events: libc::POLLIN, revents: 0 }));
        let timeout = next.map(|d| {
            let left = d.saturating_sub(now_ns());
            libc::timespec { tv_sec: (left / 1_000_000_000) as i64, tv_nsec: (left % 1_000_000_000) as i64 }
        });
        let tp = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        let n = unsafe { libc::ppoll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, tp, std::ptr::null()) };
        if n <= 0 {
            continue;
        }
        if pollfds[1].revents != 0 {
            return;
        }
        if pollfds[0].revents != 0 {
            accept(listener, &mut conns);
        }
        for p in &pollfds[2..first_pidfd] {
            // A deferred reply that could not be sent may have closed this client already.
            if p.revents != 0 && conns.contains_key(&p.fd) && !read_client(arbiter, &mut conns, p.fd) {
                close(arbiter, &mut conns, p.fd);
            }
        }
        for (i, p) in pollfds[first_pidfd..].iter().enumerate() {
            if p.revents != 0 {
                arbiter.exited(pids[i]);
            }
        }
    }
}

/// Closes a client and forgets its waiting attach (its descriptor number will be reused).
fn close(arbiter: &mut Arbiter, conns: &mut HashMap<i32, Conn>, fd: i32) {
    if conns.remove(&fd).is_some() {
        unsafe { libc::close(fd) };
    }
    arbiter.attaches.retain(|a| a.fd != fd);
}

fn flush_deferred(arbiter: &mut Arbiter, conns: &mut HashMap<i32, Conn>) {
    for (fd, reply) in std::mem::take(&mut arbiter.deferred) {
        if conns.contains_key(&fd) && !send(fd, &reply) {
            close(arbiter, conns, fd);
        }
    }
}

/// Answers the attaches that were waiting for their process to become a many-core process:
/// those whose provision has come (with the pages), those refused, those whose wait is over.
/// Returns the next wait's end.
fn settle_attaches(arbiter: &mut Arbiter, conns: &mut HashMap<i32, Conn>) -> Option<u64> {
    let now = now_ns();
    let mut next = None;
    for waiting in std::mem::take(&mut arbiter.attaches) {
        let fd = waiting.fd;
        let sent = match attach(arbiter, waiting.uid, waiting.pid) {
            Ok(Some(handled)) => deliver(fd, handled),
            Err(e) => send(fd, &json!({"ok": false, "error": e})),
            Ok(None) if waiting.until <= now => send(fd, &json!({"ok": false, "error": format!(
                "pid {} belongs to no many-core process (waited {} ms for its provision)", waiting.pid, waiting.wait_ms)})),
            Ok(None) => {
                next = Some(next.map_or(waiting.until, |n: u64| n.min(waiting.until)));
                arbiter.attaches.push(waiting);
                true
            }
        };
        if !sent {
            close(arbiter, conns, fd);
        }
    }
    next
}

/// The attach reply (the shared pages ride along) once `pid` belongs to a many-core process.
fn attach(arbiter: &Arbiter, uid: u32, pid: u32) -> Result<Option<Handled>, String> {
    Ok(find_mcp(arbiter, uid, pid)?.map(|mcp| {
        let pages = &arbiter.mcps[&mcp].pages;
        Handled::WithFds(json!({"ok": true, "mcp": mcp}), vec![pages.info_fd, pages.data_fd])
    }))
}

fn accept(listener: i32, conns: &mut HashMap<i32, Conn>) {
    loop {
        let fd = unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) };
        if fd < 0 {
            return;
        }
        match peer(fd) {
            Some((pid, uid)) => {
                conns.insert(fd, Conn { uid, pid, buf: vec![], mcp: None });
            }
            None => unsafe {
                libc::close(fd);
            },
        }
    }
}

/// Reads what a client sent and answers each complete line; false when it is to be closed.
fn read_client(arbiter: &mut Arbiter, conns: &mut HashMap<i32, Conn>, fd: i32) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        let n = unsafe { libc::recv(fd, chunk.as_mut_ptr() as *mut _, chunk.len(), libc::MSG_DONTWAIT) };
        if n == 0 {
            return false;
        }
        if n < 0 {
            return std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
        }
        let conn = conns.get_mut(&fd).unwrap();
        conn.buf.extend_from_slice(&chunk[..n as usize]);
        let (uid, pid, mut mcp) = (conn.uid, conn.pid, conn.mcp);
        let mut lines = vec![];
        while let Some(end) = conn.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = conn.buf.drain(..=end).collect();
            lines.push(line);
        }
        for line in lines {
            let handled = handle(arbiter, fd, uid, pid, &mut mcp, &line[..line.len() - 1]);
            if let Some(conn) = conns.get_mut(&fd) {
                conn.mcp = mcp;
            }
            // Replies deferred until this request (a revoker's, answered by this yield) first: the
            // revoker has waited longest, and the first woken gets the control core first.
            flush_deferred(arbiter, conns);
            if !conns.contains_key(&fd) || !deliver(fd, handled) {
                return false;
            }
        }
        let conn = conns.get_mut(&fd).unwrap();
        if conn.buf.len() > wire::MAX_LINE {
            send(fd, &json!({"ok": false, "error": format!("request line longer than {} bytes", wire::MAX_LINE)}));
            return false;
        }
    }
}

enum Handled {
    Reply(Value),
    WithFds(Value, Vec<i32>),
    Later,
}

/// Sends a handled request's reply; false when the client is to be closed.
fn deliver(fd: i32, handled: Handled) -> bool {
    match handled {
        Handled::Reply(r) => send(fd, &r),
        Handled::WithFds(r, fds) => {
            let mut text = r.to_string();
            text.push('\n');
            wire::send_with_fds(fd, text.as_bytes(), &fds).is_ok_and(|n| n == text.len())
        }
        Handled::Later => true,
    }
}

/// The many-core process the caller belongs to (its own, or the nearest ancestor's), None when
/// it belongs to none yet; an error when that process is another user's.
fn find_mcp(arbiter: &Arbiter, uid: u32, pid: u32) -> Result<Option<u32>, String> {
    let mut p = pid;
    for _ in 0..64 {
        if let Some(mcp) = arbiter.mcps.get(&p) {
            if uid != 0 && uid != mcp.uid {
                return Err(format!("pid {pid} (uid {uid}) may not act on many-core process {p} of uid {}", mcp.uid));
            }
            return Ok(Some(p));
        }
        match parent(p) {
            Some(pp) if pp > 1 => p = pp,
            _ => break,
        }
    }
    Ok(None)
}

/// The many-core process the caller belongs to, from `known` (the connection's, kept) while no
/// other was made since and it lives.
fn mcp_of(arbiter: &Arbiter, uid: u32, pid: u32, known: &mut Option<(u32, u64)>) -> Result<u32, String> {
    if let Some((mcp, _)) = known.filter(|&(m, made)| made == arbiter.made && arbiter.mcps.contains_key(&m)) {
        return Ok(mcp);
    }
    let mcp = find_mcp(arbiter, uid, pid)?.ok_or_else(|| format!("pid {pid} belongs to no many-core process"))?;
    *known = Some((mcp, arbiter.made));
    Ok(mcp)
}

fn field_u32(doc: &Value, name: &str) -> Result<Option<u32>, String> {
    match field_u64(doc, name)? {
        Some(n) if n > u32::MAX as u64 => Err(format!("field {name:?}: {n} is out of range")),
        n => Ok(n.map(|n| n as u32)),
    }
}

fn field_u64(doc: &Value, name: &str) -> Result<Option<u64>, String> {
    match doc.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("field {name:?}: expected a non-negative integer, got {v}")),
    }
}

fn field_bool(doc: &Value, name: &str) -> Result<Option<bool>, String> {
    match doc.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or_else(|| format!("field {name:?}: expected true or false, got {v}")),
    }
}

fn handle(arbiter: &mut Arbiter, fd: i32, uid: u32, pid: u32, known: &mut Option<(u32, u64)>, line: &[u8]) -> Handled {
    let reply = (|| -> Result<Handled, String> {
        let doc: Value = serde_json::from_slice(line).map_err(|e| format!("malformed request (not JSON): {e}"))?;
        let op = doc.get("op").and_then(Value::as_str).ok_or("malformed request: no \"op\" string field")?;
        let admin_only = |what: &str| -> Result<(), String> {
            if arbiter.admin(uid) { Ok(()) } else { Err(format!("{what}: uid {uid} is neither root nor trusted")) }
        };
        Ok(match op {
            "status" => Handled::Reply(arbiter.status()),
            "provision" => {
                admin_only("provision")?;
                let target = field_u32(&doc, "pid")?.ok_or("provision: field \"pid\" is required")?;
                let cores = field_u32(&doc, "cores")?.unwrap_or(0);
                let (max, delegates, gang) = (field_u32(&doc, "max")?, field_bool(&doc, "delegates")?, field_bool(&doc, "gang_stop")?);
                Handled::Reply(arbiter.provision(target, cores, max, delegates, gang)?)
            }
            "register" => {
                // Any process may make itself a best-effort many-core process (no provision).
                if let Ok(own) = mcp_of(arbiter, uid, pid, known) {
                    return Err(format!("register: pid {pid} already belongs to many-core process {own}"));
                }
                let (max, delegates, gang) = (field_u32(&doc, "max")?, field_bool(&doc, "delegates")?, field_bool(&doc, "gang_stop")?);
                Handled::Reply(arbiter.provision(pid, 0, max, delegates, gang)?)
            }
            "attach" => {
                // A program started before its provision arrives waits for it up to wait_ms
                // (it would otherwise race whoever provisions it after launching it).
                let wait_ms = field_u32(&doc, "wait_ms")?.unwrap_or(0);
                match attach(arbiter, uid, pid)? {
                    Some(handled) => handled,
                    None if wait_ms == 0 => return Err(format!("pid {pid} belongs to no many-core process")),
                    None => {
                        let until = now_ns() + wait_ms as u64 * 1_000_000;
                        arbiter.attaches.push(arbiter::WaitingAttach { fd, uid, pid, until, wait_ms });
                        Handled::Later
                    }
                }
            }
            "request" => {
                let mcp = mcp_of(arbiter, uid, pid, known)?;
                let n = field_u32(&doc, "n")?.unwrap_or(1);
                Handled::Reply(arbiter.request(mcp, n)?)
            }
            "yield" => {
                let mcp = mcp_of(arbiter, uid, pid, known)?;
                let vcore = field_u32(&doc, "vcore")?.ok_or("yield: field \"vcore\" is required")?;
                let retain = field_bool(&doc, "retain")?.unwrap_or(true);
                let yielder = field_u64(&doc, "woke_ns")?.zip(field_u64(&doc, "sent_ns")?);
                Handled::Reply(arbiter.yield_vcore(mcp, vcore as usize, retain, yielder)?)
            }
            "revoke" => {
                admin_only("revoke")?;
                let target = field_u32(&doc, "pid")?.ok_or("revoke: field \"pid\" is required")?;
                let warn_ns = field_u32(&doc, "warn_us")?.map_or(arbiter.default_warn_ns, |w| w as u64 * 1000);
                let signal = field_u32(&doc, "signal")?.map(|s| s as i32);
                let wait = field_bool(&doc, "wait")?.unwrap_or(false);
                let vcore = field_u32(&doc, "vcore")?.map(|v| v as usize);
                match arbiter.revoke(target, vcore, warn_ns, signal, wait.then_some(fd))? {
                    Value::Null => Handled::Later,
                    r => Handled::Reply(r),
                }
            }
            other => return Err(format!("unknown op {other:?} (status, provision, register, attach, request, yield, revoke)")),
        })
    })();
    reply.unwrap_or_else(|e| Handled::Reply(json!({"ok": false, "error": e})))
}
