//! Partitioning the application layer by a quality function T (the paper's eq. 1-4, or
//! coreplane's critical-path T): greedy multilevel local moving as in section II-B of the
//! NetworkedOS paper, then packing and overlapping clusters.
//!
//! Two models of T, for clusters u:
//!   W_u   = sum of edge weights with both ends in u (plus the internal weight of aggregated nodes);
//!   S_u   = sum of weights of edges with one end in u (eq. 4): every message counted at both ends;
//!   d_u   = depth of u in the cluster graph (longest path from a cluster with no predecessor,
//!           strongly connected clusters condensed into one step, which they take together).
//! `Model::Eq1`, the paper taken literally (eq. 1-4), N the number of available cores:
//!   T = W_seq + W_par/N + W_c/N, W_seq = sum of W_u over clusters alone at their depth (eq. 2),
//!   W_par = the rest (eq. 3), W_c = sum of S_u.
//!   Its optimum on real programs is the set of weakly connected components: at depth 0 they are
//!   all "parallel", so T = W/N whatever their sizes (one component can hold 99 % of the work).
//! `Model::Critical` (coreplane's): a cluster is a process and runs on one core, so a depth
//!   cannot finish before its largest step, nor before its total load spread over N cores
//!   (Graham's bound), and a process handles its own messages:
//!     L_u = W_u + a*S_u,   L_X = sum of L_u over the clusters u of a condensed step X,
//!     T = sum over depths d of max( max_{X at d} L_X , sum_{X at d} L_X / N ).
//!   a (the message cost) is what one unit of message weight costs in units of internal work. With
//!   a = 1 and every depth balanced (largest step <= share), T is eq. (1) except that a lone
//!   cluster's messages are charged whole, not /N; with unbalanced depths it charges the
//!   critical path eq. (1) ignores. T >= eq. (1)'s T whenever a >= 1.

use std::collections::HashMap;

/// A directed weighted graph; `self_w[i]` is the weight already inside node i (aggregated levels).
pub struct Graph {
    pub n: usize,
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub w: Vec<f64>,
    pub self_w: Vec<f64>,
}

/// The quality function to minimise and the number of cores N it assumes.
#[derive(Clone, Copy)]
pub enum Model {
    Eq1 { cores: f64 },
    Critical { cores: f64, message_cost: f64 },
}

impl Model {
    fn cores(&self) -> f64 {
        match *self {
            Model::Eq1 { cores } | Model::Critical { cores, .. } => cores,
        }
    }
}

