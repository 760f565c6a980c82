//! The arbiter's cpuset groups (cgroup v1): one parent group, one child per many-core process,
//! and the evacuation that sends every task back to the root group before a group is removed.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

pub struct Cpusets {
    pub root: PathBuf,
    pub base: PathBuf,
}

/// The mount point of the cgroup v1 cpuset hierarchy.
pub fn find_root() -> Result<PathBuf, String> {
    let text = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    for line in text.lines() {
        let (head, tail) = line.split_once(" - ").unwrap_or((line, ""));
        let fields: Vec<&str> = head.split_whitespace().collect();
        let tail: Vec<&str> = tail.split_whitespace().collect();
        if fields.len() >= 5 && tail.len() >= 3 && tail[0] == "cgroup" && tail[2].split(',').any(|o| o == "cpuset") {
            return Ok(PathBuf::from(fields[4]));
        }
    }
    Err("no cgroup v1 cpuset hierarchy is mounted (cgroup v2 is not supported by the arbiter yet)".into())
}

pub fn format_cpus(cpus: &BTreeSet<i32>) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

pub fn parse_cpus(text: &str) -> Result<BTreeSet<i32>, String> {
    let mut out = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (i32, i32) = (a.parse().map_err(|_| format!("bad CPU list {text:?}"))?, b.parse().map_err(|_| format!("bad CPU list {text:?}"))?);
        out.extend(a..=b);
    }
    Ok(out)
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("{}: cannot write {value:?}: {e}", path.display()))
}

impl Cpusets {
    /// Makes (or takes over, evacuating what a dead arbiter left) the parent group `name`.
    pub fn create(root: PathBuf, name: &str) -> Result<Cpusets, String> {
        let sets = Cpusets { base: root.join(name), root };
        if sets.base.exists() {
            sets.remove_all();
        }
        fs::create_dir_all(&sets.base).map_err(|e| format!("{}: {e}", sets.base.display()))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let value = fs::read_to_string(sets.root.join(file)).map_err(|e| format!("{file}: {e}"))?;
            write(&sets.base.join(file), value.trim())?;
        }
        Ok(sets)
    }

    pub fn group(&self, pid: u32) -> PathBuf {
        self.base.join(format!("mcp-{pid}"))
    }

    /// Makes the group of process `pid` with `cpus` and moves the process (all its threads) in.
    pub fn adopt(&self, pid: u32, cpus: &BTreeSet<i32>) -> Result<(), String> {
        let dir = self.group(pid);
        fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mems = fs::read_to_string(self.base.join("cpuset.mems")).map_err(|e| e.to_string())?;
        write(&dir.join("cpuset.mems"), mems.trim())?;
        self.set(pid, cpus)?;
        write(&dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Rewrites the cpus of `pid`'s group; the kernel moves its threads off CPUs taken away.
    pub fn set(&self, pid: u32, cpus: &BTreeSet<i32>) -> Result<(), String> {
        write(&self.group(pid).join("cpuset.cpus"), &format_cpus(cpus)).map_err(|e| {
            let parent = fs::read_to_string(self.base.join("cpuset.cpus")).unwrap_or_default();
            format!("{e} (the arbiter's group has CPUs {})", parent.trim())
        })
    }

    /// Sends every task of `dir` back to the root group (ordinary scheduling) and removes `dir`.
    pub fn release(&self, dir: &Path) {
        for _ in 0..100 {
            let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                break;
            }
            for pid in procs.split_whitespace() {
                let _ = fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        let _ = fs::remove_dir(dir);
    }

    /// Releases every group under the parent and the parent itself.
    pub fn remove_all(&self) {
        if let Ok(entries) = fs::read_dir(&self.base) {
            for entry in entries.flatten() {
                if entry.path().is_dir() {
                    self.release(&entry.path());
                }
            }
        }
        self.release(&self.base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        let cpus = parse_cpus("0-2,5\n").unwrap();
        assert_eq!(format_cpus(&cpus), "0,1,2,5");
        assert!(parse_cpus("x").is_err());
    }
}
