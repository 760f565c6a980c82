//! Run-time mapping inside the launcher (`--online-map SPEC`): the kernel's process-events
//! connector reports every fork, thread creation, exec and exit; each of the program's tasks is
//! placed by the run-time greedy (coreplane_netos::online) as it appears and pinned there. What it
//! observes: how each task was made (fork or thread, and by whom), and, at each exec, the pipes
//! and sockets the task holds (/proc/TID/fd, by inode): two tasks holding the same one are
//! partners, and the exec moves the task next to its partner.

use coreplane_netos::online::{Birth, OnlineMapper, Topology};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
const NLMSG_DONE: u16 = 3;
const HEADERS: usize = 16 + 20; // nlmsghdr + cn_msg; the proc_event follows

/// A subscription to process events, made before the program starts so no event is missed.
pub struct Online {
    sock: OwnedFd,
    mapper: OnlineMapper,
    cpus: Vec<usize>,
}

fn os_error(what: &str) -> String {
    format!("--online-map: {what}: {}", std::io::Error::last_os_error())
}

/// Subscribes to the process-events connector (needs CAP_NET_ADMIN) and builds the topology;
/// core i of the topology is the (i mod n)-th CPU the launcher may run on.
pub fn subscribe(spec: &str) -> Result<Online, String> {
    let topo = Topology::parse(spec).map_err(|e| format!("--online-map: {e}"))?;
    let cpus = allowed_cpus()?;
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, NETLINK_CONNECTOR) };
    if fd < 0 {
        return Err(os_error("netlink connector socket"));
    }
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // every process of the machine is reported: a large buffer keeps a fork storm elsewhere
    // from overflowing it (FORCE passes rmem_max; we hold CAP_NET_ADMIN already)
    let size: libc::c_int = 16 << 20;
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size as *const _ as *const libc::c_void,
                         std::mem::size_of_val(&size) as u32)
    };
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    addr.nl_groups = CN_IDX_PROC;
    if unsafe { libc::bind(fd, &addr as *const _ as *const libc::sockaddr, std::mem::size_of_val(&addr) as u32) } < 0 {
        return Err(os_error("bind to the process-events connector"));
    }
    let mut msg = Vec::with_capacity(HEADERS + 4);
    msg.extend_from_slice(&((HEADERS + 4) as u32).to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&std::process::id().to_ne_bytes());
    for v in [CN_IDX_PROC, CN_VAL_PROC, 0, 0] {
        msg.extend_from_slice(&v.to_ne_bytes()); // cb_id.idx, cb_id.val, seq, ack
    }
    msg.extend_from_slice(&4u16.to_ne_bytes()); // len
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    if unsafe { libc::send(fd, msg.as_ptr() as *const libc::c_void, msg.len(), 0) } < 0 {
        return Err(os_error("listen to process events"));
    }
    Ok(Online { sock, mapper: OnlineMapper::new(topo, 1), cpus })
}

fn allowed_cpus() -> Result<Vec<usize>, String> {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } < 0 {
        return Err(os_error("sched_getaffinity"));
    }
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// The pipes and sockets the program's exec'd tasks hold, by inode. A pipe's two ends share one
/// inode, so a writer and its reader meet here; so do tasks sharing one socket (inherited), but
/// not the two ends of a socketpair, which are two inodes. The channels the program got from
/// outside (the launcher's own: its stdin, stdout, stderr) make no partners.
struct Channels {
    outside: HashSet<u64>,
    holders: HashMap<u64, Vec<i32>>,
    held: HashMap<i32, Vec<u64>>,
}

impl Channels {
    fn new(outside: Vec<u64>) -> Channels {
        Channels { outside: outside.into_iter().collect(), holders: HashMap::new(), held: HashMap::new() }
    }

    /// Records the channels `tid` holds now; returns, once per shared channel, the other task holding it.
    fn record(&mut self, tid: i32) -> Vec<i32> {
        self.forget(tid);
        let mut inodes = channel_inodes(tid);
        inodes.retain(|i| !self.outside.contains(i));
        let mut partners = Vec::new();
        for &inode in &inodes {
            let holders = self.holders.entry(inode).or_default();
            partners.extend(holders.iter().copied());
            holders.push(tid);
        }
        self.held.insert(tid, inodes);
        partners
    }

