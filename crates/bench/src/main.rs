//! coreplane-bench: native micro-benchmarks whose figures are the floors that every other
//! coreplane measurement is divided by. Prints one JSON document on stdout.

mod coverage;
mod cpu;
mod floor;
mod paths;
mod noise;
mod signals;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "coreplane-bench", version, about = "coreplane native micro-benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Physical floor: cache-line ping-pong, raw null syscall, futex wake-up round trip.
    Floor(floor::FloorArgs),
    /// Null syscall timed per call beside the ping-pong of the same cores (run it under coreplane).
    Paths(paths::PathsArgs),
    /// The first calls at 64 distinct syscall sites (the fast path's cold cost: traps, the rewrite).
    Sites,
    /// Which fast-path rewrite each syscall site of ELF files would get (a static count).
    Coverage(coverage::CoverageArgs),
    /// Signal delivery to a handler, where it interrupts program code and a call (run it under coreplane).
    Signals(signals::SignalsArgs),
    /// OS noise: gap detector, FTQ and FWQ (`measure`); SCHED_FIFO noise injectors (`inject`).
    Noise(noise::NoiseArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Floor(args) => floor::run(&args).map(|doc| serde_json::to_value(doc).expect("serialisable")),
        Command::Noise(args) => noise::run(&args),
        Command::Coverage(args) => coverage::run(&args),
        Command::Paths(args) => paths::run(&args).map(|doc| serde_json::to_value(doc).expect("serialisable")),
        Command::Signals(args) => signals::run(&args).map(|doc| serde_json::to_value(doc).expect("serialisable")),
        Command::Sites => Ok(serde_json::to_value(paths::sites()).expect("serialisable")),
    };
    match result {
        Ok(doc) => println!("{}", serde_json::to_string_pretty(&doc).expect("serialisable")),
        Err(msg) => {
            eprintln!("coreplane-bench: {msg}");
            std::process::exit(2);
        }
    }
}
