//! coreplane-partition: minimises a quality function T (the paper's eq. 1-4, or coreplane's
//! critical-path T) over a graph file by greedy multilevel local moving, packs the clusters of
//! each depth into as few processes as T allows, then overlaps clusters; JSON summary on stdout.
//! Input: records {src: u32, dst: u32, weight: f32, kind: u32} (the coreplane-itrace .edges format).
//! Output: PREFIX.membership (u32 cluster per node), PREFIX.replicas ({node: u32, cluster: u32} pairs).

use clap::Parser;
use clap::ValueEnum;
use coreplane_netos::partition::{components, multilevel, overlap, pack, quality, refine_coarse, Graph, Model};

/// Above this many nodes the critical model is not searched from the singletons with its own moves
/// (10^6 nodes: 110 s under load with it, the goal being 60 s).
const OWN_SEARCH_NODES: usize = 50_000;
use serde_json::json;
use std::time::Instant;

#[derive(Clone, Copy, ValueEnum)]
enum ModelName {
    /// T = W_seq + W_par/N + W_c/N, the paper's eq. (1) taken literally
    Eq1,
    /// T = sum over depths of max(largest step's load, the depth's load / N), load = W_u + a*S_u
    Critical,
}

#[derive(Parser)]
#[command(name = "coreplane-partition", version, about = "Partition a graph by the NetworkedOS quality function T")]
struct Cli {
    /// Edge file (16-byte records: src u32, dst u32, weight f32, kind u32)
    #[arg(long)]
    edges: String,
    /// Number of nodes (ids 0..N-1)
    #[arg(long)]
    nodes: usize,
    /// N of eq. (1): available cores
    #[arg(long)]
    cores: f64,
    /// The quality function to minimise
    #[arg(long, value_enum, default_value_t = ModelName::Critical)]
    model: ModelName,
    /// Critical model: what one unit of message weight costs, in units of internal work
    #[arg(long, default_value_t = 1000.0)]
    message_cost: f64,
    /// Critical model: packing may raise T by this fraction to need fewer processes
    #[arg(long, default_value_t = 0.05)]
    slack: f64,
    /// Output prefix for PREFIX.membership and PREFIX.replicas
    #[arg(long)]
    out: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Independent runs from different random orders; the lowest T is kept
    #[arg(long, default_value_t = 1)]
    restarts: u32,
    /// Disjoint clusters only (no instruction replication)
    #[arg(long)]
    no_overlap: bool,
    #[arg(long, default_value_t = 32)]
    max_levels: usize,
}

fn fail(msg: String) -> ! {
    eprintln!("coreplane-partition: {msg}");
    std::process::exit(2);
}

