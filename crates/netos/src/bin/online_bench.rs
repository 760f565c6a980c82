//! coreplane-online-bench: the time of one run-time placement decision (netos::online) at a given
//! core count, on a synthetic stream of task births (threads, forks), execs, exits and observed
//! traffic; prints JSON (median, p99 and max ns per decision, per topology) on stdout.

use clap::Parser;
use coreplane_netos::online::{Birth, OnlineMapper, Topology};
use serde_json::json;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "coreplane-online-bench", version, about = "Time run-time placement decisions")]
struct Cli {
    /// Topologies to place on (1,024 cores each by default)
    #[arg(long, num_args = 1.., default_values_t = ["mesh:32x32".to_string(), "torus:32x32".to_string(), "tree:8,8,16".to_string()])]
    topology: Vec<String>,
    /// Placement decisions to time per topology
    #[arg(long, default_value_t = 200_000)]
    decisions: usize,
    /// Tasks per core
    #[arg(long, default_value_t = 2)]
    capacity: u32,
}

/// xorshift64*: a fixed, dependency-free stream of choices.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 33) as usize % n.max(1)
    }
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let cli = Cli::parse();
    let mut rows = Vec::new();
    for spec in &cli.topology {
        let started = Instant::now();
        let topo = Topology::parse(spec).unwrap_or_else(|e| {
            eprintln!("coreplane-online-bench: error: {e}");
            std::process::exit(2)
        });
        let cores = topo.cores;
        let mut m = OnlineMapper::new(topo, cli.capacity);
        let setup_s = started.elapsed().as_secs_f64();
        // live tasks stay around the machine's slots: births while below, exits above
        let target = cores * cli.capacity as usize;
        let (mut live, mut next, mut rng) = (Vec::<u64>::new(), 0u64, Rng(0x9E3779B97F4A7C15));
        let mut ns = Vec::with_capacity(cli.decisions);
        while ns.len() < cli.decisions {
            let roll = rng.below(100);
            if !live.is_empty() && roll < 30 {
                let (a, b) = (live[rng.below(live.len())], live[rng.below(live.len())]);
                m.observe(a, b, 64 * (1 + rng.below(1024)) as u64); // observations are not decisions
                continue;
            }
            if live.len() > target || (!live.is_empty() && roll < 45) {
                let i = rng.below(live.len());
                let t = live.swap_remove(i);
                m.exit(t);
                continue;
            }
            let t0 = Instant::now();
            if !live.is_empty() && roll < 55 {
                let t = live[rng.below(live.len())];
                std::hint::black_box(m.exec(t));
            } else {
                let parent = if live.is_empty() || roll < 60 { None } else { Some(live[rng.below(live.len())]) };
                let birth = if roll % 2 == 0 { Birth::Thread } else { Birth::Fork };
                std::hint::black_box(m.spawn(next, parent, birth));
                live.push(next);
                next += 1;
            }
            ns.push(t0.elapsed().as_nanos() as u64);
        }
        ns.sort_unstable();
        let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64;
        rows.push(json!({"topology": spec, "cores": cores, "capacity": cli.capacity, "decisions": ns.len(),
                         "median_ns": percentile(&ns, 0.5), "p99_ns": percentile(&ns, 0.99), "p999_ns": percentile(&ns, 0.999),
                         "max_ns": ns[ns.len() - 1], "mean_ns": mean, "topology_setup_s": setup_s}));
    }
    println!("{}", json!({"rows": rows}));
}
