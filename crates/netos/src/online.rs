//! Run-time mapping (NetworkedOS Sec. II-C) decided as tasks appear, from what has been observed
//! so far: a thread shares its creator's memory (same core if it has room), a forked child talks
//! to its parent (an adjacent core), a task with no known partner is independent (far from the
//! others), and a task that execs moves next to its heaviest partner seen so far. Every decision
//! looks at no more than CANDIDATES cores and one partner: O(1) per decision at any core count.
//! Where a profile of an earlier run gives the bytes two tasks exchanged (the `traffic` of a
//! mapping file, by clone-tree position), those bytes weigh the partners instead of the count of
//! channels seen: O(d) more per birth for d partners in the profile.

use std::collections::HashMap;

/// Cores examined per decision, nearest first; past them a decision takes any core with room.
pub const CANDIDATES: usize = 8;

/// Bytes exchanged between tasks in an earlier run, by their places in the clone tree ("0" the
/// program, "0.1" its second child, ...), as `coreplane map --out` writes them (`traffic`).
#[derive(Debug, Default)]
pub struct Profile {
    partners: HashMap<String, Vec<(String, u64)>>,
}

impl Profile {
    /// A profile from (task, task, bytes) triples; a pair named twice adds up.
    pub fn from_pairs<I: IntoIterator<Item = (String, String, u64)>>(pairs: I) -> Profile {
        let mut sum: HashMap<(String, String), u64> = HashMap::new();
        for (a, b, bytes) in pairs {
            if a != b {
                let key = if a < b { (a, b) } else { (b, a) };
                *sum.entry(key).or_insert(0) += bytes;
            }
        }
        let mut partners: HashMap<String, Vec<(String, u64)>> = HashMap::new();
        for ((a, b), bytes) in sum {
            partners.entry(a.clone()).or_default().push((b.clone(), bytes));
            partners.entry(b).or_default().push((a, bytes));
        }
        Profile { partners }
    }

    /// The `traffic` list of a mapping file (`coreplane-map/1`: entries {"a": KEY, "b": KEY,
    /// "bytes": N}); an unreadable file or a malformed entry is a one-line error naming it.
    pub fn load(path: &str) -> Result<Profile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        let traffic = doc.get("traffic").and_then(|t| t.as_array()).ok_or_else(|| {
            format!("{path}: field 'traffic' is missing (write the mapping with `coreplane map GRAPH --out`)")
        })?;
        let mut pairs = Vec::with_capacity(traffic.len());
        for (i, entry) in traffic.iter().enumerate() {
            let key = |k: &str| entry.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            match (key("a"), key("b"), entry.get("bytes").and_then(|v| v.as_u64())) {
                (Some(a), Some(b), Some(bytes)) => pairs.push((a, b, bytes)),
                _ => return Err(format!("{path}: traffic[{i}]: needs 'a' and 'b' (task keys) and 'bytes' (a count)")),
            }
        }
        Ok(Profile::from_pairs(pairs))
    }

    fn partners(&self, key: &str) -> &[(String, u64)] {
        self.partners.get(key).map_or(&[], Vec::as_slice)
    }
}

/// Cores and their distances, from `mesh:XxY`, `torus:XxY` or `tree:A,B,...` (arity per level,
/// root first), optionally followed by `@FILE`: a mapping file whose `traffic` (Profile) the
/// mapper weighs partners by.
pub struct Topology {
    pub cores: usize,
    /// Hops between two cores, in closed form (coordinates, leaf digits): no C x C table.
    hop: Box<dyn Fn(usize, usize) -> u16 + Send + Sync>,
    /// Row c: the nearest cores to c (c first), CANDIDATES + 1 of them.
    nearest: Vec<Vec<u32>>,
    /// Cores in an order that spreads consecutive ones far apart (for independent tasks).
    spread: Vec<u32>,
    /// What an earlier run's profile says of the program's traffic (`SPEC@FILE`).
    profile: Option<Profile>,
}

