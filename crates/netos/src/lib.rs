//! NetworkedOS native parts: `itrace` (layer 0 from a ptrace single-stepper) and `partition`
//! (minimising the quality function T of eq. 1-4 by greedy multilevel local moving), `online`
//! (the run-time greedy mapping, decided as tasks appear).

pub mod itrace;
pub mod online;
pub mod partition;
