//! Helpers shared by the end-to-end tests and benchmarks.

use proofline_core::reader::LineFeeder;
use proofline_core::report::NoUpdates;
use proofline_core::{Engine, EngineConfig, Report};

/// Runs a log held in memory through a fresh engine and returns the final report.
pub fn analyze_str(log: &str, cfg: EngineConfig) -> Report {
    analyze_bytes(log.as_bytes(), cfg)
}

/// Runs log bytes through a fresh engine and returns the final report.
pub fn analyze_bytes(mut log: &[u8], cfg: EngineConfig) -> Report {
    let mut engine = Engine::new(cfg);
    let mut feeder = LineFeeder::new();
    feeder
        .feed_all(&mut log, &mut engine, &mut NoUpdates, |_| {})
        .expect("reading memory cannot fail");
    engine.finish(&mut NoUpdates);
    let mut r = engine.report();
    r.lines = feeder.stats;
    r
}