impl Topology {
    /// Parses a topology spec (`SPEC` or `SPEC@FILE`); a malformed one is a one-line error naming it.
    pub fn parse(spec: &str) -> Result<Topology, String> {
        let (spec, profile) = match spec.split_once('@') {
            Some((machine, file)) => (machine, Some(Profile::load(file)?)),
            None => (spec, None),
        };
        let mut topo = Topology::machine(spec)?;
        topo.profile = profile;
        Ok(topo)
    }

    fn machine(spec: &str) -> Result<Topology, String> {
        let bad = || format!("topology '{spec}': expected mesh:XxY, torus:XxY or tree:A,B,... (then @FILE for a profile)");
        let (kind, rest) = spec.split_once(':').ok_or_else(bad)?;
        let ints = |sep: char| -> Result<Vec<usize>, String> {
            rest.split(sep).map(|s| s.parse::<usize>().ok().filter(|&v| v > 0).ok_or_else(bad)).collect()
        };
        let k = CANDIDATES + 1;
        // per kind: the hop function, and each core's k nearest by (hops, core) in closed form
        let (cores, hop, nearest): (usize, Box<dyn Fn(usize, usize) -> u16 + Send + Sync>, Vec<Vec<u32>>) = match kind {
            "mesh" | "torus" => {
                let d = ints('x')?;
                if d.len() != 2 || d[0].checked_mul(d[1]).map_or(true, |c| c > MAX_CORES) {
                    return Err(bad());
                }
                let (x, y) = (d[0], d[1]);
                let wrap = kind == "torus";
                let axis = move |a: usize, b: usize, n: usize| {
                    let d = a.abs_diff(b);
                    if wrap { d.min(n - d) } else { d }
                };
                let hop = move |a: usize, b: usize| (axis(a % x, b % x, x) + axis(a / x, b / x, y)) as u16;
                let nearest = (0..x * y).map(|c| grid_nearest(c, x, y, wrap, k.min(x * y), &hop)).collect();
                (x * y, Box::new(hop), nearest)
            }
            "tree" => {
                let ar = ints(',')?;
                let total = ar.iter().try_fold(1usize, |t, &a| t.checked_mul(a)).filter(|&t| t <= MAX_CORES).ok_or_else(bad)?;
                // leaf index digits, root first; crossing level i's switch costs 2*(L - i) hops
                let levels = ar.len();
                let strides: Vec<usize> = (0..levels).map(|i| ar[i + 1..].iter().product()).collect();
                let nearest = (0..total).map(|c| tree_nearest(c, &strides, total, k.min(total))).collect();
                (total, Box::new(move |a, b| {
                    let common = (0..levels).take_while(|&i| a / strides[i] == b / strides[i]).count();
                    (2 * (levels - common)) as u16
                }), nearest)
            }
            _ => return Err(bad()),
        };
        if cores == 0 {
            return Err(bad());
        }
        // bit-reversed order: consecutive entries differ in their highest index bits, so they
        // land in different halves of the machine (different subtrees, far rows of a mesh)
        let bits = usize::BITS - (cores - 1).leading_zeros();
        let mut spread: Vec<u32> = (0..1usize << bits)
            .map(|i| if bits == 0 { 0 } else { (i.reverse_bits() >> (usize::BITS - bits)) as u32 })
            .filter(|&c| (c as usize) < cores)
            .collect();
        spread.dedup();
        Ok(Topology { cores, hop, nearest, spread, profile: None })
    }

    /// Hops between cores a and b.
    pub fn hops(&self, a: u32, b: u32) -> u16 {
        (self.hop)(a as usize, b as usize)
    }
}

/// The most cores a spec may have (the hop counts fit a u16 up to this size).
pub const MAX_CORES: usize = 1 << 16;

