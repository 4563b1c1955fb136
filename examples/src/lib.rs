//! Examples only: see prover.rs.