fn main() {
    let cli = Cli::parse();
    let started = Instant::now();
    let raw = std::fs::read(&cli.edges).unwrap_or_else(|e| fail(format!("{}: {e}", cli.edges)));
    if raw.len() % 16 != 0 {
        fail(format!("{}: {} bytes is not a whole number of 16-byte edge records", cli.edges, raw.len()));
    }
    let m = raw.len() / 16;
    let (mut src, mut dst, mut w) = (Vec::with_capacity(m), Vec::with_capacity(m), Vec::with_capacity(m));
    for (r, rec) in raw.chunks_exact(16).enumerate() {
        let a = u32::from_le_bytes(rec[0..4].try_into().unwrap());
        let b = u32::from_le_bytes(rec[4..8].try_into().unwrap());
        let x = f32::from_le_bytes(rec[8..12].try_into().unwrap()) as f64;
        if a as usize >= cli.nodes || b as usize >= cli.nodes {
            fail(format!("{}: record {r}: node {} out of range (--nodes {})", cli.edges, a.max(b), cli.nodes));
        }
        if !(x >= 0.0) {
            fail(format!("{}: record {r}: weight {x} is not a non-negative number", cli.edges));
        }
        src.push(a);
        dst.push(b);
        w.push(x);
    }
    if !(cli.cores >= 1.0) {
        fail(format!("--cores {}: must be at least 1", cli.cores));
    }
    for (option, value) in [("--message-cost", cli.message_cost), ("--slack", cli.slack)] {
        if !(value >= 0.0) {
            fail(format!("{option} {value}: must be a number not below 0"));
        }
    }
    let model = match cli.model {
        ModelName::Eq1 => Model::Eq1 { cores: cli.cores },
        ModelName::Critical => Model::Critical { cores: cli.cores, message_cost: cli.message_cost },
    };
    let g = Graph { n: cli.nodes, src, dst, w, self_w: vec![0.0; cli.nodes] };
    let read_s = started.elapsed().as_secs_f64();
    // the critical model is searched with eq. (1)'s moves (see `multilevel`), and with its own
    // from the singletons only on graphs small enough for its many exact evaluations of T
    let searches = match model {
        Model::Eq1 { .. } => vec![model],
        Model::Critical { cores, .. } if g.n <= OWN_SEARCH_NODES => vec![model, Model::Eq1 { cores }],
        Model::Critical { cores, .. } => vec![Model::Eq1 { cores }],
    };
    let mut best: Option<(Vec<u32>, Vec<coreplane_netos::partition::Level>, f64)> = None;
    for r in 0..cli.restarts.max(1) {
        for search in &searches {
            let (member, levels) = multilevel(&g, search, &model, cli.seed + r as u64, cli.max_levels);
            let k = member.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
            let (q, _) = quality(&g, &member, k, &model);
            if best.as_ref().map_or(true, |b| q.t < b.2) {
                best = Some((member, levels, q.t));
            }
        }
    }
    let (mut found, levels, best_t) = best.unwrap();
    // the components are a candidate of their own: no search level need reach them exactly
    let parts = components(&g);
    let (q, _) = quality(&g, &parts, g.n, &model);
    if q.t < best_t - 1e-12 * best_t.abs().max(1.0) {
        found = parts;
    }
    if let Model::Critical { .. } = model {
        found = refine_coarse(&g, &found, &model, cli.seed, cli.max_levels);
    }
    let k = found.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let (unpacked, _) = quality(&g, &found, k, &model);
    let member = pack(&g, &found, k, &model, cli.slack);
    let moving_s = started.elapsed().as_secs_f64() - read_s;
    let (disjoint, _) = quality(&g, &member, k, &model);
    let ov = if cli.no_overlap { None } else { Some(overlap(&g, &member, k, &model)) };
    let fin = ov.as_ref().map(|o| &o.quality).unwrap_or(&disjoint);
    let mut out = Vec::with_capacity(member.len() * 4);
    for c in &member {
        out.extend_from_slice(&c.to_le_bytes());
    }
    std::fs::write(format!("{}.membership", cli.out), out).unwrap_or_else(|e| fail(format!("{}.membership: {e}", cli.out)));
    let mut rep = Vec::new();
    for (i, c) in ov.as_ref().map(|o| o.replicas.as_slice()).unwrap_or(&[]) {
        rep.extend_from_slice(&i.to_le_bytes());
        rep.extend_from_slice(&c.to_le_bytes());
    }
    std::fs::write(format!("{}.replicas", cli.out), rep).unwrap_or_else(|e| fail(format!("{}.replicas: {e}", cli.out)));
    let doc = json!({
        "nodes": g.n, "edges": g.src.len(), "cores": cli.cores,
        "model": match cli.model { ModelName::Eq1 => "eq1", ModelName::Critical => "critical" },
        "message_cost": cli.message_cost, "slack": cli.slack,
        "clusters": disjoint.clusters, "clusters_before_packing": unpacked.clusters,
        "width": fin.width,
        "t": fin.t, "w_seq": fin.w_seq, "w_par": fin.w_par, "w_c": fin.w_c, "depths": fin.depths,
        "t_disjoint": disjoint.t,
        "replicas": ov.as_ref().map(|o| o.replicas.len()).unwrap_or(0),
        "levels": levels.iter().map(|l| json!({"nodes": l.nodes, "clusters": l.clusters, "t": l.t})).collect::<Vec<_>>(),
        "read_s": read_s, "moving_s": moving_s, "total_s": started.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&doc).expect("serialisable"));
}
