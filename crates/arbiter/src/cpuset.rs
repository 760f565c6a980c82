//! The arbiter's cpuset groups, in cgroup v1's cpuset hierarchy or in a cgroup v2 (sub)tree with
//! the cpuset controller, whichever the machine has: one parent group, one child per many-core
//! process, and the evacuation that sends every task back to the root before a group is removed.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Version {
    V1,
    V2,
}

pub struct Cpusets {
    /// The hierarchy's root (v1) or the delegated subtree's (v2): released tasks go back here.
    pub root: PathBuf,
    pub base: PathBuf,
    pub version: Version,
    /// v2: the arbiter turned the cpuset controller on in the root's subtree_control (and turns
    /// it off again when it leaves).
    enabled_at_root: bool,
}

/// The mount point of the cgroup v1 hierarchy holding `controller` ("cpuset", "freezer").
pub fn v1_mount(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    mount_points(mountinfo).find(|(kind, options, _)| *kind == "cgroup" && options.split(',').any(|o| o == controller))
        .map(|(_, _, path)| path)
}

/// Each mount's file system type, super options and mount point.
fn mount_points(mountinfo: &str) -> impl Iterator<Item = (&str, &str, PathBuf)> {
    mountinfo.lines().filter_map(|line| {
        let (head, tail) = line.split_once(" - ").unwrap_or((line, ""));
        let fields: Vec<&str> = head.split_whitespace().collect();
        let tail: Vec<&str> = tail.split_whitespace().collect();
        (fields.len() >= 5 && tail.len() >= 3).then(|| (tail[0], tail[2], PathBuf::from(fields[4])))
    })
}

/// The mount points of the cgroup v1 cpuset hierarchy and of the cgroup v2 hierarchy.
fn mounts(mountinfo: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    (v1_mount(mountinfo, "cpuset"), mount_points(mountinfo).find(|(kind, _, _)| *kind == "cgroup2").map(|(_, _, path)| path))
}

/// Whether the cgroup v2 directory `dir` offers the cpuset controller to its children.
fn offers_cpuset(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|w| w == "cpuset"))
}

/// Where the arbiter's groups go: `given` (a delegated cgroup v2 directory, or a v1 cpuset
/// directory), else the v1 cpuset hierarchy when the machine mounts one (the controller is
/// then bound to it), else the v2 hierarchy's root when it offers the cpuset controller.
pub fn find_root(mountinfo: &str, given: Option<&Path>) -> Result<(PathBuf, Version), String> {
    if let Some(dir) = given {
        if dir.join("cgroup.controllers").exists() {
            return match offers_cpuset(dir) {
                true => Ok((dir.to_path_buf(), Version::V2)),
                false => Err(format!("{}: the cpuset controller is not among its cgroup.controllers", dir.display())),
            };
        }
        return match dir.join("cpuset.cpus").exists() {
            true => Ok((dir.to_path_buf(), Version::V1)),
            false => Err(format!("{}: neither a cgroup v2 directory nor a cgroup v1 cpuset directory", dir.display())),
        };
    }
    match mounts(mountinfo) {
        (Some(v1), _) => Ok((v1, Version::V1)),
        (None, Some(v2)) if offers_cpuset(&v2) => Ok((v2, Version::V2)),
        (None, Some(v2)) => Err(format!("no cgroup v1 cpuset hierarchy, and the cgroup v2 root {} does not offer the cpuset controller", v2.display())),
        (None, None) => Err("no cgroup v1 cpuset hierarchy and no cgroup v2 hierarchy is mounted".into()),
    }
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

/// Sends every task of the group `dir` to the hierarchy's `root` and removes `dir` (a task moved
/// out of a frozen group into a thawed one is thawed by the kernel).
pub fn evacuate(root: &Path, dir: &Path) {
    for _ in 0..100 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            break;
        }
        for pid in procs.split_whitespace() {
            let _ = fs::write(root.join("cgroup.procs"), pid);
        }
    }
    let _ = fs::remove_dir(dir);
}

