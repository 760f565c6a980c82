//! The arbiter's state and its operations: provisions (with admission control), allocations of
//! compute cores to vcores, loans of idle provisioned cores, and revocation with warn-then-preempt.

use crate::cpuset::{format_cpus, Cpusets};
use crate::freezer::Freezer;
use crate::shm::Pages;
use coreplane_vcore::layout::{self, MAX_VCORES, VCORE_FREE, VCORE_HELD, VCORE_PREEMPT_PENDING};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;

/// Tells whoever waits on `info`'s generation (a shared futex: the waiter is another process)
/// that it changed. Every post of a notification comes with one; a change of the free cores too.
fn wake(info: &layout::ProcInfo) {
    info.generation.fetch_add(1, Ordering::Release);
    unsafe { libc::syscall(libc::SYS_futex, info.generation.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0, 0, 0) };
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A revocation under way: the vcore was warned and must be yielded by `deadline`.
pub struct Revoke {
    /// When the warning was posted (CLOCK_MONOTONIC ns).
    pub warned: u64,
    pub deadline: u64,
    /// The process owed this core (its provision), which gets it once it is free.
    pub for_pid: Option<u32>,
    pub batch: Option<u64>,
    /// The yielder's own times, when it sent them with its yield (CLOCK_MONOTONIC ns): it woke
    /// to the warning, it sent the yield. They take a revocation's interval apart (the bench).
    pub yielder: Option<(u64, u64)>,
}

pub struct Vcore {
    pub cpu: i32,
    pub revoke: Option<Revoke>,
}

pub struct Mcp {
    pub uid: u32,
    pub pidfd: i32,
    pub provision: u32,
    pub max: u32,
    pub vcores: Vec<Option<Vcore>>,
    /// CPUs yielded but left in the group's cpuset: granting one again needs no cpuset write.
    pub retained: BTreeSet<i32>,
    /// Cores of its provision it asked for that are being taken back from borrowers.
    pub owed: u32,
    /// It runs under coreplane's runtime, whose delegates need the control cores (the runtime
    /// itself keeps the program's threads on compute cores): its cpuset keeps them.
    pub delegates: bool,
    /// Under the gang stop: frozen whole while it holds no core.
    pub gang_stop: bool,
    /// When it was frozen (CLOCK_MONOTONIC ns): frozen ones get free cores in this order.
    pub stopped_since: Option<u64>,
    pub pages: Pages,
}

impl Mcp {
    pub fn held(&self) -> u32 {
        self.vcores.iter().flatten().count() as u32
    }
}

/// A revoke request that waits for all its vcores to be given back before it replies.
pub struct Batch {
    pub client: i32,
    pub started: u64,
    pub remaining: u32,
    pub outcomes: Vec<Value>,
}

#[derive(Default)]
pub struct Counters {
    pub grants_warm: u64,
    pub grants_cold: u64,
    pub yields: u64,
    pub warned: u64,
    pub yielded_in_time: u64,
    pub preempted: u64,
    pub dropped_notifications: u64,
    pub refused_provisions: u64,
    pub exits: u64,
    pub gang_stops: u64,
    pub gang_resumes: u64,
}

pub struct Arbiter {
    pub compute: BTreeSet<i32>,
    pub control: BTreeSet<i32>,
    pub cpusets: Cpusets,
    /// With --gang-stop: how many-core processes holding no core are frozen.
    pub freezer: Option<Freezer>,
    /// Whether a many-core process that does not say is under the gang stop.
    pub default_gang_stop: bool,
    pub mcps: BTreeMap<u32, Mcp>,
    /// Which (pid, vcore) holds each compute CPU.
    pub owner: HashMap<i32, (u32, usize)>,
    pub batches: HashMap<u64, Batch>,
    pub next_batch: u64,
    /// Many-core processes made so far: a connection's MCP, once found, is kept while no other
    /// was made since (a nearer ancestor, or a reused pid, may be one now).
    pub made: u64,
    pub counters: Counters,
    pub trusted: Vec<u32>,
    pub default_warn_ns: u64,
    /// (pid, CLOCK_MONOTONIC ns) of the last many-core processes whose exit was reclaimed.
    pub exits: Vec<(u32, u64)>,
    /// Replies to send once revocations finish: (client fd, reply).
    pub deferred: Vec<(i32, Value)>,
    /// Attaches of processes not (yet) in a many-core process, waiting for their provision.
    pub attaches: Vec<WaitingAttach>,
}

/// A client's attach held until its process is provisioned (or `until`, CLOCK_MONOTONIC ns).
pub struct WaitingAttach {
    pub fd: i32,
    pub uid: u32,
    pub pid: u32,
    pub until: u64,
    pub wait_ms: u32,
}

pub type Reply = Result<Value, String>;

impl Arbiter {
    pub fn admin(&self, uid: u32) -> bool {
        uid == 0 || self.trusted.contains(&uid)
    }

    fn provisioned(&self) -> u32 {
        self.mcps.values().map(|m| m.provision).sum()
    }

    /// Compute CPUs nobody holds (a retained one still counts: it is idle).
    fn free(&self) -> Vec<i32> {
        self.compute.iter().copied().filter(|c| !self.owner.contains_key(c)).collect()
    }

    /// The cores an MCP's threads may run on: what it holds (and retains), without the control
    /// cores, so a program's own threads cannot escape there; the control cores while it holds
    /// none (a cpuset cannot be empty, and the program must stay runnable), and always for an
    /// MCP under coreplane's runtime, whose delegates run there.
    fn cpuset_of(&self, mcp: &Mcp) -> BTreeSet<i32> {
        let mut cpus: BTreeSet<i32> = mcp.vcores.iter().flatten().map(|v| v.cpu).collect();
        cpus.extend(&mcp.retained);
        if cpus.is_empty() || mcp.delegates {
            cpus.extend(&self.control);
        }
        cpus
    }

    fn write_cpuset(&self, pid: u32) -> Result<(), String> {
        let mcp = &self.mcps[&pid];
        self.cpusets.set(pid, &self.cpuset_of(mcp))
    }

    fn refresh_procinfo(&self) {
        let free = self.free().len() as u32;
        for mcp in self.mcps.values() {
            let info = mcp.pages.info();
            let free_changed = info.free_cores.swap(free, Ordering::Relaxed) != free;
            let held_changed = info.held.swap(mcp.held(), Ordering::Relaxed) != mcp.held();
            info.provisioned.store(mcp.provision, Ordering::Relaxed);
            info.max_vcores.store(mcp.max, Ordering::Relaxed);
            if free_changed || held_changed {
                wake(info);
            }
        }
    }

    fn post(&mut self, pid: u32, vcore: usize, kind: u32, arg: u64) {
        let Some(mcp) = self.mcps.get(&pid) else { return };
        if !mcp.pages.data().queues[vcore].post(kind, vcore as u32, arg) {
            mcp.pages.info().dropped.fetch_add(1, Ordering::Relaxed);
            self.counters.dropped_notifications += 1;
        }
        wake(mcp.pages.info());
    }

    /// Makes `pid` a many-core process with `provision` guaranteed cores (admission control).
    /// `delegates`: it runs under coreplane's runtime (see Mcp::delegates); None keeps what it was.
    /// `gang_stop`: frozen while it holds no core (None: the arbiter's default; set at creation).
    pub fn provision(&mut self, pid: u32, cores: u32, max: Option<u32>, delegates: Option<bool>, gang_stop: Option<bool>) -> Reply {
        let total = self.compute.len() as u32;
        let others = self.provisioned() - self.mcps.get(&pid).map_or(0, |m| m.provision);
        if others + cores > total {
            self.counters.refused_provisions += 1;
            return Err(format!(
                "provision of {cores} cores for pid {pid} refused: {others} of the {total} compute cores are already provisioned"
            ));
        }
        let max = max.unwrap_or(total).min(total).min(MAX_VCORES as u32);
        if gang_stop == Some(true) && self.freezer.is_none() {
            return Err(format!("gang stop for pid {pid} refused: the arbiter runs without --gang-stop"));
        }
        if let Some(mcp) = self.mcps.get_mut(&pid) {
            if gang_stop.is_some_and(|g| g != mcp.gang_stop) {
                return Err(format!("pid {pid}: the gang stop is chosen when a many-core process is made, not changed"));
            }
            mcp.provision = cores;
            mcp.max = max;
            if delegates.is_some_and(|d| d != mcp.delegates) {
                mcp.delegates = !mcp.delegates;
                self.write_cpuset(pid)?;
            }
        } else {
            let gang_stop = self.freezer.is_some() && gang_stop.unwrap_or(self.default_gang_stop);
            self.create(pid, cores, max, delegates.unwrap_or(false), gang_stop)?;
        }
        self.settle_gang();
        self.refresh_procinfo();
        let mcp = &self.mcps[&pid];
        Ok(json!({"ok": true, "pid": pid, "provision": cores, "max": max, "delegates": mcp.delegates, "gang_stop": mcp.gang_stop}))
    }

    fn create(&mut self, pid: u32, provision: u32, max: u32, delegates: bool, gang_stop: bool) -> Result<(), String> {
        let uid = crate::proc_uid(pid).ok_or_else(|| format!("pid {pid}: no such process"))?;
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        if pidfd < 0 {
            return Err(format!("pid {pid}: pidfd_open: {}", std::io::Error::last_os_error()));
        }
        let pages = Pages::new()?;
        let info = pages.info();
        info.magic.store(layout::MAGIC, Ordering::Relaxed);
        info.pid.store(pid, Ordering::Relaxed);
        info.compute_cores.store(self.compute.len() as u32, Ordering::Relaxed);
        for v in &info.vcores {
            v.cpu.store(-1, Ordering::Relaxed);
        }
        let freezer = self.freezer.as_ref().filter(|_| gang_stop);
        if let Err(e) = self.cpusets.adopt(pid, &self.control).and_then(|_| freezer.map_or(Ok(()), |f| f.adopt(pid, &self.cpusets))) {
            unsafe { libc::close(pidfd) };
            if let Some(f) = freezer {
                f.release(pid, &self.cpusets);
            }
            self.cpusets.release(&self.cpusets.group(pid));
            return Err(e);
        }
        let vcores = (0..max).map(|_| None).collect();
        self.made += 1;
        self.mcps.insert(pid, Mcp { uid, pidfd, provision, max, vcores, retained: BTreeSet::new(), owed: 0, delegates,
                                    gang_stop, stopped_since: None, pages });
        Ok(())
    }

    /// Gives `cpu` to `pid` as its lowest free vcore; false when it has no vcore slot left.
    fn grant(&mut self, pid: u32, cpu: i32) -> Result<Option<usize>, String> {
        let Some(mcp) = self.mcps.get_mut(&pid) else { return Ok(None) };
        let Some(slot) = mcp.vcores.iter().position(|v| v.is_none()) else { return Ok(None) };
        let warm = mcp.retained.remove(&cpu);
        mcp.vcores[slot] = Some(Vcore { cpu, revoke: None });
        self.owner.insert(cpu, (pid, slot));
        // A CPU another process retained leaves its cpuset first, so only one holds it.
        let retainers: Vec<u32> = self.mcps.iter_mut().filter_map(|(&p, m)| m.retained.remove(&cpu).then_some(p)).collect();
        for other in retainers {
            self.write_cpuset(other)?;
        }
        if warm {
            self.counters.grants_warm += 1;
        } else {
            self.counters.grants_cold += 1;
            self.write_cpuset(pid)?;
        }
        // Published only now: a program that sees its vcore's CPU in procinfo can pin a thread
        // there at once. Published before the cpuset write, a grant of a lent core (the write
        // sleeps while the borrower is moved off) let the Fig. 6 encoder's worker pin itself to
        // a CPU its cpuset did not hold yet: EINVAL, and the encoder died.
        let info = &self.mcps[&pid].pages.info().vcores[slot];
        info.cpu.store(cpu, Ordering::Relaxed);
        info.deadline_ns.store(0, Ordering::Relaxed);
        info.state.store(VCORE_HELD, Ordering::Release);
        self.post(pid, slot, layout::EV_GRANTED, cpu as u64);
        Ok(Some(slot))
    }

    /// `pid` asks for `n` more vcores: idle cores at once (its own retained ones first, warm),
    /// then cores of its provision on loan to others, taken back with a warning.
    pub fn request(&mut self, pid: u32, n: u32) -> Reply {
        let (granted, pending) = self.acquire(pid, n)?;
        self.settle_gang();
        self.refresh_procinfo();
        Ok(json!({"ok": true, "granted": granted, "pending": pending}))
    }

    /// What `request` does before it answers: grants idle cores, starts taking back lent ones
    /// its provision is owed; returns the grants and how many are pending.
    fn acquire(&mut self, pid: u32, n: u32) -> Result<(Vec<Value>, u32), String> {
        let mcp = &self.mcps[&pid];
        let want = n.min(mcp.max - mcp.held());
        let mut free = self.free();
        // Warm first, then cores nobody retains, then others' retained ones.
        free.sort_by_key(|c| (!mcp.retained.contains(c), self.mcps.values().any(|m| m.retained.contains(c))));
        let mut granted = vec![];
        for cpu in free.into_iter().take(want as usize) {
            if let Some(slot) = self.grant(pid, cpu)? {
                granted.push(json!({"vcore": slot, "cpu": cpu}));
            }
        }
        let mut pending = 0;
        let mcp = &self.mcps[&pid];
        let mut owed_now = (want - granted.len() as u32).min(mcp.provision.saturating_sub(mcp.held() + mcp.owed));
        while owed_now > 0 {
            let Some((lender, slot)) = self.borrowed_vcore() else { break };
            // Owed before the revoke starts: with no warning time (--warn-us 0) the core is
            // released and granted within start_revoke, which settles the debt at once.
            self.mcps.get_mut(&pid).unwrap().owed += 1;
            self.start_revoke(lender, slot, self.default_warn_ns, None, Some(pid), None);
            pending += 1;
            owed_now -= 1;
        }
        Ok((granted, pending))
    }

    /// Freezes (`stop`) or thaws `pid`'s whole group.
    fn set_stopped(&mut self, pid: u32, stop: bool) {
        let (Some(freezer), Some(mcp)) = (&self.freezer, self.mcps.get_mut(&pid)) else { return };
        if let Err(e) = freezer.set(pid, &self.cpusets, stop) {
            eprintln!("coreplane-arbiter: gang stop of pid {pid}: {e}");
            return;
        }
        mcp.stopped_since = stop.then(now_ns);
        if stop {
            self.counters.gang_stops += 1;
        } else {
            self.counters.gang_resumes += 1;
        }
    }

    /// Whether `pid` is under the gang stop, holds no core and is not stopped yet.
    fn to_stop(&self, pid: u32) -> bool {
        self.mcps.get(&pid).is_some_and(|m| m.gang_stop && m.held() == 0 && m.stopped_since.is_none())
    }

    /// The gang stop: a many-core process under it that holds no core gets the next idle core
    /// (those stopped longest first) or, when its provision is lent out, has one taken back for
    /// it; until then it is frozen whole, and it is thawed once granted one. It never runs on
    /// the control cores alone.
    fn settle_gang(&mut self) {
        if self.freezer.is_none() {
            return;
        }
        let mut idle: Vec<(u64, u32)> = self.mcps.iter().filter(|(_, m)| m.gang_stop && m.held() == 0)
            .map(|(&p, m)| (m.stopped_since.unwrap_or(u64::MAX), p)).collect();
        idle.sort();
        for (_, pid) in idle {
            if self.mcps[&pid].owed == 0 {
                if let Err(e) = self.acquire(pid, 1) {
                    eprintln!("coreplane-arbiter: a core for gang-stopped pid {pid}: {e}");
                }
            }
            let mcp = &self.mcps[&pid];
            if mcp.held() > 0 && mcp.stopped_since.is_some() {
                self.set_stopped(pid, false);
            } else if mcp.held() == 0 && mcp.stopped_since.is_none() {
                self.set_stopped(pid, true);
            }
        }
    }

    /// A vcore held on loan (its process holds more than its provision) and not already revoked.
    fn borrowed_vcore(&self) -> Option<(u32, usize)> {
        for (&pid, mcp) in &self.mcps {
            let revoking = mcp.vcores.iter().flatten().filter(|v| v.revoke.is_some()).count() as u32;
            if mcp.held() - revoking > mcp.provision {
                let slot = mcp.vcores.iter().rposition(|v| v.as_ref().is_some_and(|v| v.revoke.is_none()))?;
                return Some((pid, slot));
            }
        }
        None
    }

    /// Warns vcore `slot` of `pid` that it must yield within `warn_ns` (0: preempt now).
    pub fn start_revoke(&mut self, pid: u32, slot: usize, warn_ns: u64, signal: Option<i32>, for_pid: Option<u32>, batch: Option<u64>) {
        let warned = now_ns();
        let deadline = warned + warn_ns;
        let mcp = self.mcps.get_mut(&pid).unwrap();
        let vcore = mcp.vcores[slot].as_mut().unwrap();
        vcore.revoke = Some(Revoke { warned, deadline, for_pid, batch, yielder: None });
        if warn_ns == 0 {
            self.release(pid, slot, true, false);
            return;
        }
        let info = &mcp.pages.info().vcores[slot];
        info.deadline_ns.store(deadline, Ordering::Relaxed);
        info.state.store(VCORE_PREEMPT_PENDING, Ordering::Release);
        self.counters.warned += 1;
        self.post(pid, slot, layout::EV_PREEMPT_PENDING, deadline);
        if let Some(sig) = signal {
            unsafe { libc::kill(pid as i32, sig) };
        }
    }

    /// Revokes vcore `vcore` (or all) of `pid`; with a client, replies when all are given back.
    pub fn revoke(&mut self, pid: u32, vcore: Option<usize>, warn_ns: u64, signal: Option<i32>, client: Option<i32>) -> Reply {
        let mcp = self.mcps.get(&pid).ok_or_else(|| format!("pid {pid} is no many-core process"))?;
        let slots: Vec<usize> = match vcore {
            Some(v) if mcp.vcores.get(v).is_some_and(|s| s.as_ref().is_some_and(|s| s.revoke.is_none())) => vec![v],
            Some(v) => return Err(format!("vcore {v} of pid {pid} is not held (or already being revoked)")),
            None => (0..mcp.vcores.len()).filter(|&i| mcp.vcores[i].as_ref().is_some_and(|s| s.revoke.is_none())).collect(),
        };
        if slots.is_empty() {
            return Ok(json!({"ok": true, "revoked": [], "ns": 0}));
        }
        let started = now_ns();
        let batch = client.map(|fd| {
            self.next_batch += 1;
            self.batches.insert(self.next_batch, Batch { client: fd, started, remaining: slots.len() as u32, outcomes: vec![] });
            self.next_batch
        });
        for &slot in &slots {
            self.start_revoke(pid, slot, warn_ns, signal, None, batch);
        }
        self.settle_gang();
        if batch.is_some() {
            return Ok(Value::Null); // the reply follows (deferred) when every vcore is given back
        }
        Ok(json!({"ok": true, "revoking": slots}))
    }

    /// `pid` gives back vcore `slot`; with `retain` its CPU stays in the group's cpuset, warm,
    /// else it leaves now and the kernel moves whatever still runs there (what a program that
    /// cannot move its own threads asks for: coreplane's runtime yielding for a whole process).
    /// `yielder`: when the yielder woke to the warning and sent the yield, if it said.
    pub fn yield_vcore(&mut self, pid: u32, slot: usize, retain: bool, yielder: Option<(u64, u64)>) -> Reply {
        let mcp = self.mcps.get_mut(&pid).unwrap();
        let Some(vcore) = mcp.vcores.get_mut(slot).and_then(Option::as_mut) else {
            return Err(format!("vcore {slot} is not held by pid {pid}"));
        };
        if let Some(revoke) = vcore.revoke.as_mut() {
            revoke.yielder = yielder;
        }
        self.counters.yields += 1;
        self.release(pid, slot, false, retain);
        self.settle_gang();
        self.refresh_procinfo();
        Ok(json!({"ok": true}))
    }

    /// Takes vcore `slot` from `pid`: on a preemption, and a yield that does not `retain` it, its
    /// CPU leaves the cpuset now (the kernel moves its threads away); on another yield it stays
    /// there, warm, until someone else needs it.
    fn release(&mut self, pid: u32, slot: usize, preempted: bool, retain: bool) {
        let started = now_ns();
        let mcp = self.mcps.get_mut(&pid).unwrap();
        let vcore = mcp.vcores[slot].take().unwrap();
        let info = &mcp.pages.info().vcores[slot];
        info.state.store(VCORE_FREE, Ordering::Release);
        info.cpu.store(-1, Ordering::Relaxed);
        self.owner.remove(&vcore.cpu);
        if preempted {
            mcp.pages.info().preemptions.fetch_add(1, Ordering::Relaxed);
            self.counters.preempted += 1;
        } else if vcore.revoke.is_some() {
            self.counters.yielded_in_time += 1;
        }
        if preempted || !retain {
            // Under the gang stop it is frozen before its cpuset falls back to the control
            // cores, so none of its threads runs there meanwhile.
            if self.to_stop(pid) {
                self.set_stopped(pid, true);
            }
            if let Err(e) = self.write_cpuset(pid) {
                eprintln!("coreplane-arbiter: taking CPU {} from pid {pid}: {e}", vcore.cpu);
            }
        } else {
            mcp.retained.insert(vcore.cpu);
        }
        let kind = if preempted { layout::EV_PREEMPTED } else { layout::EV_RELEASED };
        self.post(pid, slot, kind, vcore.cpu as u64);
        let Some(revoke) = vcore.revoke else { return };
        if let Some(to) = revoke.for_pid.filter(|p| self.mcps.contains_key(p)) {
            self.mcps.get_mut(&to).unwrap().owed -= 1;
            if let Err(e) = self.grant(to, vcore.cpu) {
                eprintln!("coreplane-arbiter: granting CPU {} to pid {to}: {e}", vcore.cpu);
            }
        }
        if let Some(b) = revoke.batch {
            if let Some(batch) = self.batches.get_mut(&b) {
                batch.remaining -= 1;
                let mut outcome = json!({"pid": pid, "vcore": slot, "cpu": vcore.cpu, "outcome": if preempted {"preempted"} else {"yielded"},
                    "warned_ns": revoke.warned, "deadline_ns": revoke.deadline, "started_ns": started, "released_ns": now_ns()});
                if let Some((woke, sent)) = revoke.yielder {
                    outcome["yielder_woke_ns"] = json!(woke);
                    outcome["yielder_sent_ns"] = json!(sent);
                }
                batch.outcomes.push(outcome);
                if batch.remaining == 0 {
                    let done = self.batches.remove(&b).unwrap();
                    self.deferred.push((done.client, json!({"ok": true, "revoked": done.outcomes, "ns": now_ns() - done.started})));
                }
            }
        }
        self.refresh_procinfo();
    }

    /// Preempts every warned vcore whose deadline has passed; returns the next deadline.
    pub fn expire(&mut self) -> Option<u64> {
        let now = now_ns();
        let mut due = vec![];
        let mut next: Option<u64> = None;
        for (&pid, mcp) in &self.mcps {
            for (slot, v) in mcp.vcores.iter().enumerate() {
                if let Some(r) = v.as_ref().and_then(|v| v.revoke.as_ref()) {
                    if r.deadline <= now {
                        due.push((pid, slot));
                    } else {
                        next = Some(next.map_or(r.deadline, |n| n.min(r.deadline)));
                    }
                }
            }
        }
        if !due.is_empty() {
            for (pid, slot) in due {
                self.release(pid, slot, true, false);
            }
            self.settle_gang();
        }
        next
    }

    /// The many-core process `pid` ended: everything it held returns, its group goes.
    pub fn exited(&mut self, pid: u32) {
        let Some(mcp) = self.mcps.get(&pid) else { return };
        let slots: Vec<usize> = (0..mcp.vcores.len()).filter(|&i| mcp.vcores[i].is_some()).collect();
        // Its pending revocations still hand their cores to whoever was owed them.
        for slot in slots {
            let vcore = self.mcps.get_mut(&pid).unwrap().vcores[slot].take().unwrap();
            self.owner.remove(&vcore.cpu);
            let Some(revoke) = vcore.revoke else { continue };
            if let Some(to) = revoke.for_pid.filter(|p| self.mcps.contains_key(p) && *p != pid) {
                self.mcps.get_mut(&to).unwrap().owed -= 1;
                let _ = self.grant(to, vcore.cpu);
            }
            if let Some(batch) = revoke.batch.and_then(|b| self.batches.get_mut(&b)) {
                batch.remaining -= 1;
                batch.outcomes.push(json!({"pid": pid, "vcore": slot, "cpu": vcore.cpu, "outcome": "exited"}));
                if batch.remaining == 0 {
                    let b = revoke.batch.unwrap();
                    let done = self.batches.remove(&b).unwrap();
                    self.deferred.push((done.client, json!({"ok": true, "revoked": done.outcomes, "ns": now_ns() - done.started})));
                }
            }
        }
        let mcp = self.mcps.remove(&pid).unwrap();
        unsafe { libc::close(mcp.pidfd) };
        if let Some(freezer) = self.freezer.as_ref().filter(|_| mcp.gang_stop) {
            freezer.release(pid, &self.cpusets);
        }
        self.cpusets.release(&self.cpusets.group(pid));
        // Revocations started for it now free their cores for anyone.
        for m in self.mcps.values_mut() {
            for v in m.vcores.iter_mut().flatten() {
                if let Some(r) = v.revoke.as_mut().filter(|r| r.for_pid == Some(pid)) {
                    r.for_pid = None;
                }
            }
        }
        self.counters.exits += 1;
        self.exits.push((pid, now_ns()));
        if self.exits.len() > 16 {
            self.exits.remove(0);
        }
        self.settle_gang();
        self.refresh_procinfo();
    }

    pub fn status(&self) -> Value {
        let mcps: Vec<Value> = self.mcps.iter().map(|(pid, m)| {
            let vcores: Vec<Value> = m.vcores.iter().enumerate().filter_map(|(i, v)| v.as_ref().map(|v| json!({
                "vcore": i, "cpu": v.cpu,
                "preempt_deadline_ns": v.revoke.as_ref().map(|r| r.deadline),
            }))).collect();
            json!({
                "pid": pid, "uid": m.uid, "provision": m.provision, "max": m.max, "held": m.held(),
                "on_loan": m.held().saturating_sub(m.provision), "owed": m.owed,
                "retained": format_cpus(&m.retained), "vcores": vcores,
                "cpuset": format_cpus(&self.cpuset_of(m)), "delegates": m.delegates,
                "gang_stop": m.gang_stop, "stopped": m.stopped_since.is_some(),
                "dropped_notifications": m.pages.info().dropped.load(Ordering::Relaxed),
            })
        }).collect();
        let c = &self.counters;
        json!({
            "ok": true,
            "compute_cores": format_cpus(&self.compute), "control_cores": format_cpus(&self.control),
            "provisioned": self.provisioned(), "free": self.free().len(),
            "mcps": mcps,
            "pending_preemptions": self.mcps.values().flat_map(|m| m.vcores.iter().flatten()).filter(|v| v.revoke.is_some()).count(),
            "counters": {
                "grants_warm": c.grants_warm, "grants_cold": c.grants_cold, "yields": c.yields,
                "warned": c.warned, "yielded_in_time": c.yielded_in_time, "preempted": c.preempted,
                "dropped_notifications": c.dropped_notifications, "refused_provisions": c.refused_provisions,
                "exits": c.exits, "gang_stops": c.gang_stops, "gang_resumes": c.gang_resumes,
            },
            "gang_stop": self.freezer.is_some(),
            "exits": self.exits.iter().map(|(p, t)| json!({"pid": p, "reclaimed_ns": t})).collect::<Vec<_>>(),
        })
    }
}
