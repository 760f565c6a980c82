//! The shared pages of a many-core process: procinfo (read-only to the program) and procdata
//! (one bounded notification queue per vcore, written by the arbiter, consumed by the program).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

pub use crate::abi::{MAX_VCORES, PROCDATA_SIZE, PROCINFO_SIZE, VCORE_FREE, VCORE_HELD, VCORE_PREEMPT_PENDING};

pub const MAGIC: u32 = 0x3150_434d; // "MCP1"
pub const QUEUE_LEN: u32 = 64;

/// Notification kinds.
pub const EV_GRANTED: u32 = 1; // arg = cpu
pub const EV_PREEMPT_PENDING: u32 = 2; // arg = deadline, CLOCK_MONOTONIC ns
pub const EV_PREEMPTED: u32 = 3; // arg = cpu taken at the deadline
pub const EV_RELEASED: u32 = 4; // arg = cpu given back by a yield

#[repr(C)]
pub struct VcoreInfo {
    pub cpu: AtomicI32,
    pub state: AtomicU32,
    pub deadline_ns: AtomicU64,
}

#[repr(C)]
pub struct ProcInfo {
    pub magic: AtomicU32,
    pub pid: AtomicU32,
    pub compute_cores: AtomicU32,
    pub provisioned: AtomicU32,
    pub max_vcores: AtomicU32,
    pub held: AtomicU32,
    pub free_cores: AtomicU32,
    /// Bumped, and woken as a shared futex, whenever this process's vcores or the machine's free
    /// cores change: a monitor (coreplane's runtime, `rt/mcp.rs`) sleeps on it instead of polling.
    pub generation: AtomicU32,
    /// Notifications the arbiter could not post because the program left its queue full.
    pub dropped: AtomicU64,
    /// Times a vcore of this program was preempted at its deadline (it did not yield in time).
    pub preemptions: AtomicU64,
    pub vcores: [VcoreInfo; MAX_VCORES],
}

#[repr(C)]
pub struct Event {
    pub kind: AtomicU32,
    pub vcore: AtomicU32,
    pub arg: AtomicU64,
}

/// A single-producer queue: the arbiter owns `prod`, the program owns `cons`, on separate lines.
#[repr(C, align(64))]
pub struct Queue {
    pub prod: AtomicU32,
    _pad0: [u32; 15],
    pub cons: AtomicU32,
    _pad1: [u32; 15],
    pub events: [Event; QUEUE_LEN as usize],
}

#[repr(C)]
pub struct ProcData {
    pub queues: [Queue; MAX_VCORES],
}

impl Queue {
    /// Posts an event; false when the queue is full. The consumer's index is untrusted: any
    /// value it writes only makes the queue look full or emptier, never moves a write outside it.
    pub fn post(&self, kind: u32, vcore: u32, arg: u64) -> bool {
        let prod = self.prod.load(Ordering::Relaxed);
        let used = prod.wrapping_sub(self.cons.load(Ordering::Acquire));
        if used >= QUEUE_LEN {
            return false;
        }
        let slot = &self.events[(prod % QUEUE_LEN) as usize];
        slot.kind.store(kind, Ordering::Relaxed);
        slot.vcore.store(vcore, Ordering::Relaxed);
        slot.arg.store(arg, Ordering::Relaxed);
        self.prod.store(prod.wrapping_add(1), Ordering::Release);
        true
    }

    /// Takes the oldest event, if any: (kind, vcore, arg).
    pub fn take(&self) -> Option<(u32, u32, u64)> {
        let cons = self.cons.load(Ordering::Relaxed);
        if cons == self.prod.load(Ordering::Acquire) {
            return None;
        }
        let slot = &self.events[(cons % QUEUE_LEN) as usize];
        let event = (slot.kind.load(Ordering::Relaxed), slot.vcore.load(Ordering::Relaxed), slot.arg.load(Ordering::Relaxed));
        self.cons.store(cons.wrapping_add(1), Ordering::Release);
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::*;

    fn page_round(n: usize) -> usize {
        (n + 4095) & !4095
    }

    #[test]
    fn offsets_the_runtime_reads() {
        // abi.rs is the runtime's only copy (rt/mcp.rs includes it): checked here once for both.
        assert_eq!(std::mem::offset_of!(ProcInfo, held), OFFSET_HELD);
        assert_eq!(std::mem::offset_of!(ProcInfo, free_cores), OFFSET_FREE_CORES);
        assert_eq!(std::mem::offset_of!(ProcInfo, generation), OFFSET_GENERATION);
        assert_eq!(std::mem::offset_of!(ProcInfo, vcores), OFFSET_VCORES);
        assert_eq!(std::mem::size_of::<VcoreInfo>(), VCORE_INFO_SIZE);
        assert_eq!((std::mem::offset_of!(VcoreInfo, cpu), std::mem::offset_of!(VcoreInfo, state)), (0, OFFSET_VCORE_STATE));
        assert_eq!(std::mem::size_of::<Queue>(), QUEUE_SIZE);
        assert_eq!((std::mem::offset_of!(Queue, prod), std::mem::offset_of!(Queue, cons)), (0, OFFSET_QUEUE_CONS));
        assert_eq!(page_round(std::mem::size_of::<ProcInfo>()), PROCINFO_SIZE);
        assert_eq!(page_round(std::mem::size_of::<ProcData>()), PROCDATA_SIZE);
    }

    fn queue() -> Box<Queue> {
        // SAFETY: every field of Queue is an integer; all-zero is the empty queue.
        unsafe { Box::new(std::mem::zeroed()) }
    }

    #[test]
    fn full_queue_refuses_then_drains_in_order() {
        let q = queue();
        for i in 0..QUEUE_LEN {
            assert!(q.post(EV_GRANTED, 0, i as u64));
        }
        assert!(!q.post(EV_GRANTED, 0, 99));
        assert_eq!(q.take(), Some((EV_GRANTED, 0, 0)));
        assert!(q.post(EV_GRANTED, 0, 64));
        for i in 1..=QUEUE_LEN {
            assert_eq!(q.take().unwrap().2, i as u64);
        }
        assert_eq!(q.take(), None);
    }

    #[test]
    fn garbage_consumer_index_cannot_move_writes_outside() {
        let q = queue();
        for bad in [1u32, 7, u32::MAX, 0x8000_0000] {
            q.cons.store(bad, Ordering::Relaxed);
            // Either refused (looks full) or written inside the ring; never a panic or overflow.
            let _ = q.post(EV_GRANTED, 0, 1);
        }
    }
}
