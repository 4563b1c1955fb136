//! The one background worker: owns the engine, the TIMELINE writer and the sinks.
//!
//! ```text
//!  prover threads ──try_send──► bounded queue ──► proofline-worker: write line, engine.ingest ─► sinks
//!                                                  (blocks for the first, drains the rest,
//!                                                   ticks the engine once a second)
//! ```

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use proofline_core::engine::LiveState;
use proofline_core::report::{TelemetryCounts, Update, UpdateSink};
use proofline_core::{Engine, Report, codec};

use crate::layer::{LayerStats, Msg};

/// Events handled between two ticks at most, so gauges stay fresh under load.
const MAX_BATCH: usize = 4096;

/// Every sink, fed one update at a time.
pub(crate) struct Sinks(pub Vec<Box<dyn UpdateSink + Send>>);

impl UpdateSink for Sinks {
    fn update(&mut self, update: Update) {
        if let Some((last, rest)) = self.0.split_last_mut() {
            for s in rest {
                s.update(update.clone());
            }
            last.update(update);
        }
    }

    fn tick(&mut self, live: &LiveState, counts: &TelemetryCounts) {
        for s in &mut self.0 {
            s.tick(live, counts);
        }
    }
}

pub(crate) struct Worker {
    pub rx: Receiver<Msg>,
    pub engine: Engine,
    pub out: Option<Box<dyn Write + Send>>,
    pub sinks: Sinks,
    pub stats: Arc<LayerStats>,
    pub epoch: Instant,
    pub tick: Duration,
    pub done: Sender<Report>,
}

impl Worker {
    pub fn run(mut self) {
        // Whatever the sinks log must not come back into the prover's subscriber.
        let _quiet = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
        let mut line = String::with_capacity(160);
        let mut last_tick = Instant::now();
        // sinks see the engine's state once a second (gauges), not after every event
        loop {
            let mut stop = false;
            match self.rx.recv_timeout(self.tick) {
                Ok(msg) => {
                    stop |= self.handle(msg, &mut line);
                    for _ in 0..MAX_BATCH {
                        match self.rx.try_recv() {
                            Ok(msg) => stop |= self.handle(msg, &mut line),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stop = true,
            }
            self.flush();
            if stop {
                break;
            }
            if last_tick.elapsed() >= self.tick {
                last_tick = Instant::now();
                let now = self.epoch.elapsed().as_millis() as u64;
                self.engine.advance(now, &mut self.sinks);
                self.tick_sinks();
            }
        }
        // deliver what is still queued, then close the books
        while let Ok(msg) = self.rx.try_recv() {
            self.handle(msg, &mut line);
        }
        self.engine.finish(&mut self.sinks);
        self.tick_sinks();
        self.flush();
        let _ = self.done.send(self.engine.report());
    }

    fn tick_sinks(&mut self) {
        let counts = TelemetryCounts {
            events_dropped: self.stats.dropped.load(Ordering::Relaxed),
            malformed_lines: 0,
        };
        let live = self.engine.live();
        self.sinks.tick(&live, &counts);
    }

    /// Returns true on shutdown.
    fn handle(&mut self, msg: Msg, line: &mut String) -> bool {
        let ev = match msg {
            Msg::Event(ev) => ev,
            Msg::Shutdown => return true,
        };
        if let Some(out) = &mut self.out {
            line.clear();
            codec::write_line(line, &ev);
            line.push('\n');
            // one write per line, so that lines from several writers never interleave
            if out.write_all(line.as_bytes()).is_ok() {
                self.stats.written.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.engine.ingest(&ev.as_event_ref(), &mut self.sinks);
        false
    }

    fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
    }
}
