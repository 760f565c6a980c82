"""`coreplane bench`: front end of the native micro-benchmarks in crates/bench."""
