//! coreplane-itrace: layer 0 of the NetworkedOS graph from a ptrace single-stepper (see itrace.rs).
//! The summary is written to PREFIX.json; the traced program keeps stdin, stdout and stderr.

use clap::Parser;

#[derive(Parser)]
#[command(name = "coreplane-itrace", version, about = "Dynamic instructions and their register/memory dependencies")]
struct Cli {
    /// Output prefix: PREFIX.nodes, .edges, .static, .handoffs
    #[arg(long)]
    out: String,
    /// Instructions recorded per window
    #[arg(long, default_value_t = 200_000)]
    window: u64,
    /// Number of windows (the program runs at full speed between them)
    #[arg(long, default_value_t = 1)]
    windows: u32,
    /// Run this long (ms) after exec before the first window
    #[arg(long, default_value_t = 0)]
    start_ms: u64,
    /// Full-speed time (ms) between windows
    #[arg(long, default_value_t = 100)]
    period_ms: u64,
    /// The program and its arguments
    #[arg(trailing_var_arg = true, required = true)]
    argv: Vec<String>,
}

fn main() {
    let cli = Cli::parse();
    let opts_out = cli.out.clone();
    let opts = coreplane_netos::itrace::Options {
        out: cli.out, window: cli.window, windows: cli.windows, start_ms: cli.start_ms,
        period_ms: cli.period_ms, argv: cli.argv,
    };
    match coreplane_netos::itrace::run(&opts) {
        Ok(doc) => {
            // the program owns stdout and stderr: the summary goes next to the other outputs
            let path = format!("{}.json", opts_out);
            if let Err(e) = std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("serialisable")) {
                eprintln!("coreplane-itrace: {path}: {e}");
                std::process::exit(2);
            }
        }
        Err(msg) => {
            eprintln!("coreplane-itrace: {msg}");
            std::process::exit(2);
        }
    }
}