/// The k cores nearest core c of an x-by-y mesh (or torus, `wrap`) by (hops, core number), in
/// that order: the diamond of radius r around c is enumerated, r growing until it holds k
/// cores, so the work is O(k) per core (O(r^2) with r ~ sqrt(k); a narrow grid, O(k) rows of
/// one), O(C) for the machine, where a row of every distance was O(C) per core, O(C^2) in all.
fn grid_nearest(c: usize, x: usize, y: usize, wrap: bool, k: usize, hop: &dyn Fn(usize, usize) -> u16) -> Vec<u32> {
    let (cx, cy) = ((c % x) as isize, (c / x) as isize);
    let (xi, yi) = (x as isize, y as isize);
    let mut radius = 0isize;
    loop {
        let mut found: Vec<u32> = Vec::new();
        for dy in -radius..=radius {
            let rest = radius - dy.abs();
            for dx in -rest..=rest {
                let (mut px, mut py) = (cx + dx, cy + dy);
                if wrap {
                    px = px.rem_euclid(xi);
                    py = py.rem_euclid(yi);
                } else if px < 0 || px >= xi || py < 0 || py >= yi {
                    continue;
                }
                found.push((py * xi + px) as u32);
            }
        }
        found.sort_unstable();
        found.dedup(); // a torus's diamond wraps onto itself once it is wider than the torus
        // every core within `radius` hops is in the diamond; once there are k, the k nearest are
        if found.len() >= k || radius >= xi + yi {
            found.sort_by_key(|&d| (hop(c, d as usize), d));
            found.truncate(k);
            return found;
        }
        radius += 1;
    }
}

/// The k cores nearest leaf c of a tree (`strides[i]`: leaves under one switch of level i) by
/// (hops, core number): the leaves of ever larger subtrees around c, each a contiguous range of
/// core numbers, the new ones below c's range first: O(k + levels) per core.
fn tree_nearest(c: usize, strides: &[usize], total: usize, k: usize) -> Vec<u32> {
    let mut out = vec![c as u32];
    let (mut lo, mut hi) = (c, c + 1);
    for &stride in strides.iter().rev().chain(std::iter::once(&total)) {
        if out.len() >= k {
            break;
        }
        let (new_lo, new_hi) = (c / stride * stride, (c / stride + 1) * stride);
        let below = (new_lo..lo).take(k - out.len());
        out.extend(below.map(|d| d as u32));
        let above = (hi..new_hi).take(k - out.len());
        out.extend(above.map(|d| d as u32));
        (lo, hi) = (new_lo, new_hi);
    }
    out
}

/// How a task came to be, as the launcher sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Birth {
    /// A thread (clone with CLONE_VM): shares its creator's memory.
    Thread,
    /// A forked process: starts with its parent's pipes and sockets.
    Fork,
}

/// The run-time greedy: places tasks as they appear, counts communication as it is observed.
pub struct OnlineMapper {
    topo: Topology,
    capacity: u32,
    count: Vec<u32>,
    /// Cores with room, in no order, and each core's index in it (u32::MAX: full).
    free: Vec<u32>,
    free_at: Vec<u32>,
    spread_cursor: usize,
    core_of: HashMap<u64, u32>,
    /// Each task's heaviest partner observed so far, and the bytes exchanged with it.
    heaviest: HashMap<u64, (u64, u64)>,
    /// The program's profile (from the topology spec's @FILE), and what it needs: each live
    /// task's clone-tree key, the live task at each key, the children each task made so far.
    profile: Option<Profile>,
    key_of: HashMap<u64, String>,
    task_at: HashMap<String, u64>,
    children: HashMap<u64, u32>,
    rooted: bool,
}

