//! The numbers of the arbiter's shared pages and socket that coreplane's runtime reads too
//! (`crates/runtime/src/bin/rt/mcp.rs`, no_std, includes this file): their one owner. Plain
//! constants only, so both crates compile it; layout.rs's test checks them against its structs.

/// Vcores per many-core process (procinfo's table, procdata's queues).
pub const MAX_VCORES: usize = 64;

/// vcore states in procinfo.
pub const VCORE_FREE: u32 = 0;
pub const VCORE_HELD: u32 = 1;
pub const VCORE_PREEMPT_PENDING: u32 = 2;

/// procinfo: the offsets of the words the runtime reads, and each vcore's entry (cpu, state).
pub const OFFSET_HELD: usize = 20;
pub const OFFSET_FREE_CORES: usize = 24;
pub const OFFSET_GENERATION: usize = 28;
pub const OFFSET_VCORES: usize = 48;
pub const VCORE_INFO_SIZE: usize = 16;
pub const OFFSET_VCORE_STATE: usize = 4;
/// procdata: each vcore's queue, and in it the consumer's index (the producer's is at 0).
pub const QUEUE_SIZE: usize = 1152;
pub const OFFSET_QUEUE_CONS: usize = 64;

/// The two mappings' sizes, whole pages.
pub const PROCINFO_SIZE: usize = 4096;
pub const PROCDATA_SIZE: usize = 18 * 4096;

/// The environment variable that names the arbiter's socket, and the socket by default.
pub const ENV_SOCKET: &str = "COREPLANE_ARBITER_SOCKET";
pub const DEFAULT_SOCKET: &str = "/run/coreplane/arbiter.sock";