/// T and its parts. Eq1: w_seq, w_par, w_c of eq. (1)-(4), t = w_seq + w_par/N + w_c/N.
/// Critical: w_seq = the charge of depths whose largest step dominates (the critical path),
/// w_par = the load of the other depths (charged /N), w_c = sum of S_u (inside the loads).
pub struct Quality {
    pub t: f64,
    pub w_seq: f64,
    pub w_par: f64,
    pub w_c: f64,
    pub clusters: usize,
    pub depths: usize,
    /// the most clusters sharing one depth: how many processes run at once
    pub width: usize,
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

/// Condensed steps of the cluster graph: `comp[u]` for every present cluster u (clusters on a
/// common cycle share one), `depth[X]` of every step X, and how many clusters each step holds.
struct Steps {
    comp: Vec<u32>,
    depth: Vec<u32>,
    members: Vec<u32>,
}

/// Steps of clusters 0..k from the directed cluster-to-cluster edges `qedges` (no self loops;
/// duplicates allowed).
fn steps(k: usize, present: &[bool], qedges: &mut Vec<(u32, u32)>) -> Steps {
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
    let mut members = vec![0u32; nc];
    for c in 0..k {
        if present[c] {
            members[comp[c] as usize] += 1;
        }
    }
    Steps { comp, depth, members }
}

/// The critical model's loads: per cluster L_u = W_u + a*S_u, per step, and per depth the
/// largest step and the sum.
struct Loads {
    load: Vec<f64>,
    step_load: Vec<f64>,
    largest: Vec<f64>,
    sum: Vec<f64>,
}

fn loads(st: &Steps, present: &[bool], w_u: &[f64], s_u: &[f64], message_cost: f64) -> Loads {
    let load: Vec<f64> = w_u.iter().zip(s_u).map(|(&w, &s)| w + message_cost * s).collect();
    let n_depths = st.depth.iter().map(|&d| d as usize + 1).max().unwrap_or(0);
    let mut step_load = vec![0.0f64; st.depth.len()];
    for c in (0..load.len()).filter(|&c| present[c]) {
        step_load[st.comp[c] as usize] += load[c];
    }
    let (mut largest, mut sum) = (vec![0.0f64; n_depths], vec![0.0f64; n_depths]);
    for (x, &l) in step_load.iter().enumerate() {
        let d = st.depth[x] as usize;
        largest[d] = largest[d].max(l);
        sum[d] += l;
    }
    Loads { load, step_load, largest, sum }
}

/// T of `model` from per-cluster internal work `w_u`, message weight `s_u` and the cluster graph;
/// also each cluster's marginal factor (what T gains per unit of load added to it, statuses
/// fixed: 1 on the critical path or alone at its depth, 1/N where the load is shared) and steps.
fn assemble(model: &Model, k: usize, present: &[bool], w_u: &[f64], s_u: &[f64], qedges: &mut Vec<(u32, u32)>) -> (Quality, Vec<f64>, Steps) {
    let st = steps(k, present, qedges);
    let n_depths = st.depth.iter().map(|&d| d as usize + 1).max().unwrap_or(0);
    let mut clusters_at = vec![0usize; n_depths];
    let mut steps_at = vec![0usize; n_depths];
    for c in (0..k).filter(|&c| present[c]) {
        clusters_at[st.depth[st.comp[c] as usize] as usize] += 1;
    }
    for &d in &st.depth {
        steps_at[d as usize] += 1;
    }
    let n = model.cores();
    let w_c: f64 = s_u.iter().sum();
    let mut factor = vec![0.0f64; k];
    let (t, w_seq, w_par) = match *model {
        Model::Eq1 { .. } => {
            let (mut w_seq, mut w_par) = (0.0, 0.0);
            for c in (0..k).filter(|&c| present[c]) {
                if steps_at[st.depth[st.comp[c] as usize] as usize] >= 2 {
                    w_par += w_u[c];
                    factor[c] = 1.0 / n;
                } else {
                    w_seq += w_u[c];
                    factor[c] = 1.0;
                }
            }
            (w_seq + w_par / n + w_c / n, w_seq, w_par)
        }
        Model::Critical { message_cost, .. } => {
            let Loads { step_load, largest, sum, .. } = loads(&st, present, w_u, s_u, message_cost);
            let (mut w_seq, mut w_par) = (0.0, 0.0);
            for d in 0..n_depths {
                if largest[d] >= sum[d] / n {
                    w_seq += largest[d];
                } else {
                    w_par += sum[d];
                }
            }
            for c in (0..k).filter(|&c| present[c]) {
                let x = st.comp[c] as usize;
                let d = st.depth[x] as usize;
                let critical = largest[d] >= sum[d] / n && step_load[x] >= largest[d];
                factor[c] = if critical { 1.0 } else { 1.0 / n };
            }
            (w_seq + w_par / n, w_seq, w_par)
        }
    };
    let q = Quality {
        t,
        w_seq,
        w_par,
        w_c,
        clusters: present.iter().filter(|&&p| p).count(),
        depths: n_depths,
        width: clusters_at.iter().copied().max().unwrap_or(0),
    };
    (q, factor, st)
}

/// Exact T of a disjoint partition of `g` (cluster ids < k), with each cluster's marginal factor.
pub fn quality(g: &Graph, member: &[u32], k: usize, model: &Model) -> (Quality, Vec<f64>) {
    let (q, factor, _) = disjoint(g, member, k, model);
    (q, factor)
}

fn disjoint(g: &Graph, member: &[u32], k: usize, model: &Model) -> (Quality, Vec<f64>, Steps) {
    let (present, w_u, s_u, mut qedges) = weights(g, member, k);
    assemble(model, k, &present, &w_u, &s_u, &mut qedges)
}

/// Which clusters are used, W_u, S_u, and the cluster-to-cluster edges of a disjoint partition.
fn weights(g: &Graph, member: &[u32], k: usize) -> (Vec<bool>, Vec<f64>, Vec<f64>, Vec<(u32, u32)>) {
    let mut w_u = vec![0.0f64; k];
    let mut s_u = vec![0.0f64; k];
    let mut present = vec![false; k];
    for i in 0..g.n {
        present[member[i] as usize] = true;
        w_u[member[i] as usize] += g.self_w[i];
    }
    let mut qedges = Vec::new();
    for e in 0..g.src.len() {
        let (a, b) = (member[g.src[e] as usize], member[g.dst[e] as usize]);
        if a == b {
            w_u[a as usize] += g.w[e];
        } else {
            s_u[a as usize] += g.w[e];
            s_u[b as usize] += g.w[e];
            qedges.push((a, b));
        }
    }
    (present, w_u, s_u, qedges)
}

/// Packs the clusters of each depth into as few processes as the critical model's T allows: two
/// clusters at one depth in different steps have no path between them, so merging them changes
/// no message and no depth, only the load of one process. First-fit decreasing into processes of
/// the depth's charge, max(largest step, load/N), times 1 + `slack`: T rises by at most that
/// fraction (0 keeps it exact; a little slack stops a process being kept for a fraction of a per
/// cent of the work), and what remains is the number of processes the program needs. Clusters on
/// a cycle with others are left as they are.
/// Returns the new membership (cluster ids < k). Eq1 charges a lone cluster in full, so it is
/// returned unchanged.
pub fn pack(g: &Graph, member: &[u32], k: usize, model: &Model, slack: f64) -> Vec<u32> {
    let Model::Critical { cores, message_cost } = *model else {
        return member.to_vec();
    };
    let (present, w_u, s_u, mut qedges) = weights(g, member, k);
    let st = steps(k, &present, &mut qedges);
    let Loads { load, largest, sum, .. } = loads(&st, &present, &w_u, &s_u, message_cost);
    let cap: Vec<f64> = largest.iter().zip(&sum).map(|(&l, &s)| l.max(s / cores) * (1.0 + slack + 1e-9)).collect();
    let n_depths = cap.len();
    let mut items: Vec<usize> = (0..k).filter(|&c| present[c] && st.members[st.comp[c] as usize] == 1).collect();
    items.sort_unstable_by(|&a, &b| load[b].total_cmp(&load[a]).then(a.cmp(&b)));
    let mut bins: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n_depths]; // per depth: (cluster id, load)
    let mut into = (0..k as u32).collect::<Vec<u32>>();
    for c in items {
        let d = st.depth[st.comp[c] as usize] as usize;
        match bins[d].iter_mut().find(|b| b.1 + load[c] <= cap[d]) {
            Some(bin) => {
                bin.1 += load[c];
                into[c] = bin.0;
            }
            None => bins[d].push((c as u32, load[c])),
        }
    }
    member.iter().map(|&c| into[c as usize]).collect()
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
fn local_moving(g: &Graph, model: &Model, rng: &mut Rng, max_passes: usize) -> Vec<u32> {
    let n = g.n;
    let nb = undirected(g);
    let mut member: Vec<u32> = (0..n as u32).collect();
    let mut size = vec![1u32; n];
    let mut empty: Vec<u32> = Vec::new();
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut k_to = vec![0.0f64; n];
    let mut touched: Vec<u32> = Vec::new();
    let cores = model.cores();
    let (mut best_t, mut factor) = {
        let (q, p) = quality(g, &member, n, model);
        (q.t, p)
    };
    // Marginal factors (sequential/critical or parallel) are fixed during a pass, so a pass of many moves can raise
    // the exact T; it is then undone and retried with half as many moves allowed.
    let mut budget = usize::MAX;
    let mut passes = 0;
    while passes < max_passes {
        passes += 1;
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
            let total: f64 = touched.iter().map(|&c| k_to[c as usize]).sum();
            // Eq1: W_a loses k_a + s, messages (all charged /N) gain 2*k_a (eq. 4 counts both ends).
            // Critical: L_a loses k_a + s; its messages gain k_a (now cut) and lose i's others.
            let (leave, join) = match *model {
                Model::Eq1 { .. } => (-factor[a] * (k_a + s) + 2.0 * k_a / cores, None),
                Model::Critical { message_cost, .. } => {
                    (factor[a] * (-(k_a + s) + message_cost * (2.0 * k_a - total)), Some(message_cost))
                }
            };
            // joining c: W_c gains k_c + s; (Critical) its messages lose k_c and gain i's others
            let cost = |k_c: f64, f_c: f64| match join {
                None => f_c * (k_c + s) - 2.0 * k_c / cores,
                Some(m) => f_c * ((k_c + s) + m * (total - 2.0 * k_c)),
            };
            let mut best = (0.0f64, a);
            for &c in &touched {
                let c = c as usize;
                if c == a {
                    continue;
                }
                let delta = leave + cost(k_to[c], factor[c]);
                if delta < best.0 - 1e-12 {
                    best = (delta, c);
                }
            }
            if size[a] > 1 {
                if let Some(&e) = empty.last() {
                    let delta = leave + cost(0.0, 1.0); // a new cluster, assumed sequential
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
        let (q, p) = quality(g, &member, n, model);
        if q.t > best_t - 1e-12 * best_t.abs().max(1.0) {
            (member, size, empty) = saved;
            if moves == 1 {
                break;
            }
            budget = moves / 2;
            continue;
        }
        best_t = q.t;
        factor = p;
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

/// Greedy multilevel local moving (Sec. II-B): move nodes between neighbouring clusters while
/// `search`'s T falls, merge each cluster into one node, repeat until a level changes nothing.
/// Returns the membership of the original nodes (cluster ids 0..k) at the level with the lowest
/// `judge` T. The critical model's T is a sum over depths that one move can reshuffle, so from
/// singletons its own local moves stall; searching with eq. (1), whose levels run from the
/// singletons to the connected components, and judging by the critical T finds its coarse optima.
pub fn multilevel(g0: &Graph, search: &Model, judge: &Model, seed: u64, max_levels: usize) -> (Vec<u32>, Vec<Level>) {
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut to_top: Vec<u32> = (0..g0.n as u32).collect();
    let (q0, _) = quality(g0, &to_top, g0.n, judge);
    let mut levels = vec![Level { nodes: g0.n, clusters: g0.n, t: q0.t }];
    let mut best = (q0.t, to_top.clone());
    let mut owned: Option<Graph> = None;
    for _ in 0..max_levels {
        let g = owned.as_ref().unwrap_or(g0);
        let member = local_moving(g, search, &mut rng, 50);
        let (next, map) = aggregate(g, &member);
        for c in to_top.iter_mut() {
            *c = map[*c as usize];
        }
        let (q, _) = quality(&next, &(0..next.n as u32).collect::<Vec<_>>(), next.n, judge);
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

/// Moves whole clusters of `member` by the critical model's own multilevel search on the graph
/// of clusters (each cluster one node): cheap, since a coarse partition has few clusters, where
/// the same search from the singletons costs many exact evaluations of T. Returns the better of
/// `member` and the result, by `model`'s T.
pub fn refine_coarse(g: &Graph, member: &[u32], model: &Model, seed: u64, max_levels: usize) -> Vec<u32> {
    let (h, map) = aggregate(g, member);
    let (coarse, _) = multilevel(&h, model, model, seed, max_levels);
    let moved: Vec<u32> = map.iter().map(|&c| coarse[c as usize]).collect();
    let k = |m: &[u32]| m.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let (before, _) = quality(g, member, k(member), model);
    let (after, _) = quality(g, &moved, k(&moved), model);
    if after.t < before.t - 1e-12 * before.t.abs().max(1.0) { moved } else { member.to_vec() }
}

/// The weakly connected components of `g` as a membership: no messages at all, the partition
/// eq. (1) prefers and the critical model's when messages cost much more than work.
pub fn components(g: &Graph) -> Vec<u32> {
    let mut parent: Vec<u32> = (0..g.n as u32).collect();
    fn root(parent: &mut [u32], mut i: u32) -> u32 {
        while parent[i as usize] != i {
            parent[i as usize] = parent[parent[i as usize] as usize]; // path halving
            i = parent[i as usize];
        }
        i
    }
    for e in 0..g.src.len() {
        let (a, b) = (root(&mut parent, g.src[e]), root(&mut parent, g.dst[e]));
        if a != b {
            parent[a.max(b) as usize] = a.min(b);
        }
    }
    (0..g.n as u32).map(|i| root(&mut parent, i)).collect()
}

/// Overlapping clusters (Sec. II-B): an instruction may be replicated into a cluster that consumes
/// its result when that lowers T. Exact T with replicas counts a message (i->j, v) for every
/// cluster v holding j but not i, at v and at i's home cluster.
pub struct Overlap {
    pub replicas: Vec<(u32, u32)>,
    pub quality: Quality,
}

pub fn quality_overlap(g: &Graph, member: &[u32], k: usize, replicas: &[(u32, u32)], model: &Model) -> Quality {
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
    assemble(model, k, &present, &w_u, &s_u, &mut qedges).0
}

/// Replicates producers into consumer clusters when the local estimate says T falls, then keeps the
/// replicas only if the exact T (with depths recomputed) is lower than without them.
pub fn overlap(g: &Graph, member: &[u32], k: usize, model: &Model) -> Overlap {
    let (base, factor) = quality(g, member, k, model);
    let (cores, message_cost) = match *model {
        Model::Eq1 { cores } => (cores, 1.0),
        Model::Critical { cores, message_cost } => (cores, message_cost),
    };
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
        let delta = factor[v as usize] * (a + b) + message_cost * 2.0 * (c - a) / cores;
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
        let q = quality_overlap(g, member, k, &replicas, model);
        if q.t < best.quality.t - 1e-12 {
            best = Overlap { replicas, quality: q };
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const EQ1: Model = Model::Eq1 { cores: 2.0 };

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
        let (q, _) = quality(&g, &[0, 0, 1, 2, 2], 3, &EQ1);
        assert_eq!((q.w_seq, q.w_par, q.w_c, q.t), (0.0, 3.0, 2.0, 2.5));
    }

    #[test]
    fn a_cycle_between_clusters_is_one_step() {
        let g = graph(4, &[(0, 1, 1.0), (1, 0, 1.0), (2, 3, 3.0)]);
        let (q, _) = quality(&g, &[0, 1, 2, 2], 3, &EQ1);
        assert_eq!((q.w_par, q.w_c, q.t, q.depths), (3.0, 4.0, 3.5, 1));
    }

    #[test]
    fn replication_of_a_source_removes_its_message() {
        // s->a, s->b; U = {s, a}, V = {b}; s copied into V: no message, both clusters parallel
        let g = graph(3, &[(0, 1, 1.0), (0, 2, 1.0)]);
        let plain = quality_overlap(&g, &[0, 0, 1], 2, &[], &EQ1);
        let with = quality_overlap(&g, &[0, 0, 1], 2, &[(0, 1)], &EQ1);
        assert_eq!((plain.t, with.t, with.w_c), (2.0, 1.0, 0.0));
        assert_eq!(overlap(&g, &[0, 0, 1], 2, &EQ1).replicas, vec![(0, 1)]);
    }

    #[test]
    fn critical_t_by_hand() {
        // the chain-and-pair of the first test, a = 1: loads {a,b} 1 + 1 (message), {c} 1, {d,e} 2;
        // depth 0: max(2, (2 + 2)/2) = 2, depth 1: {c} alone, 1 -> T = 3, two processes at once
        let g = graph(5, &[(0, 1, 1.0), (1, 2, 1.0), (3, 4, 2.0)]);
        let model = Model::Critical { cores: 2.0, message_cost: 1.0 };
        let (q, _) = quality(&g, &[0, 0, 1, 2, 2], 3, &model);
        assert_eq!((q.t, q.w_seq, q.w_par, q.w_c, q.depths, q.width), (3.0, 3.0, 0.0, 2.0, 2, 2));
        // an unbalanced depth is charged its largest process, not its share: eq. (1) says 2.5
        let g = graph(4, &[(0, 1, 6.0), (2, 3, 1.0)]);
        let (q, _) = quality(&g, &[0, 0, 1, 1], 2, &model);
        let (q1, _) = quality(&g, &[0, 0, 1, 1], 2, &EQ1);
        assert_eq!((q.t, q1.t), (6.0, 3.5));
    }

    #[test]
    fn packing_keeps_t_and_leaves_the_processes_the_program_needs() {
        // four components of work 5, 1, 1, 1 on N = 4: the depth costs max(5, 8/4) = 5 however
        // the three small ones are grouped, so they become one process: two in all
        let g = graph(8, &[(0, 1, 5.0), (2, 3, 1.0), (4, 5, 1.0), (6, 7, 1.0)]);
        let model = Model::Critical { cores: 4.0, message_cost: 1.0 };
        let member = [0, 0, 1, 1, 2, 2, 3, 3];
        let packed = pack(&g, &member, 4, &model, 0.0);
        let (before, _) = quality(&g, &member, 4, &model);
        let (after, _) = quality(&g, &packed, 4, &model);
        assert_eq!((before.t, after.t, before.clusters, after.clusters, after.width), (5.0, 5.0, 4, 2, 2));
        // balanced work keeps one process per component
        let g = graph(8, &[(0, 1, 2.0), (2, 3, 2.0), (4, 5, 2.0), (6, 7, 2.0)]);
        let (q, _) = quality(&g, &pack(&g, &member, 4, &model, 0.0), 4, &model);
        assert_eq!(q.clusters, 4);
    }
}
