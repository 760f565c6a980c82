//! Partitioning the application layer by the quality function T (eq. 1-4 of the NetworkedOS
//! paper) with the greedy multilevel local-moving scheme of Sec. II-B, then overlapping clusters.
//!
//! T = W_seq + W_par/N + W_c/N  (eq. 1), with, for clusters u:
//!   W_u   = sum of edge weights with both ends in u (plus the internal weight of aggregated nodes);
//!   d_u   = depth of u in the cluster graph (longest path from a cluster with no predecessor,
//!           strongly connected clusters condensed into one step);
//!   W_seq = sum of W_u over clusters alone at their depth (eq. 2);
//!   W_par = sum of W_u over clusters sharing their depth with a cluster of another component (eq. 3);
//!   W_c   = sum over u of S_u, the weight of edges with one end in u (eq. 4): every message is
//!           counted at its sender and at its receiver.
//! N is the number of available cores.

use std::collections::HashMap;

/// A directed weighted graph; `self_w[i]` is the weight already inside node i (aggregated levels).
pub struct Graph {
    pub n: usize,
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub w: Vec<f64>,
    pub self_w: Vec<f64>,
}

pub struct Quality {
    pub t: f64,
    pub w_seq: f64,
    pub w_par: f64,
    pub w_c: f64,
    pub clusters: usize,
    pub depths: usize,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn shuffle(&mut self, v: &mut [u32]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// Depth level of every cluster id (clusters = 0..k) and whether it is parallel (eq. 2/3).
/// `qedges` are the directed cluster-to-cluster edges (no self loops; duplicates allowed).
fn parallel_status(k: usize, present: &[bool], qedges: &mut Vec<(u32, u32)>) -> (Vec<bool>, usize) {
    qedges.sort_unstable();
    qedges.dedup();
    let mut ptr = vec![0usize; k + 1];
    for &(a, _) in qedges.iter() {
        ptr[a as usize + 1] += 1;
    }
    for i in 0..k {
        ptr[i + 1] += ptr[i];
    }
    let adj: Vec<u32> = qedges.iter().map(|e| e.1).collect();
    // Tarjan's SCC, iterative
    let mut index = vec![u32::MAX; k];
    let mut low = vec![0u32; k];
    let mut on_stack = vec![false; k];
    let mut comp = vec![u32::MAX; k];
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, usize)> = Vec::new();
    let mut next_index = 0u32;
    let mut ncomp = 0u32;
    for start in 0..k {
        if !present[start] || index[start] != u32::MAX {
            continue;
        }
        call.push((start as u32, ptr[start]));
        index[start] = next_index;
        low[start] = next_index;
        next_index += 1;
        stack.push(start as u32);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            let v = v as usize;
            if *pos < ptr[v + 1] {
                let w = adj[*pos] as usize;
                *pos += 1;
                if index[w] == u32::MAX {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    call.push((w as u32, ptr[w]));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[v]);
                }
                if low[v] == index[v] {
                    loop {
                        let w = stack.pop().unwrap() as usize;
                        on_stack[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    // longest path over the condensation: Tarjan numbers components in reverse topological order
    let nc = ncomp as usize;
    let mut depth = vec![0u32; nc];
    let mut cedges: Vec<(u32, u32)> = qedges
        .iter()
        .map(|&(a, b)| (comp[a as usize], comp[b as usize]))
        .filter(|(a, b)| a != b)
        .collect();
    cedges.sort_unstable_by(|x, y| y.0.cmp(&x.0)); // sources (high numbers) first
    for (a, b) in cedges {
        let d = depth[a as usize] + 1;
        if d > depth[b as usize] {
            depth[b as usize] = d;
        }
    }
    let mut per_depth: HashMap<u32, u32> = HashMap::new();
    for &d in &depth {
        *per_depth.entry(d).or_insert(0) += 1;
    }
    let parallel = (0..k)
        .map(|c| present[c] && per_depth[&depth[comp[c] as usize]] >= 2)
        .collect();
    (parallel, per_depth.len())
}

/// (W_seq, W_par) of eq. (2) and (3): cluster work summed by whether the cluster is parallel.
fn split_work(parallel: &[bool], w_u: &[f64]) -> (f64, f64) {
    parallel.iter().zip(w_u).fold((0.0, 0.0), |(s, p), (&par, &w)| if par { (s, p + w) } else { (s + w, p) })
}

/// Exact T (eq. 1-4) of a disjoint partition of `g` (cluster ids < k).
pub fn quality(g: &Graph, member: &[u32], k: usize, cores: f64) -> (Quality, Vec<bool>) {
    let mut w_u = vec![0.0f64; k];
    let mut present = vec![false; k];
    for i in 0..g.n {
        present[member[i] as usize] = true;
        w_u[member[i] as usize] += g.self_w[i];
    }
    let mut cut = 0.0;
    let mut qedges = Vec::new();
    for e in 0..g.src.len() {
        let (a, b) = (member[g.src[e] as usize], member[g.dst[e] as usize]);
        if a == b {
            w_u[a as usize] += g.w[e];
        } else {
            cut += g.w[e];
            qedges.push((a, b));
        }
    }
    let (parallel, depths) = parallel_status(k, &present, &mut qedges);
    let (w_seq, w_par) = split_work(&parallel, &w_u);
    let w_c = 2.0 * cut;
    let q = Quality {
        t: w_seq + w_par / cores + w_c / cores,
        w_seq,
        w_par,
        w_c,
        clusters: present.iter().filter(|&&p| p).count(),
        depths,
    };
    (q, parallel)
}

struct Neighbours {
    ptr: Vec<usize>,
    idx: Vec<u32>,
    w: Vec<f64>,
}

fn undirected(g: &Graph) -> Neighbours {
    let mut deg = vec![0usize; g.n + 1];
    for e in 0..g.src.len() {
        if g.src[e] != g.dst[e] {
            deg[g.src[e] as usize + 1] += 1;
            deg[g.dst[e] as usize + 1] += 1;
        }
    }
    for i in 0..g.n {
        deg[i + 1] += deg[i];
    }
    let mut fill = deg.clone();
    let mut idx = vec![0u32; deg[g.n]];
    let mut w = vec![0.0; deg[g.n]];
    for e in 0..g.src.len() {
        let (a, b) = (g.src[e] as usize, g.dst[e] as usize);
        if a == b {
            continue;
        }
        idx[fill[a]] = b as u32;
        w[fill[a]] = g.w[e];
        fill[a] += 1;
        idx[fill[b]] = a as u32;
        w[fill[b]] = g.w[e];
        fill[b] += 1;
    }
    Neighbours { ptr: deg, idx, w }
}

/// One level of local moving (nodes start in singleton clusters). Returns the membership.
fn local_moving(g: &Graph, cores: f64, rng: &mut Rng, max_passes: usize) -> Vec<u32> {
    let n = g.n;
    let nb = undirected(g);
    let mut member: Vec<u32> = (0..n as u32).collect();
    let mut size = vec![1u32; n];
    let mut empty: Vec<u32> = Vec::new();
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut k_to = vec![0.0f64; n];
    let mut touched: Vec<u32> = Vec::new();
    let (mut best_t, mut par) = {
        let (q, p) = quality(g, &member, n, cores);
        (q.t, p)
    };
    // Statuses (sequential/parallel) are fixed during a pass, so a pass of many moves can raise
    // the exact T; it is then undone and retried with half as many moves allowed.
    let mut budget = usize::MAX;
    let mut passes = 0;
    while passes < max_passes {
        passes += 1;
        let f = |c: usize, par: &Vec<bool>| if par[c] { 1.0 / cores } else { 1.0 };
        let saved = (member.clone(), size.clone(), empty.clone());
        rng.shuffle(&mut order);
        let mut moves = 0usize;
        for &i in &order {
            if moves >= budget {
                break;
            }
            let i = i as usize;
            let a = member[i] as usize;
            for p in nb.ptr[i]..nb.ptr[i + 1] {
                let c = member[nb.idx[p] as usize];
                if k_to[c as usize] == 0.0 {
                    touched.push(c);
                }
                k_to[c as usize] += nb.w[p];
            }
            let k_a = k_to[a];
            let s = g.self_w[i];
            // leaving a: W_a loses k_a + s, messages gain 2*k_a (eq. 4 counts both ends)
            let leave = -f(a, &par) * (k_a + s) + 2.0 * k_a / cores;
            let mut best = (0.0f64, a);
            for &c in &touched {
                let c = c as usize;
                if c == a {
                    continue;
                }
                let delta = leave + f(c, &par) * (k_to[c] + s) - 2.0 * k_to[c] / cores;
                if delta < best.0 - 1e-12 {
                    best = (delta, c);
                }
            }
            if size[a] > 1 {
                if let Some(&e) = empty.last() {
                    let delta = leave + s; // a new cluster, assumed sequential
                    if delta < best.0 - 1e-12 {
                        best = (delta, e as usize);
                    }
                }
            }
            let b = best.1;
            if b != a {
                if empty.last() == Some(&(b as u32)) {
                    empty.pop();
                }
                size[a] -= 1;
                size[b] += 1;
                member[i] = b as u32;
                if size[a] == 0 {
                    empty.push(a as u32);
                }
                moves += 1;
            }
            for &c in &touched {
                k_to[c as usize] = 0.0;
            }
            touched.clear();
        }
        if moves == 0 {
            break;
        }
        let (q, p) = quality(g, &member, n, cores);
        if q.t > best_t - 1e-12 * best_t.abs().max(1.0) {
            (member, size, empty) = saved;
            if moves == 1 {
                break;
            }
            budget = moves / 2;
            continue;
        }
        best_t = q.t;
        par = p;
        budget = budget.saturating_mul(2);
    }
    member
}

/// Collapses clusters into nodes: internal weight becomes self weight, edges between clusters are summed.
fn aggregate(g: &Graph, member: &[u32]) -> (Graph, Vec<u32>) {
    let mut renum = vec![u32::MAX; g.n];
    let mut k = 0u32;
    let mut map = vec![0u32; g.n];
    for i in 0..g.n {
        let c = member[i] as usize;
        if renum[c] == u32::MAX {
            renum[c] = k;
            k += 1;
        }
        map[i] = renum[c];
    }
    let mut self_w = vec![0.0; k as usize];
    for i in 0..g.n {
        self_w[map[i] as usize] += g.self_w[i];
    }
    let mut sums: HashMap<(u32, u32), f64> = HashMap::new();
    for e in 0..g.src.len() {
        let (a, b) = (map[g.src[e] as usize], map[g.dst[e] as usize]);
        if a == b {
            self_w[a as usize] += g.w[e];
        } else {
            *sums.entry((a, b)).or_insert(0.0) += g.w[e];
        }
    }
    let mut edges: Vec<_> = sums.into_iter().collect();
    edges.sort_unstable_by(|x, y| x.0.cmp(&y.0));
    let next = Graph {
        n: k as usize,
        src: edges.iter().map(|e| e.0 .0).collect(),
        dst: edges.iter().map(|e| e.0 .1).collect(),
        w: edges.iter().map(|e| e.1).collect(),
        self_w,
    };
    (next, map)
}

pub struct Level {
    pub nodes: usize,
    pub clusters: usize,
    pub t: f64,
}

/// Greedy multilevel local moving (Sec. II-B): move nodes between neighbouring clusters while T
/// falls, merge each cluster into one node, repeat until a level changes nothing. Returns the
/// membership of the original nodes (cluster ids 0..k) at the level with the lowest T.
pub fn multilevel(g0: &Graph, cores: f64, seed: u64, max_levels: usize) -> (Vec<u32>, Vec<Level>) {
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut to_top: Vec<u32> = (0..g0.n as u32).collect();
    let (q0, _) = quality(g0, &to_top, g0.n, cores);
    let mut levels = vec![Level { nodes: g0.n, clusters: g0.n, t: q0.t }];
    let mut best = (q0.t, to_top.clone());
    let mut owned: Option<Graph> = None;
    for _ in 0..max_levels {
        let g = owned.as_ref().unwrap_or(g0);
        let member = local_moving(g, cores, &mut rng, 50);
        let (next, map) = aggregate(g, &member);
        for c in to_top.iter_mut() {
            *c = map[*c as usize];
        }
        let (q, _) = quality(&next, &(0..next.n as u32).collect::<Vec<_>>(), next.n, cores);
        levels.push(Level { nodes: g.n, clusters: next.n, t: q.t });
        if q.t < best.0 - 1e-12 {
            best = (q.t, to_top.clone());
        }
        let done = next.n == g.n || next.n == 1;
        owned = Some(next);
        if done {
            break;
        }
    }
    (best.1, levels)
}

/// Overlapping clusters (Sec. II-B): an instruction may be replicated into a cluster that consumes
/// its result when that lowers T. Exact T with replicas counts a message (i->j, v) for every
/// cluster v holding j but not i, at v and at i's home cluster.
pub struct Overlap {
    pub replicas: Vec<(u32, u32)>,
    pub quality: Quality,
}

pub fn quality_overlap(g: &Graph, member: &[u32], k: usize, replicas: &[(u32, u32)], cores: f64) -> Quality {
    let mut holders: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(i, c) in replicas {
        holders.entry(i).or_default().push(c);
    }
    let inside = |i: u32, c: u32| member[i as usize] == c || holders.get(&i).is_some_and(|v| v.contains(&c));
    let mut w_u = vec![0.0f64; k];
    let mut s_u = vec![0.0f64; k];
    let mut present = vec![false; k];
    let mut qedges = Vec::new();
    for i in 0..g.n {
        present[member[i] as usize] = true;
        w_u[member[i] as usize] += g.self_w[i];
    }
    for e in 0..g.src.len() {
        let (i, j, w) = (g.src[e], g.dst[e], g.w[e]);
        let mut consumers = vec![member[j as usize]];
        if let Some(v) = holders.get(&j) {
            consumers.extend(v);
        }
        for v in consumers {
            if inside(i, v) {
                w_u[v as usize] += w;
            } else {
                s_u[v as usize] += w;
                s_u[member[i as usize] as usize] += w;
                qedges.push((member[i as usize], v));
            }
        }
    }
    let (parallel, depths) = parallel_status(k, &present, &mut qedges);
    let (w_seq, w_par) = split_work(&parallel, &w_u);
    let w_c: f64 = s_u.iter().sum();
    Quality { t: w_seq + w_par / cores + w_c / cores, w_seq, w_par, w_c, clusters: present.iter().filter(|&&p| p).count(), depths }
}

/// Replicates producers into consumer clusters when the local estimate says T falls, then keeps the
/// replicas only if the exact T (with depths recomputed) is lower than without them.
pub fn overlap(g: &Graph, member: &[u32], k: usize, cores: f64) -> Overlap {
    let (base, parallel) = quality(g, member, k, cores);
    let mut in_w = vec![0.0f64; g.n]; // weight into i from outside its home... computed per candidate below
    let mut out_to: HashMap<(u32, u32), f64> = HashMap::new(); // (producer i, consumer cluster v) -> A
    let mut in_from: HashMap<(u32, u32), f64> = HashMap::new(); // (i, cluster p) -> weight p-members -> i
    for e in 0..g.src.len() {
        let (i, j, w) = (g.src[e], g.dst[e], g.w[e]);
        let (ci, cj) = (member[i as usize], member[j as usize]);
        in_w[j as usize] += w;
        *in_from.entry((j, ci)).or_insert(0.0) += w;
        if ci != cj {
            *out_to.entry((i, cj)).or_insert(0.0) += w;
        }
    }
    // candidates whose local estimate (statuses fixed) does not raise T; a copy can also make
    // its consumer cluster parallel, which only the exact T sees, so ties are tried too
    let mut strict = Vec::new();
    let mut ties = Vec::new();
    for (&(i, v), &a) in &out_to {
        let b = in_from.get(&(i, v)).copied().unwrap_or(0.0); // i's inputs already in v
        let c = in_w[i as usize] - b; // inputs that would have to be sent to the replica
        let f_v = if parallel[v as usize] { 1.0 / cores } else { 1.0 };
        let delta = f_v * (a + b) + 2.0 * (c - a) / cores;
        if delta < -1e-12 {
            strict.push((i, v));
        } else if delta <= 1e-12 {
            ties.push((i, v));
        }
    }
    strict.sort_unstable();
    let mut with_ties = [strict.clone(), ties].concat();
    with_ties.sort_unstable();
    let mut best = Overlap { replicas: Vec::new(), quality: base };
    for replicas in [with_ties, strict] {
        if replicas.is_empty() {
            continue;
        }
        let q = quality_overlap(g, member, k, &replicas, cores);
        if q.t < best.quality.t - 1e-12 {
            best = Overlap { replicas, quality: q };
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(u32, u32, f64)]) -> Graph {
        Graph {
            n,
            src: edges.iter().map(|e| e.0).collect(),
            dst: edges.iter().map(|e| e.1).collect(),
            w: edges.iter().map(|e| e.2).collect(),
            self_w: vec![0.0; n],
        }
    }

    #[test]
    fn t_by_hand_matches_the_python_reference() {
        // a->b->c (1 each), d->e (2); clusters {a,b} {c} {d,e}, N = 2:
        // W_par = 1 + 2 (depth 0 holds two clusters), {c} alone at depth 1, W_c = 2 -> T = 3/2 + 2/2
        let g = graph(5, &[(0, 1, 1.0), (1, 2, 1.0), (3, 4, 2.0)]);
        let (q, _) = quality(&g, &[0, 0, 1, 2, 2], 3, 2.0);
        assert_eq!((q.w_seq, q.w_par, q.w_c, q.t), (0.0, 3.0, 2.0, 2.5));
    }

    #[test]
    fn a_cycle_between_clusters_is_one_step() {
        let g = graph(4, &[(0, 1, 1.0), (1, 0, 1.0), (2, 3, 3.0)]);
        let (q, _) = quality(&g, &[0, 1, 2, 2], 3, 2.0);
        assert_eq!((q.w_par, q.w_c, q.t, q.depths), (3.0, 4.0, 3.5, 1));
    }

    #[test]
    fn replication_of_a_source_removes_its_message() {
        // s->a, s->b; U = {s, a}, V = {b}; s copied into V: no message, both clusters parallel
        let g = graph(3, &[(0, 1, 1.0), (0, 2, 1.0)]);
        let plain = quality_overlap(&g, &[0, 0, 1], 2, &[], 2.0);
        let with = quality_overlap(&g, &[0, 0, 1], 2, &[(0, 1)], 2.0);
        assert_eq!((plain.t, with.t, with.w_c), (2.0, 1.0, 0.0));
        assert_eq!(overlap(&g, &[0, 0, 1], 2, 2.0).replicas, vec![(0, 1)]);
    }
}
