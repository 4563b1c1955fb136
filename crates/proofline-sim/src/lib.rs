//! A simulated cuzk-shaped prover, for the demo, tests and benchmarks.
//!
//! [`instant`] writes the TIMELINE log of a configured run without sleeping, deterministic
//! for a seed. [`threaded`] runs the same configuration on real threads with real `tracing`
//! spans named as cuzk's, for the layer and the exporters to watch. The shape follows cuzk: a dispatcher hands partitions in (job, partition)
//! order to synthesis workers; synthesized partitions enter one GPU queue in the same order;
//! each GPU has several workers that prepare on the CPU, take the GPU's lock for the kernel,
//! and leave the finalization (which prints GPU_END) to a separate task.

#![warn(missing_docs)]

pub mod instant;
pub mod model;
pub mod threaded;

pub use model::{Faults, GpuPath, JobSpec, ProofKind, SimConfig, TimingLines, Timings};