impl OnlineMapper {
    pub fn new(mut topo: Topology, capacity: u32) -> OnlineMapper {
        let n = topo.cores;
        OnlineMapper {
            capacity: capacity.max(1),
            count: vec![0; n],
            free: (0..n as u32).collect(),
            free_at: (0..n as u32).collect(),
            spread_cursor: 0,
            core_of: HashMap::new(),
            heaviest: HashMap::new(),
            profile: topo.profile.take(),
            key_of: HashMap::new(),
            task_at: HashMap::new(),
            children: HashMap::new(),
            rooted: false,
            topo,
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn core_of(&self, task: u64) -> Option<u32> {
        self.core_of.get(&task).copied()
    }

    /// Core for a new task (`parent` None: the program's first task, or one whose creator is
    /// unknown). With a profile, a forked task whose heaviest partner in it is alive goes next to
    /// that partner rather than to its parent (a pipeline's reader next to its writer).
    pub fn spawn(&mut self, task: u64, parent: Option<u64>, birth: Birth) -> u32 {
        let partner = self.recall(task, parent).and_then(|q| self.core_of(q));
        let core = match (parent.and_then(|p| self.core_of(p)), partner) {
            (Some(pc), _) if birth == Birth::Thread && self.has_room(pc) => pc,
            (_, Some(qc)) if birth == Birth::Fork => self.near(qc, true),
            (Some(pc), _) => self.near(pc, birth == Birth::Fork),
            (None, _) => self.far(),
        };
        self.assign(task, core);
        core
    }

    /// Gives a new task its clone-tree key (as `coreplane graph build` numbers tasks: "0", then
    /// the parent's key and the parent's count of children so far) and, if the profile names it,
    /// observes its traffic with the live tasks there; returns its heaviest partner so far.
    fn recall(&mut self, task: u64, parent: Option<u64>) -> Option<u64> {
        let profile = self.profile.as_ref()?;
        let key = match parent {
            Some(p) => {
                let parent_key = self.key_of.get(&p)?;
                let n = self.children.entry(p).or_insert(0);
                *n += 1;
                format!("{parent_key}.{}", *n - 1)
            }
            None if !self.rooted => "0".to_string(),
            None => return None, // a later task of unknown origin: not in the profile's tree
        };
        self.rooted = true;
        let seen: Vec<(u64, u64)> = profile
            .partners(&key)
            .iter()
            .filter_map(|(other, bytes)| self.task_at.get(other).map(|&q| (q, *bytes)))
            .collect();
        self.key_of.insert(task, key.clone());
        self.task_at.insert(key, task);
        for (q, bytes) in seen {
            self.observe(task, q, bytes);
        }
        self.heaviest.get(&task).map(|&(q, _)| q)
    }

    /// A task replaced its program image: it moves next to its heaviest partner seen so far
    /// (if that partner is elsewhere and has room near it); the core it ends on is returned.
    pub fn exec(&mut self, task: u64) -> u32 {
        let here = self.core_of(task).unwrap_or_else(|| self.far());
        let target = self.heaviest.get(&task).and_then(|&(q, _)| self.core_of(q));
        self.release(task);
        let core = match target {
            Some(tc) if self.topo.hops(tc, here) > 1 => self.near(tc, true),
            _ if self.has_room(here) => here,
            _ => self.far(),
        };
        self.assign(task, core);
        core
    }

    /// `bytes` moved between tasks a and b (a pipe, socket or shared-memory hand-off observed).
    pub fn observe(&mut self, a: u64, b: u64, bytes: u64) {
        for (x, y) in [(a, b), (b, a)] {
            let e = self.heaviest.entry(x).or_insert((y, 0));
            if e.0 == y {
                e.1 += bytes;
            } else if bytes > e.1 {
                *e = (y, bytes);
            }
        }
    }

    /// A task ended: its slot is free again.
    pub fn exit(&mut self, task: u64) {
        self.release(task);
        self.heaviest.remove(&task);
        self.children.remove(&task);
        if let Some(key) = self.key_of.remove(&task) {
            self.task_at.remove(&key);
        }
    }

    fn has_room(&self, core: u32) -> bool {
        self.count[core as usize] < self.capacity
    }

    /// The nearest core with room to `core` among CANDIDATES (skipping `core` itself when
    /// `adjacent`: a communicating pair wants two cores one hop apart), else any core with room.
    fn near(&mut self, core: u32, adjacent: bool) -> u32 {
        let row = &self.topo.nearest[core as usize];
        let skip = usize::from(adjacent && row.len() > 1 && self.free.len() > 1);
        if let Some(&c) = row[skip..].iter().find(|&&c| self.has_room(c)) {
            return c;
        }
        self.any()
    }

    /// A core far from the others: the next core with room in the spread order (CANDIDATES tried).
    fn far(&mut self) -> u32 {
        for _ in 0..CANDIDATES {
            let c = self.topo.spread[self.spread_cursor];
            self.spread_cursor = (self.spread_cursor + 1) % self.topo.spread.len();
            if self.has_room(c) {
                return c;
            }
        }
        self.any()
    }

    /// Some core with room; when every core is full, the capacity grows by one (overcommit rather than refuse).
    fn any(&mut self) -> u32 {
        if self.free.is_empty() {
            self.capacity += 1;
            self.free = (0..self.topo.cores as u32).collect();
            self.free_at = (0..self.topo.cores as u32).collect();
        }
        self.free[self.free.len() - 1]
    }

    fn assign(&mut self, task: u64, core: u32) {
        self.core_of.insert(task, core);
        self.count[core as usize] += 1;
        if !self.has_room(core) {
            let at = self.free_at[core as usize] as usize;
            let last = self.free.pop().unwrap();
            if at < self.free.len() {
                self.free[at] = last;
                self.free_at[last as usize] = at as u32;
            }
            self.free_at[core as usize] = u32::MAX;
        }
    }

    fn release(&mut self, task: u64) {
        if let Some(core) = self.core_of.remove(&task) {
            let was_full = !self.has_room(core);
            self.count[core as usize] -= 1;
            if was_full {
                self.free_at[core as usize] = self.free.len() as u32;
                self.free.push(core);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_share_forks_neighbour_independents_spread() {
        let mut m = OnlineMapper::new(Topology::parse("mesh:4x4").unwrap(), 2);
        let root = m.spawn(1, None, Birth::Fork);
        assert_eq!(m.spawn(2, Some(1), Birth::Thread), root);
        let child = m.spawn(3, Some(1), Birth::Fork);
        assert_eq!(m.topology().hops(root, child), 1);
        let lone = m.spawn(4, None, Birth::Fork);
        assert!(m.topology().hops(root, lone) >= 2, "independent task at {lone}, root at {root}");
    }

    #[test]
    fn capacity_is_respected_until_every_core_is_full() {
        let mut m = OnlineMapper::new(Topology::parse("tree:2,4").unwrap(), 1);
        let mut seen = std::collections::HashSet::new();
        for t in 0..8 {
            assert!(seen.insert(m.spawn(t, Some(0), Birth::Thread)), "core reused before all were full");
        }
        let freed = m.core_of(3).unwrap();
        m.exit(3);
        assert_eq!(m.spawn(100, Some(0), Birth::Fork), freed);
        assert_eq!(m.capacity, 1);
        m.spawn(101, Some(0), Birth::Fork); // every core full: overcommit by one
        assert_eq!(m.capacity, 2);
    }

    #[test]
    fn exec_moves_next_to_the_heaviest_partner() {
        let mut m = OnlineMapper::new(Topology::parse("mesh:8x8").unwrap(), 1);
        m.spawn(1, None, Birth::Fork);
        m.spawn(2, None, Birth::Fork);
        m.observe(1, 2, 10);
        m.observe(2, 1, 5000);
        let c = m.exec(2);
        assert_eq!(m.topology().hops(c, m.core_of(1).unwrap()), 1);
    }

    fn profile_file(name: &str, text: &str) -> String {
        let path = std::env::temp_dir().join(format!("coreplane-online-{}-{name}.json", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    #[test]
    fn a_profile_puts_a_pipelines_reader_next_to_its_writer() {
        // sh (key 0) forks the writer (0.0) and then the reader (0.1); by birth alone both go next
        // to sh, two hops apart on a mesh with one task per core; the profile's bytes say the two
        // talk, so the reader goes next to the writer
        let traffic = r#"{"traffic": [{"a": "0.0", "b": "0.1", "bytes": 1048576}, {"a": "0", "b": "0.1", "bytes": 4}]}"#;
        let file = profile_file("pipeline", traffic);
        let mut hops = Vec::new();
        for spec in ["mesh:8x8".to_string(), format!("mesh:8x8@{file}")] {
            let mut m = OnlineMapper::new(Topology::parse(&spec).unwrap(), 1);
            m.spawn(10, None, Birth::Fork);
            let writer = m.spawn(11, Some(10), Birth::Fork);
            let reader = m.spawn(12, Some(10), Birth::Fork);
            hops.push(m.topology().hops(writer, reader));
            m.exit(11); // a key leaves with its task
            assert!(m.task_at.get("0.0").is_none());
            if m.profile.is_some() {
                assert_eq!(m.key_of.get(&12).map(String::as_str), Some("0.1"));
            }
        }
        std::fs::remove_file(&file).unwrap();
        assert_eq!(hops, [2, 1]);
    }

    #[test]
    fn a_profile_weighs_partners_by_bytes_not_by_channels_seen() {
        let file = profile_file("weights", r#"{"traffic": [{"a": "0.0", "b": "0.2", "bytes": 100000}]}"#);
        let mut m = OnlineMapper::new(Topology::parse(&format!("mesh:8x8@{file}")).unwrap(), 1);
        std::fs::remove_file(&file).unwrap();
        m.spawn(1, None, Birth::Fork);
        let writer = m.spawn(2, Some(1), Birth::Fork);
        m.spawn(3, Some(1), Birth::Fork);
        m.spawn(4, Some(1), Birth::Fork);
        m.observe(4, 3, 1); // a channel both hold, seen at the exec: one count against the profile's bytes
        let c = m.exec(4);
        assert_eq!(m.topology().hops(c, writer), 1);
    }

    #[test]
    fn a_malformed_profile_is_one_clear_error() {
        let missing = Topology::parse("mesh:2x2@/nonexistent/map.json").err().unwrap();
        assert!(missing.starts_with("/nonexistent/map.json:"), "{missing}");
        let file = profile_file("bad", r#"{"traffic": [{"a": "0", "b": "0.0", "bytes": 5}, {"a": "0"}]}"#);
        let bad = Topology::parse(&format!("tree:2,2@{file}")).err().unwrap();
        assert!(bad.contains(&file) && bad.contains("traffic[1]"), "{bad}");
        let none = profile_file("none", r#"{"placement": []}"#);
        assert!(Topology::parse(&format!("tree:2,2@{none}")).err().unwrap().contains("'traffic'"));
        std::fs::remove_file(&file).unwrap();
        std::fs::remove_file(&none).unwrap();
    }

    #[test]
    fn nearest_cores_in_closed_form_are_those_of_every_distance_sorted() {
        // the O(C) tables against the O(C^2) definition: every core's row of distances sorted
        // by (hops, core), cut at CANDIDATES + 1; narrow, odd, wrapped-onto-itself and tiny shapes
        for spec in ["mesh:7x5", "mesh:1x13", "mesh:2x2", "torus:6x4", "torus:5x3", "torus:3x1", "torus:9x9",
                     "tree:2,3,4", "tree:32", "tree:3", "tree:2,2,2,2,2", "tree:4,1,3"] {
            let topo = Topology::parse(spec).unwrap();
            for c in 0..topo.cores as u32 {
                let mut row: Vec<u32> = (0..topo.cores as u32).collect();
                row.sort_by_key(|&d| (topo.hops(c, d), d));
                row.truncate(CANDIDATES + 1);
                assert_eq!(topo.nearest[c as usize], row, "{spec}, core {c}");
            }
        }
    }

    #[test]
    fn the_largest_machines_a_spec_allows_are_built_and_no_larger() {
        for spec in ["mesh:256x256", "torus:256x256", "tree:16,16,16,16"] {
            let topo = Topology::parse(spec).unwrap();
            assert_eq!(topo.cores, MAX_CORES);
            let last = (MAX_CORES - 1) as u32;
            assert_eq!(topo.nearest[last as usize][0], last, "{spec}: a core is its own nearest");
            assert!(topo.nearest[last as usize][1..].iter().all(|&d| topo.hops(last, d) <= 4), "{spec}");
        }
        for spec in ["mesh:257x256", "tree:16,16,16,17", "mesh:18446744073709551615x2"] {
            assert!(Topology::parse(spec).is_err(), "{spec}");
        }
    }

    #[test]
    fn malformed_topology_is_one_clear_error() {
        assert!(Topology::parse("ring:4").err().unwrap().contains("ring:4"));
        assert!(Topology::parse("mesh:0x4").is_err());
        assert_eq!(Topology::parse("torus:4x4").unwrap().hops(0, 3), 1);
        assert_eq!(Topology::parse("tree:2,4").unwrap().hops(0, 4), 4);
    }
}