    fn forget(&mut self, tid: i32) {
        for inode in self.held.remove(&tid).unwrap_or_default() {
            if let Some(h) = self.holders.get_mut(&inode) {
                h.retain(|&t| t != tid);
                if h.is_empty() {
                    self.holders.remove(&inode);
                }
            }
        }
    }
}

/// Inodes of the pipes and sockets open in `tid` (links "pipe:[N]" and "socket:[N]" in /proc/TID/fd);
/// empty when the task is gone.
fn channel_inodes(tid: i32) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{tid}/fd")) else { return Vec::new() };
    let mut inodes: Vec<u64> = dir
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?.to_owned();
            let rest = link.strip_prefix("pipe:[").or_else(|| link.strip_prefix("socket:["))?;
            rest.strip_suffix(']')?.parse().ok()
        })
        .collect();
    inodes.sort_unstable();
    inodes.dedup();
    inodes
}

impl Online {
    /// Places `root` (the launcher's child) and then every task descending from it, on a thread
    /// of the launcher, until the launcher exits.
    pub fn follow(mut self, root: i32) {
        std::thread::spawn(move || {
            let mut ours: HashSet<i32> = HashSet::from([root]);
            let mut channels = Channels::new(channel_inodes(std::process::id() as i32));
            let core = self.mapper.spawn(root as u64, None, Birth::Fork);
            self.pin(root, core);
            let mut buf = [0u8; 4096];
            loop {
                let n = unsafe { libc::recv(self.sock.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
                if n < HEADERS as isize + 32 {
                    // ENOBUFS: events were lost (the tasks they named keep the places they have)
                    let lost = std::io::Error::last_os_error().raw_os_error();
                    if n < 0 && !matches!(lost, Some(libc::EINTR) | Some(libc::ENOBUFS)) {
                        return;
                    }
                    continue;
                }
                let word = |at: usize| i32::from_ne_bytes(buf[HEADERS + at..HEADERS + at + 4].try_into().unwrap());
                let what = word(0) as u32;
                let (a, b, c, d) = (word(16), word(20), word(24), word(28));
                match what {
                    PROC_EVENT_FORK if ours.contains(&b) => {
                        // parent (pid a, tgid b) made child (pid c, tgid d): a thread when d == b
                        let birth = if d == b { Birth::Thread } else { Birth::Fork };
                        ours.insert(d);
                        let core = self.mapper.spawn(c as u64, Some(a as u64), birth);
                        self.pin(c, core);
                    }
                    PROC_EVENT_EXEC if ours.contains(&b) => {
                        for partner in channels.record(a) {
                            self.mapper.observe(a as u64, partner as u64, 1);
                        }
                        let core = self.mapper.exec(a as u64);
                        self.pin(a, core);
                    }
                    PROC_EVENT_EXIT if ours.contains(&b) => {
                        self.mapper.exit(a as u64);
                        channels.forget(a);
                        if a == b {
                            ours.remove(&b);
                        }
                    }
                    _ => {}
                }
            }
        });
    }

    fn pin(&self, tid: i32, core: u32) {
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_SET(self.cpus[core as usize % self.cpus.len()], &mut set) };
        // a task that already ended cannot be pinned, and needs not be
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_holding_one_pipe_are_partners() {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::fstat(fds[0], &mut st) }, 0);
        let me = std::process::id() as i32;
        assert!(channel_inodes(me).contains(&st.st_ino), "the pipe is among this process's channels");
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe { libc::pause(); libc::_exit(0) };
        }
        // the child holds the pipe (and every other channel of this process): it is our partner
        let mut channels = Channels::new(Vec::new());
        assert!(channels.record(child).is_empty(), "the first task recorded has no partner yet");
        let partners = channels.record(me);
        assert!(!partners.is_empty() && partners.iter().all(|&p| p == child));
        channels.forget(child);
        assert!(channels.record(me).is_empty(), "a task that ended is nobody's partner");
        // a channel from outside the program (the launcher's) makes no partners
        let mut channels = Channels::new(channel_inodes(me));
        channels.record(child);
        assert!(channels.record(me).is_empty());
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