impl Cpusets {
    /// Makes (or takes over, evacuating what a dead arbiter left) the parent group `name`.
    pub fn create(root: PathBuf, version: Version, name: &str) -> Result<Cpusets, String> {
        let mut sets = Cpusets { base: root.join(name), root, version, enabled_at_root: false };
        if sets.base.exists() {
            sets.remove_all();
        }
        if version == Version::V2 {
            // Children of the root get cpuset files only with the controller on in its subtree.
            let control = sets.root.join("cgroup.subtree_control");
            let on = fs::read_to_string(&control).map_err(|e| format!("{}: {e}", control.display()))?;
            if !on.split_whitespace().any(|c| c == "cpuset") {
                write(&control, "+cpuset")?;
                sets.enabled_at_root = true;
            }
        }
        fs::create_dir_all(&sets.base).map_err(|e| format!("{}: {e}", sets.base.display()))?;
        match version {
            // v1: a group has no CPUs or memory nodes until given some.
            Version::V1 => {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let value = fs::read_to_string(sets.root.join(file)).map_err(|e| format!("{file}: {e}"))?;
                    write(&sets.base.join(file), value.trim())?;
                }
            }
            // v2: an empty cpuset inherits its parent's; the groups below need the controller.
            Version::V2 => write(&sets.base.join("cgroup.subtree_control"), "+cpuset")?,
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
        if self.version == Version::V1 {
            let mems = fs::read_to_string(self.base.join("cpuset.mems")).map_err(|e| e.to_string())?;
            write(&dir.join("cpuset.mems"), mems.trim())?;
        }
        self.set(pid, cpus)?;
        write(&dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Rewrites the cpus of `pid`'s group; the kernel moves its threads off CPUs taken away.
    pub fn set(&self, pid: u32, cpus: &BTreeSet<i32>) -> Result<(), String> {
        write(&self.group(pid).join("cpuset.cpus"), &format_cpus(cpus)).map_err(|e| {
            let effective = if self.version == Version::V1 { "cpuset.effective_cpus" } else { "cpuset.cpus.effective" };
            let parent = fs::read_to_string(self.base.join(effective)).unwrap_or_default();
            format!("{e} (the arbiter's group has CPUs {})", parent.trim())
        })
    }

    /// Sends every task of `dir` back to the root (ordinary scheduling) and removes `dir`.
    pub fn release(&self, dir: &Path) {
        evacuate(&self.root, dir);
    }

    /// Releases every group under the parent and the parent itself (v2: and turns the cpuset
    /// controller off again where the arbiter turned it on, unless others use it now).
    pub fn remove_all(&self) {
        if let Ok(entries) = fs::read_dir(&self.base) {
            for entry in entries.flatten() {
                if entry.path().is_dir() {
                    self.release(&entry.path());
                }
            }
        }
        self.release(&self.base);
        if self.enabled_at_root {
            let _ = fs::write(self.root.join("cgroup.subtree_control"), "-cpuset");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "30 24 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n\
        33 30 0:29 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
        40 30 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn the_hierarchy_holding_the_cpuset_controller_is_chosen() {
        assert_eq!(mounts(MOUNTINFO), (Some("/sys/fs/cgroup/cpuset".into()), Some("/sys/fs/cgroup/unified".into())));
        // A hybrid machine: v1 holds the controller, whatever v2 shows.
        assert_eq!(find_root(MOUNTINFO, None).unwrap(), ("/sys/fs/cgroup/cpuset".into(), Version::V1));
        let v2_only = "40 30 0:36 / /nonexistent-cgroup2 rw - cgroup2 cgroup2 rw\n";
        assert!(find_root(v2_only, None).unwrap_err().contains("does not offer the cpuset controller"));
        assert!(find_root("", None).unwrap_err().contains("no cgroup v2 hierarchy"));
    }

    #[test]
    fn a_given_directory_is_checked() {
        let dir = std::env::temp_dir().join(format!("coreplane-cpuset-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert!(find_root("", Some(&dir)).unwrap_err().contains("neither"));
        fs::write(dir.join("cgroup.controllers"), "cpu memory\n").unwrap();
        assert!(find_root("", Some(&dir)).unwrap_err().contains("not among its cgroup.controllers"));
        fs::write(dir.join("cgroup.controllers"), "cpuset cpu memory\n").unwrap();
        assert_eq!(find_root("", Some(&dir)).unwrap(), (dir.clone(), Version::V2));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cpu_lists_round_trip() {
        let cpus = parse_cpus("0-2,5\n").unwrap();
        assert_eq!(format_cpus(&cpus), "0,1,2,5");
        assert!(parse_cpus("x").is_err());
    }
}
