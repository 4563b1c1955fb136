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

/// The lines of a TIMELINE log up to the first whose offset is past `offset_ms` (a prover
/// that stopped there), each with its newline.
pub fn lines_until(text: &str, offset_ms: u64) -> String {
    text.lines()
        .take_while(|l| {
            l.split(',')
                .nth(1)
                .and_then(|o| o.parse::<u64>().ok())
                .is_none_or(|o| o <= offset_ms)
        })
        .map(|l| format!("{l}\n"))
        .collect()
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

/// What a run of the cuzk-shaped simulator under the layer gave.
#[derive(Debug)]
pub struct CuzkRun {
    /// The TIMELINE lines the layer wrote.
    pub layer_lines: String,
    /// The TIMELINE lines the simulated cuzk printed itself (its `eprintln!`).
    pub printed: String,
    /// The layer's live report.
    pub report: Report,
    /// The layer's counters.
    pub stats: proofline::StatsSnapshot,
}

/// Runs the threaded simulator (cuzk's shape) at `speed` under a layer built from `builder`
/// (its TIMELINE lines captured), with cuzk's own lines printed beside them; with
/// `via_tracing`, cuzk's `timeline_event()` also logs each line through `tracing` (the
/// one-line adoption change).
pub fn cuzk_run(
    cfg: &proofline_sim::SimConfig,
    speed: f64,
    builder: proofline::Builder,
    via_tracing: bool,
) -> CuzkRun {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use tracing_subscriber::prelude::*;
    let buf = SharedBuf::default();
    let printed = SharedBuf::default();
    let (layer, mut guard) = builder.timeline_to_writer(buf.clone()).build();
    let printer = proofline_sim::threaded::Printer {
        out: Some(Arc::new(std::sync::Mutex::new(printed.clone()))),
        via_tracing,
    };
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        proofline_sim::threaded::run_printing(
            cfg,
            speed,
            false,
            Arc::new(AtomicBool::new(false)),
            Arc::new(proofline_sim::threaded::Progress::default()),
            printer,
        )
    });
    let report = guard
        .shutdown(std::time::Duration::from_secs(20))
        .expect("the layer shuts down");
    CuzkRun {
        layer_lines: buf.text(),
        printed: printed.text(),
        report,
        stats: guard.stats(),
    }
}

/// The lines of a log, sorted (lines from several threads are in no fixed order).
pub fn sorted_lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.lines().collect();
    v.sort_unstable();
    v
}

/// An OTLP/HTTP endpoint on 127.0.0.1 that reads each post and answers 200 with an empty
/// body (or, `answer` false, never answers); its `/v1/traces` URL. For benchmarks and the soak.
pub fn collector(answer: bool) -> String {
    collector_with(move |_, _| answer.then(|| ("200 OK", Vec::new()))).0
}

/// An OTLP/HTTP endpoint on 127.0.0.1 answering the `n`th post (from 0) to `/v1/traces`
/// with `answer(n, body)`: a status line's status and a protobuf body (`None`: never answer,
/// holding the connection); a post to any other path gets a 404. Its `/v1/traces` URL and the
/// count of posts it read. Each answer carries `retry-after: 0`.
pub fn collector_with(
    answer: impl Fn(usize, &[u8]) -> Option<(&'static str, Vec<u8>)> + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let posts = Arc::new(AtomicUsize::new(0));
    let (seen, answer) = (posts.clone(), Arc::new(answer));
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let (seen, answer) = (seen.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    let mut traces = None;
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        traces.get_or_insert_with(|| line.starts_with("POST /v1/traces "));
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = match traces {
                        Some(true) => answer(seen.fetch_add(1, Ordering::SeqCst), &body),
                        _ => Some(("404 Not Found", Vec::new())),
                    };
                    let Some((status, reply)) = answer else {
                        std::thread::sleep(Duration::from_secs(3600));
                        return;
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\nretry-after: 0\r\ncontent-length: {}\r\n\r\n",
                        reply.len()
                    );
                    let _ = w.write_all(head.as_bytes());
                    let _ = w.write_all(&reply);
                }
            });
        }
    });
    (format!("http://{addr}/v1/traces"), posts)
}
