//! Helpers shared by the end-to-end tests and benchmarks.

use proofline_core::reader::LineFeeder;
use proofline_core::sink::NoUpdates;
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

/// A writer for TIMELINE lines that the test can read back.
#[derive(Clone, Default, Debug)]
pub struct SharedBuf(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuf {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("not poisoned").clone())
            .expect("TIMELINE lines are UTF-8")
    }
}
