//! The gang stop: a many-core process that holds no compute core is frozen whole (every thread
//! of every process in its group) until a core is granted to it, through the cgroup freezer:
//! cgroup v2's cgroup.freeze of its own group, or a group of its own in cgroup v1's freezer
//! hierarchy.

use crate::cpuset::{self, evacuate, Cpusets, Version};
use std::fs;
use std::path::{Path, PathBuf};

pub enum Freezer {
    /// cgroup v1: one group per many-core process under `base` in the freezer hierarchy, whose
    /// `root` takes released tasks back.
    V1 { root: PathBuf, base: PathBuf },
    /// cgroup v2: the many-core process's cpuset group freezes itself.
    V2,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("{}: cannot write {value:?}: {e}", path.display()))
}

impl Freezer {
    /// The freezer beside `cpusets`: in their own group (v2) or under `name` in the v1 freezer
    /// hierarchy (made now; a dead arbiter's is taken over, its tasks thawed and released).
    pub fn create(mountinfo: &str, cpusets: &Cpusets, name: &str) -> Result<Freezer, String> {
        if cpusets.version == Version::V2 {
            return Ok(Freezer::V2);
        }
        let root = cpuset::v1_mount(mountinfo, "freezer").ok_or("--gang-stop: no cgroup v1 freezer hierarchy is mounted")?;
        let freezer = Freezer::V1 { base: root.join(name), root };
        if let Freezer::V1 { base, .. } = &freezer {
            if base.exists() {
                freezer.remove_all();
            }
            fs::create_dir_all(base).map_err(|e| format!("{}: {e}", base.display()))?;
        }
        Ok(freezer)
    }

    fn group(&self, pid: u32, cpusets: &Cpusets) -> PathBuf {
        match self {
            Freezer::V1 { base, .. } => base.join(format!("mcp-{pid}")),
            Freezer::V2 => cpusets.group(pid),
        }
    }

    /// Puts process `pid` (all its threads; its later children follow) under the freezer.
    pub fn adopt(&self, pid: u32, cpusets: &Cpusets) -> Result<(), String> {
        let Freezer::V1 { .. } = self else { return Ok(()) };
        let dir = self.group(pid, cpusets);
        fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        write(&dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Freezes (or thaws) every task of `pid`'s group.
    pub fn set(&self, pid: u32, cpusets: &Cpusets, frozen: bool) -> Result<(), String> {
        let dir = self.group(pid, cpusets);
        match self {
            Freezer::V1 { .. } => write(&dir.join("freezer.state"), if frozen { "FROZEN" } else { "THAWED" }),
            Freezer::V2 => write(&dir.join("cgroup.freeze"), if frozen { "1" } else { "0" }),
        }
    }

    /// Thaws `pid`'s group and (v1) sends its tasks back to the root and removes it; v2's group
    /// is the cpuset group, which Cpusets::release removes.
    pub fn release(&self, pid: u32, cpusets: &Cpusets) {
        let _ = self.set(pid, cpusets, false);
        if let Freezer::V1 { root, .. } = self {
            evacuate(root, &self.group(pid, cpusets));
        }
    }

    /// Thaws and releases every group under the parent, and the parent (v1); nothing is left
    /// frozen, whatever state a dead arbiter left.
    pub fn remove_all(&self) {
        let Freezer::V1 { root, base } = self else { return };
        if let Ok(entries) = fs::read_dir(base) {
            for entry in entries.flatten().filter(|e| e.path().is_dir()) {
                let _ = write(&entry.path().join("freezer.state"), "THAWED");
                evacuate(root, &entry.path());
            }
        }
        evacuate(root, base);
    }
}
