//! Many provers in one process, for the fleet's load measurement (scripts/bench-fleet.sh
//! with PROVERS_IN_ONE_PROCESS=1): N provers, each with its own engine, Prometheus sink and
//! registry, served by proofline's own endpoint (`proofline_prometheus::serve`: a thread and
//! a socket each), so each exposition is the real one. Each is fed a simulated 8-GPU,
//! every-kind log (one of eight seeds): its first WARM lines at once (every GPU, kind and
//! histogram series exists from the first scrape), then RATE lines a second, ticked every
//! second as `watch` ticks its sinks: counters move and gauges change as a live prover's do.
//! Writes the N addresses, one a line, to ADDR_FILE once all serve; runs until killed.
//!
//!     provers N ADDR_FILE [RATE] [WARM]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proofline_core::reader::LineFeeder;
use proofline_core::sink::{RunInfo, TelemetryCounts, UpdateSink};
use proofline_core::{Engine, EngineConfig};
use proofline_prometheus::{Metrics, PrometheusSink, serve};
use proofline_sim::SimConfig;

struct Prover {
    engine: Engine,
    feeder: LineFeeder,
    sink: PrometheusSink,
    log: Arc<Vec<String>>,
    at: usize,
}

impl Prover {
    fn feed(&mut self, n: usize) {
        let end = (self.at + n).min(self.log.len());
        for line in &self.log[self.at..end] {
            self.feeder
                .feed_line(line.as_bytes(), &mut self.engine, &mut self.sink);
        }
        self.at = end;
        if let Some(o) = self.engine.newest_offset() {
            self.engine.advance(o, &mut self.sink);
        }
        let counts = TelemetryCounts::default();
        self.sink.tick(&self.engine.live(), &counts);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: provers N ADDR_FILE [RATE] [WARM]";
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).expect(usage);
    let addr_file = args.get(2).expect(usage);
    let rate: usize = args.get(3).map_or(10, |a| a.parse().expect(usage));
    let warm: usize = args.get(4).map_or(3000, |a| a.parse().expect(usage));
    let logs: Vec<Arc<Vec<String>>> = (0..8)
        .map(|seed| {
            let mut cfg = SimConfig::mixed(150);
            cfg.gpus = 8;
            cfg.seed = seed;
            Arc::new(
                proofline_sim::instant::log_string(&cfg)
                    .lines()
                    .map(str::to_owned)
                    .collect(),
            )
        })
        .collect();
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut provers = Vec::with_capacity(n);
    let mut servers = Vec::with_capacity(n);
    let mut addrs = String::new();
    for i in 0..n {
        let metrics = Metrics::new();
        let mut sink = PrometheusSink::new(metrics.clone());
        sink.start_run(&RunInfo::new(format!("prover{i}"), epoch));
        let server = serve(metrics, SocketAddr::from(([127, 0, 0, 1], 0))).expect("serve");
        addrs.push_str(&format!("{}\n", server.local_addr()));
        servers.push(server);
        let mut p = Prover {
            engine: Engine::new(EngineConfig::default()),
            feeder: LineFeeder::new(),
            sink,
            log: logs[i % logs.len()].clone(),
            at: 0,
        };
        p.feed(warm);
        provers.push(p);
    }
    std::fs::write(addr_file, addrs).expect("writing the addresses");
    let mut next = Instant::now();
    loop {
        next += Duration::from_secs(1);
        for p in &mut provers {
            p.feed(rate);
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
}
